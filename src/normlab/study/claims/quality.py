"""Claims about final quality and cost: Post-LN's ceiling (C7), RMSNorm's speed (C10),
the final norm (C13), the LLaMA recipe (C15)."""
from __future__ import annotations

import torch

from normlab.bench.norms import bench_norm_group, default_impl
from normlab.bench.steps import bench_steps
from normlab.study.claims.base import (CLAIMS, FAILS, HOLDS, INCONCLUSIVE, LOSS_MARGIN, Claim, Figure, Series,
                                       compare, failures, group, n_seeds, select)
from normlab.study.claims.stability import describe, lr_sweep

TIMING_SHAPES = [(4096, 768)]
STEP_CONFIG = "nanogpt-cpu"  # the training step timed for C10 and C12 (normlab bench's config)
SPEED_SAME = 0.02  # timing ratios within ±2 % of 1 count as "no faster"


def _fixed(preset, **extra):
    return {"train.lr": preset.lr_fixed, "train.warmup_steps": preset.warmup, **extra}


def _at(preset):
    return dict(train__lr=preset.lr_fixed, train__warmup_steps=preset.warmup, model__n_layer=preset.depth)


def loss_bars(records, preset, title, groups: dict[str, dict]) -> Figure:
    labels = list(groups)
    gs = [group(records, **where) for where in groups.values()]
    return Figure(title, "", "final val loss", kind="bar",
                  series=[Series("mean over seeds", labels, [g.mean for g in gs], [g.sd for g in gs])])


@CLAIMS.register("C7")
class PostLNCeilingC7(Claim):
    id, title = "C7", "Tuned Post-LN ends better than Pre-LN"
    statement = ("Post-LN, once it trains (with warmup and tuning), reaches a better final result than Pre-LN of "
                 "the same depth (and transfers/fine-tunes better).")
    sources = "000, 004"

    def runs(self, preset):
        return [r for r in lr_sweep(preset, ("pre", "post")) if r["train.warmup_steps"]]

    def verdict(self, records, measurement, preset):
        best = {}
        for s in ("pre", "post"):
            gs = {lr: group(records, model__scheme=s, train__lr=lr, train__warmup_steps=preset.warmup,
                            model__n_layer=preset.depth) for lr in preset.lrs}
            ok = {lr: g for lr, g in gs.items() if g.mean is not None and g.n_failed == 0}
            best[s] = min(ok.items(), key=lambda kv: kv[1].mean) if ok else None
        if not best["pre"] or not best["post"]:
            return self.make(INCONCLUSIVE, "no converged runs", None, 0, {"lrs": preset.lrs}, "nothing to compare")
        cmp, info = compare(best["post"][1], best["pre"][1])
        verdict = {"better": HOLDS, "worse": FAILS, "same": FAILS}.get(cmp, INCONCLUSIVE)
        summary = (f"best-tuned over lr {preset.lrs} with warmup {preset.warmup}: Post-LN {best['post'][1].mean:.4f} "
                   f"(lr {best['post'][0]:g}) vs Pre-LN {best['pre'][1].mean:.4f} (lr {best['pre'][0]:g}): "
                   f"Post-LN is {cmp}. The fine-tuning/transfer part is not measured by normlab yet.")
        settings = {"lrs": preset.lrs, "warmup_steps": preset.warmup, "n_layer": preset.depth,
                    "steps": preset.base["train.steps"], "margin_nats": LOSS_MARGIN,
                    "selection": "lr with the lowest mean val loss, per scheme (same budget)"}
        return self.make(verdict, "best-tuned Post-LN − Pre-LN val loss (nats)", info.get("diff"),
                         n_seeds(select(records, False, train__warmup_steps=preset.warmup)), settings, summary,
                         comparison=info, best_lr={s: b[0] for s, b in best.items()})


@CLAIMS.register("C10")
class RMSNormC10(Claim):
    id, title = "C10", "RMSNorm is cheaper than LayerNorm and converges as well"
    statement = ("RMSNorm drops the mean subtraction and the bias, costs less (7–64 % less time in the norm; "
                 "10–40 % faster training are the figures quoted) and converges as well as LayerNorm.")
    sources = "001, 002, 003"

    def runs(self, preset):
        return [_fixed(preset, **{"model.scheme": "pre", "model.norm": n}) for n in ("layernorm", "rmsnorm")]

    def measure(self, preset):
        norms = bench_norm_group(TIMING_SHAPES[0], "fp32", preset.timing_repeats, compile=False)
        steps = bench_steps(rounds=preset.timing_repeats, configs=(STEP_CONFIG,), schemes=("pre",),
                            norms=("layernorm", "rmsnorm"), precisions=("fp32",))
        return {"norm_timings": norms, "steps": steps}

    def verdict(self, records, measurement, preset):
        ln, rms = (group(records, model__scheme="pre", model__norm=n, **_at(preset)) for n in ("layernorm", "rmsnorm"))
        cmp, info = compare(rms, ln)
        timing = {(r["norm"], r["impl"]): r["median_s"] for r in measurement["norm_timings"]}
        ours = {n: default_impl(n, "fp32") for n in ("rmsnorm", "layernorm")}  # what a normlab model runs
        norm_ratio = timing["rmsnorm", ours["rmsnorm"]] / timing["layernorm", ours["layernorm"]]
        torch_ratio = timing["rmsnorm", "torch.nn"] / timing["layernorm", "torch.nn"]
        speed = {r["norm"]: r["tokens_per_s"] for r in measurement["steps"] if r["impl"] == "normlab"}
        step_ratio = speed["layernorm"] / speed["rmsnorm"]  # time per step, RMSNorm / LayerNorm
        cheaper = norm_ratio < 1 - SPEED_SAME and step_ratio < 1 - SPEED_SAME
        as_good = cmp in ("same", "better")
        if norm_ratio >= 1 - SPEED_SAME or step_ratio >= 1 - SPEED_SAME or cmp == "worse":
            verdict = FAILS  # not cheaper (whatever the loss says), or clearly worse
        elif cmp in ("too-few-seeds", "unclear"):
            verdict = INCONCLUSIVE
        elif cheaper and as_good:
            verdict = HOLDS
        else:
            verdict = INCONCLUSIVE
        summary = (f"norm forward+backward at {TIMING_SHAPES[0]} fp32: normlab RMSNorm takes {norm_ratio:.2f}× "
                   f"normlab LayerNorm's time (torch.nn: {torch_ratio:.2f}×); a training step takes {step_ratio:.2f}×; "
                   f"final val loss RMSNorm − LayerNorm {info.get('diff', float('nan')):+.4f} ({cmp})")
        settings = {"norm_shape": TIMING_SHAPES[0], "dtype": "fp32", "rounds": preset.timing_repeats,
                    "step_config": f"normlab bench's {STEP_CONFIG}", "implementations": ours, "device": "cpu",
                    "threads": torch.get_num_threads(), "margin_nats": LOSS_MARGIN, "speed_same_band": SPEED_SAME}
        return self.make(verdict, "RMSNorm / LayerNorm norm time (normlab, fwd+bwd)", norm_ratio,
                         n_seeds(select(records, False, model__norm="rmsnorm")), settings, summary,
                         torch_nn_ratio=torch_ratio, step_time_ratio=step_ratio, val_loss=info,
                         layernorm=describe(ln), rmsnorm=describe(rms), timings=measurement["norm_timings"])

    def figures(self, records, measurement, preset):
        rows = measurement["norm_timings"]
        labels = [f"{r['norm']} ({r['impl']})" for r in rows]
        timing = Figure(f"Norm forward+backward time, {TIMING_SHAPES[0]} fp32", "", "median ms", kind="bar",
                        series=[Series("median", labels, [1000 * r["median_s"] for r in rows])])
        return [timing, loss_bars(records, preset, "Final val loss (Pre-LN)", {
            n: dict(model__scheme="pre", model__norm=n, **_at(preset)) for n in ("layernorm", "rmsnorm")})]


@CLAIMS.register("C13")
class FinalNormC13(Claim):
    id, title = "C13", "A Pre-LN stack needs a final norm"
    statement = "A Pre-LN stack needs a final norm before the output head (GPT-2's ln_f)."
    sources = "000, 002"

    def runs(self, preset):
        # "with" is the default (final_norm unset), so it is the same run as C1's and C10's Pre-LN
        return [_fixed(preset, **{"model.scheme": "pre"}), _fixed(preset, **{"model.scheme": "pre", "model.final_norm": False})]

    def verdict(self, records, measurement, preset):
        with_norm = group(records, model__scheme="pre", **_at(preset))
        without = group(records, model__scheme="pre", model__final_norm=False, **_at(preset))
        base = select(records, model__scheme="pre", **_at(preset)) + select(records, model__scheme="pre",
                                                                             model__final_norm=False, **_at(preset))
        cmp, info = compare(without, with_norm)
        if without.n_failed > with_norm.n_failed or cmp == "worse":
            verdict = HOLDS
        elif cmp in ("same", "better"):
            verdict = FAILS
        else:
            verdict = INCONCLUSIVE
        summary = (f"Pre-LN without the final norm ends {info.get('diff', float('nan')):+.4f} nats from Pre-LN with it "
                   f"({cmp}; {failures(without)})")
        settings = {"lr": preset.lr_fixed, "warmup_steps": preset.warmup, "n_layer": preset.depth,
                    "margin_nats": LOSS_MARGIN}
        return self.make(verdict, "val loss without − with final norm (nats)", info.get("diff"),
                         n_seeds(base), settings, summary, comparison=info, with_final_norm=describe(with_norm),
                         without_final_norm=describe(without))

    def figures(self, records, measurement, preset):
        at = dict(model__scheme="pre", **_at(preset))
        return [loss_bars(records, preset, "Pre-LN with and without the final norm",
                          {"final norm": at, "no final norm": dict(at, model__final_norm=False)})]


@CLAIMS.register("C15")
class LlamaRecipeC15(Claim):
    id, title = "C15", "The LLaMA recipe does at least as well as the classic one"
    statement = ("Bias-free linear layers with SwiGLU and RMSNorm (the LLaMA recipe) do at least as well as the "
                 "classic recipe.")
    sources = "003"
    RECIPES = {"llama": {"model.norm": "rmsnorm", "model.mlp": "swiglu", "model.bias": False},
               "classic": {"model.norm": "layernorm", "model.mlp": "gelu", "model.bias": True}}

    def runs(self, preset):
        return [_fixed(preset, **{"model.scheme": "pre", **r}) for r in self.RECIPES.values()]

    def _where(self, preset, recipe):
        return {k.replace(".", "__"): v for k, v in self.RECIPES[recipe].items()} | dict(model__scheme="pre",
                                                                                         **_at(preset))

    def verdict(self, records, measurement, preset):
        llama, classic = (group(records, **self._where(preset, r)) for r in ("llama", "classic"))
        cmp, info = compare(llama, classic)
        speeds = {r: [x.tokens_per_s for x in select(records, **self._where(preset, r)) if x.tokens_per_s]
                  for r in ("llama", "classic")}
        verdict = {"better": HOLDS, "same": HOLDS, "worse": FAILS}.get(cmp, INCONCLUSIVE)
        speed_ratio = (sum(speeds["llama"]) / len(speeds["llama"])) / (sum(speeds["classic"]) / len(speeds["classic"])) \
            if speeds["llama"] and speeds["classic"] else None
        summary = (f"LLaMA recipe − classic val loss {info.get('diff', float('nan')):+.4f} ({cmp}); tokens/s ratio "
                   f"{'n/a' if speed_ratio is None else format(speed_ratio, '.2f')} (from the training runs, "
                   f"which shared the machine with other runs)")
        return self.make(verdict, "val loss LLaMA recipe − classic (nats)", info.get("diff"),
                         n_seeds(select(records, False, model__mlp="swiglu")), {**self.RECIPES, "margin_nats": LOSS_MARGIN},
                         summary, comparison=info, tokens_per_s_ratio=speed_ratio)

    def figures(self, records, measurement, preset):
        return [loss_bars(records, preset, "LLaMA recipe vs classic",
                          {r: self._where(preset, r) for r in ("llama", "classic")})]

