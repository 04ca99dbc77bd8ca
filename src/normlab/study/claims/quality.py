"""Claims about final quality and cost: Post-LN's ceiling (C7), RMSNorm's speed (C10),
the final norm (C13), the LLaMA recipe (C15)."""
from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from normlab.bench.norms import bench_norm_group
from normlab.bench.steps import bench_steps
from normlab.data import DEFAULT_CORPUS
from normlab.config import Change
from normlab.report.figure import Figure, Series
from normlab.study.claims.base import FAILS, HOLDS, INCONCLUSIVE, Claim, Part, claim, combine
from normlab.study.claims.decisions import compare, loss_interval, noninferior, not_worse, worse
from normlab.study.claims.grouping import failures, group, group_record, n_seeds, select
from normlab.study.claims.prose import ci_text, fmt, loss_test, nats, pct, said, sign_p, tost_test
from normlab.study.claims.statistics import LOSS_MARGIN, Level, median_interval
from normlab.study.claims.sweeps import CellClaim, lr_sweep, sweep_figure, trains

TIMING_SHAPES = [(4096, 768)]
STEP_CONFIG = "nanogpt-cpu"  # the training step timed for C10 and C12 (normlab bench's config)
SPEED_SAME = 0.02  # timing ratios within ±2 % of 1 count as "no faster"
# C10 compares algorithms, not implementations: each pair times RMSNorm and LayerNorm written the same way.
# eager: the textbook formulas as plain torch ops; fused: normlab's two C++ kernels (one design); compiled:
# inductor's code for torch.nn's two modules. Not paired: normlab's reference LayerNorm is torch's native fused
# kernel while its reference RMSNorm is plain ops, and torch.nn's two modules differ the same way.
NORM_ALGORITHMS = {"eager": "eager-formula", "fused": "normlab-fast", "compiled": "torch.compile"}
STEP_ALGORITHMS = {"fused": "normlab-fastnorm"}  # a whole training step with both normalizers' fused kernels
DECIDING = "eager"  # the algorithm pair C10's cost part is decided on (see the verdict's settings for why)
# each algorithm as a scope level of C10's verdict, its own level first
IMPLEMENTATIONS = {"eager": "the eager formula", "fused": "the fused kernel", "compiled": "compiled"}


# the first interleaved round of every candidate is discarded, by rule, before anything is read: caches, the
# allocator and compiled code settle there (on the design seeds LayerNorm's first round took 332 ms against about
# 25 ms after it)
WARMUP_ROUNDS = 1


def paired_ratio(a: dict[str, Any], b: dict[str, Any], level: Level) -> dict[str, Any] | None:
    """a's time / b's from interleaved rounds (round r of both timed back to back, so a slow moment of the machine
    cancels), the first `WARMUP_ROUNDS` discarded: the median of the per-round log ratios and its distribution-free
    interval at `level` (`median_interval`), exponentiated. One outlying round moves neither by more than a rank."""
    pairs = [(x, y) for x, y in zip(a.get("samples_s") or [], b.get("samples_s") or []) if x > 0 and y > 0]
    logs = [math.log(x / y) for x, y in pairs[WARMUP_ROUNDS:]]
    if not logs:  # no round past the warm-up: nothing timed to compare
        return None
    ci = median_interval(logs, level.two_sided)
    return {"ratio": math.exp(statistics.median(logs)),
            "ci95": [math.exp(ci[0]), math.exp(ci[1])] if ci else None, "rounds": len(logs)}


def matched(rows: dict[tuple[str, str], dict], algorithms: dict[str, str]) -> dict[str, tuple[dict, dict]]:
    """{algorithm: (RMSNorm's row, LayerNorm's)} for each algorithm both were timed as (`rows` by (norm, impl))."""
    return {a: (rows["rmsnorm", impl], rows["layernorm", impl]) for a, impl in algorithms.items()
            if ("rmsnorm", impl) in rows and ("layernorm", impl) in rows}


def cost_verdict(ratio: dict[str, Any] | None) -> str:
    """RMSNorm costs less: holds when the ratio's interval lies below 1 − SPEED_SAME, does not hold above it."""
    ci = (ratio or {}).get("ci95")
    return INCONCLUSIVE if not ci else HOLDS if ci[1] < 1 - SPEED_SAME else FAILS if ci[0] > 1 - SPEED_SAME \
        else INCONCLUSIVE


def _fixed(preset, **extra) -> Change:
    return Change(lr=preset.lr_fixed, warmup_steps=preset.warmup, **extra)


def _at(preset) -> Change:
    return Change(lr=preset.lr_fixed, warmup_steps=preset.warmup, n_layer=preset.depth)


SPREAD = "Mean over seeds ± one standard deviation, of the runs that trained; the axis fits the values."


def loss_bars(records, preset, title, groups: dict[str, dict]) -> Figure:
    """Final val loss per configuration, as points on an axis fitted to them: a difference of a few hundredths
    of a nat is what these figures are about, and bars from 0 would hide it."""
    labels = list(groups)
    gs = [group(records, **where) for where in groups.values()]
    return Figure(title, "", "final val loss (nats)", kind="dot", caption=SPREAD,
                  series=[Series("mean over seeds", labels, [g.mean for g in gs], [g.sd for g in gs])])


FINETUNE_CORPUS = "paradise_lost"  # Milton, packaged: the transfer half of C7


@claim("C7", "Tuned Post-LN ends better than Pre-LN", sources="000, 004",
       paper="Liu et al. 2020 (Admin, arXiv 2004.08249) §1 and Fig. 1: Post-LN, when it trains, ends better than "
             "Pre-LN; Su Jianlin (spaces.ac.cn/archives/9009) adds that it transfers and fine-tunes better")
class PostLNCeilingC7(CellClaim):
    """Post-LN, once it trains (with warmup and tuning), reaches a better final result than Pre-LN of the same depth
    (and transfers/fine-tunes better).
    """

    gap = ("best-tuned Post-LN", " than Pre-LN")

    @dataclass(frozen=True)
    class Knobs(CellClaim.Knobs):
        init_pass: bool = True  # its verdict flipped with the init in an audit
        # the transfer half: each best-tuned run fine-tuned on the packaged Paradise Lost with these overrides
        finetune: dict[str, Any] = field(default_factory=lambda: {"train.steps": 150, "train.lr": 3e-4,
                                                                  "train.warmup_steps": 15})

    def runs(self, preset):
        extra = self.cell_overrides(preset)
        return [r | extra for r in lr_sweep(preset, ("pre", "post")) if r["train.warmup_steps"]]

    def _at(self, preset, scheme, lr) -> Change:
        """One point of C7's sweep (its run's change): a scheme at an lr, with warmup, at the base depth or in the
        preset's depth cell (`Preset.depth_cell`, where its knob `in_cell` puts C7)."""
        depth, where = self.cell(preset, preset.depth)
        return Change(scheme=scheme, lr=lr, warmup_steps=preset.warmup, n_layer=depth) | where

    def _best(self, records, preset) -> dict[str, tuple[float, Any] | None]:
        """Per scheme, the lr (with warmup) of the lowest mean val loss among lrs where it trains (`trains`)."""
        best = {}
        for s in ("pre", "post"):
            gs = {lr: group(records, **self._at(preset, s, lr)) for lr in preset.lrs}
            ok = {lr: g for lr, g in gs.items() if g.mean is not None and trains(g)}
            best[s] = min(ok.items(), key=lambda kv: kv[1].mean) if ok else None
        return best

    def followups(self, records, preset):
        """Fine-tune every seed of each scheme's best-tuned run on Paradise Lost (same steps and lr for both)."""
        out = []
        for s, chosen in self._best(records, preset).items():
            if chosen is None:
                continue
            for r in select(records, **self._at(preset, s, chosen[0])):
                if r.status == "completed":
                    out.append((r, finetune_overrides(r, self.knobs(preset).finetune)))
        return out

    def settings(self, preset, at, finetune) -> dict[str, Any]:
        return {"lrs": preset.lrs, "warmup_steps": preset.warmup, "n_layer": at["model.n_layer"],
                "steps": at.get("train.steps", preset.config.train.steps), "margin_nats": LOSS_MARGIN,
                "selection": "per scheme, the lr with the lowest mean val loss among lrs where it trains (≥ "
                             "80 % of seeds), same budget; a best lr at the grid's edge is not tuned",
                "rule": f"holds when Post-LN is better by more than the margin ({pct(self.level.two_sided)} "
                        f"interval below 0); does not hold when the {pct(self.level.tost)} interval shows it cannot "
                        "be better by more than the margin",
                "fine_tune": {"corpus": FINETUNE_CORPUS, **finetune}}

    def verdict(self, records, measurement, preset):
        best = self._best(records, preset)
        at = self._at(preset, "pre", preset.lr_fixed)
        finetune = self.knobs(preset).finetune
        settings = self.settings(preset, at, finetune)
        if not best["pre"] or not best["post"]:
            return self.make(INCONCLUSIVE, "no converged runs", None, 0, settings,
                             "one scheme has no lr where it trains: nothing to compare")
        edge = [s for s in ("pre", "post") if best[s][0] in (min(preset.lrs), max(preset.lrs))]
        ft = {s: self._finetuned(records, preset, s, best[s][0]) for s in ("pre", "post")}
        parts, infos = [], {}
        for name, post, pre in (("from scratch", best["post"][1], best["pre"][1]),
                                (f"fine-tuned on {FINETUNE_CORPUS}", ft["post"], ft["pre"])):
            cmp, info = compare(post, pre, self.level,
                                sides=(f"best-tuned Post-LN, {name}", f"best-tuned Pre-LN, {name}"))
            cannot, _ = noninferior(pre, post, self.level)  # Pre-LN not worse than Post-LN by more than the margin
            verdict = (INCONCLUSIVE if edge else HOLDS if cmp == "better" else
                       FAILS if cannot == "not worse" else INCONCLUSIVE)
            infos[name] = (cmp, info)
            parts.append(Part(f"best-tuned Post-LN ends better than Pre-LN, {name}", verdict,
                              f"Post-LN − Pre-LN val loss, {name} (nats)", info.get("diff"), loss_interval(info),
                              loss_test(info), info.get("seeds", []),
                              f"{fmt(info.get('diff'))} nats, {pct(self.level.two_sided)} interval "
                              f"{ci_text(info.get('ci95'))}, "
                              f"{pct(self.level.tost)} {ci_text(info.get('ci90'))} ({said(cmp, self.level)})"
                              + (f"; best lr at the grid's edge for {', '.join(edge)}: not tuned" if edge else "")))
        fell = {s: self._last_quarter_drop(records, preset, s, best[s][0]) for s in ("pre", "post")}
        cmp, info = infos["from scratch"]
        ft_cmp, ft_info = infos[f"fine-tuned on {FINETUNE_CORPUS}"]
        lrs = ", ".join(f"{lr:g}" for lr in preset.lrs)
        summary = (f"best-tuned over lr {lrs} with warmup {preset.warmup}: Post-LN {best['post'][1].mean:.4f} "
                   f"(lr {best['post'][0]:g}) vs Pre-LN {best['pre'][1].mean:.4f} (lr {best['pre'][0]:g}): Post-LN "
                   f"against Pre-LN: {said(cmp, self.level)}; fine-tuned on {FINETUNE_CORPUS} "
                   f"({finetune.get('train.steps')} steps): Post-LN {_mean(ft['post'])} vs Pre-LN "
                   f"{_mean(ft['pre'])}, Post-LN against Pre-LN: {said(ft_cmp, self.level)}; val loss still fell "
                   + ", ".join(f"{s} {fmt(fell[s])}" for s in ("pre", "post"))
                   + " nats over the last quarter (reported: the comparison is at a matched budget)"
                   + (f"; best lr at the grid's edge for {', '.join(edge)}: not tuned, a wider grid would decide"
                      if edge else ""))
        return self.make(None, "best-tuned Post-LN − Pre-LN val loss (nats)", info.get("diff"),
                         n_seeds(select(records, False, warmup_steps=preset.warmup)), settings, summary,
                         parts=parts, interval=loss_interval(info), test=loss_test(info), seeds=info.get("seeds"),
                         comparison=info, best_lr={s: b[0] for s, b in best.items()},
                         last_quarter_drop=fell, lr_at_grid_edge=edge, finetune=ft_info, finetune_cmp=ft_cmp,
                         finetune_pre=group_record(ft["pre"]), finetune_post=group_record(ft["post"]))

    def _last_quarter_drop(self, records, preset, scheme, lr) -> float | None:
        """Mean over seeds of the val-loss drop from the last eval at or before 75 % of training to the end."""
        drops = []
        for r in select(records, **self._at(preset, scheme, lr)):
            curve = [(s, v) for s, v in r.val_curve if v is not None]
            if r.status != "completed" or len(curve) < 2:
                continue
            cut = 0.75 * curve[-1][0]
            earlier = [v for s, v in curve[:-1] if s <= cut]
            if earlier:
                drops.append(earlier[-1] - curve[-1][1])
        return sum(drops) / len(drops) if drops else None

    def _finetuned(self, records, preset, scheme, lr):
        """The fine-tuned runs of this scheme's best-lr runs (found by the source run's directory name)."""
        sources = {r.id for r in select(records, **self._at(preset, scheme, lr))}
        tuned = [r for r in records if r.get("train.init_from") and Path(r.get("train.init_from")).name in sources
                 and r.get("data.path") == FINETUNE_CORPUS]
        return group(tuned, strict=False)

    def figures(self, records, measurement, preset):
        best = self._best(records, preset)
        stages = ["pretrained (best lr)", f"fine-tuned on {FINETUNE_CORPUS}"]
        fig = Figure("Best-tuned Post-LN vs Pre-LN: pretraining and fine-tuning", "", "final val loss (nats)",
                     kind="dot", caption=SPREAD)
        for s in ("pre", "post"):
            if best[s]:
                gs = [best[s][1], self._finetuned(records, preset, s, best[s][0])]
                fig.series.append(Series(f"{s} (lr {best[s][0]:g})", stages, [g.mean for g in gs],
                                         [g.sd for g in gs]))
        where = {k: v for k, v in self._at(preset, "pre", preset.lr_fixed).items()
                 if k not in ("model.scheme", "train.lr", "train.warmup_steps")}
        return [fig, sweep_figure(records, preset, ("pre", "post"), "Final val loss vs lr (C7 uses warmup)", **where)]


def finetune_overrides(source, finetune: dict[str, Any]) -> Change:
    """The fine-tune of a trained run: the packaged second corpus in the source's vocabulary, C7's fine-tuning
    budget (its knob `finetune`), and no layer-skip ablation (the run's val loss is what C7 reads)."""
    return Change(path=FINETUNE_CORPUS, vocab_from=source.get("data.path") or DEFAULT_CORPUS,
                  layer_skip=False) | finetune


def _mean(g) -> str:
    return "n/a" if g.mean is None else f"{g.mean:.4f} ({failures(g)})"


@claim("C10", "RMSNorm is cheaper than LayerNorm and converges as well", sources="001, 002, 003",
       paper="Zhang & Sennrich 2019 (RMSNorm, arXiv 1910.07467) §5–6: 7–64 % less time")
class RMSNormC10(Claim):
    """RMSNorm drops the mean subtraction and the bias, costs less (7–64 % less time in the norm; 10–40 % faster
    training are the figures quoted) and converges as well as LayerNorm.
    """

    @dataclass(frozen=True)
    class Knobs(Claim.Knobs):
        rounds: bool = True  # a next round is 2 small runs a seed
        init_pass: bool = True  # cheap: its 2 small runs again under the other init
        # interleaved rounds of each timed norm and step, sized on the design seeds: the first is a warm-up; the
        # median's order-statistic interval needs 11 at a Holm step's level over 16 claims (2·½ⁿ ≤ α at 0.00094),
        # and the standard preset's design study (9 rounds) projected about 75 to decide its ratio: 80 past the
        # warm-up, about 2 minutes of timing once per study
        repeats: int = 81

    def reading(self, value):
        return f"RMSNorm's norm takes {value:.2f}× LayerNorm's time, forward + backward as the same formula"

    def runs(self, preset):
        return [_fixed(preset, scheme="pre", norm=n) for n in ("layernorm", "rmsnorm")]

    def measure(self, preset):
        repeats = self.knobs(preset).repeats
        norms = bench_norm_group(TIMING_SHAPES[0], "fp32", repeats, compile=True)
        steps = bench_steps(rounds=repeats, configs=(STEP_CONFIG,), schemes=("pre",),
                            norms=("layernorm", "rmsnorm"), precisions=("fp32",), impls=tuple(STEP_ALGORITHMS.values()))
        return {"norm_timings": norms, "steps": steps}

    @staticmethod
    def settings(repeats: int) -> dict[str, Any]:
        return {"norm_shape": TIMING_SHAPES[0], "dtype": "fp32", "rounds": repeats,
                "norm_algorithms": NORM_ALGORITHMS, "step_algorithms": STEP_ALGORITHMS, "deciding": DECIDING,
                "deciding_why": "Zhang & Sennrich time each normalizer written in its framework's own ops; the "
                                "eager formulas are that comparison here, the others are reported beside it",
                "step_config": f"normlab bench's {STEP_CONFIG}", "device": "cpu",
                "threads": torch.get_num_threads(), "margin_nats": LOSS_MARGIN, "speed_same_band": SPEED_SAME}

    def verdict(self, records, measurement, preset):
        repeats = self.knobs(preset).repeats
        ln, rms = (group(records, scheme="pre", norm=n, **_at(preset)) for n in ("layernorm", "rmsnorm"))
        ni, info = noninferior(rms, ln, self.level, sides=("RMSNorm", "LayerNorm"))
        if not measurement:
            return self.make(INCONCLUSIVE, "not measured", None, 0, {"norm_shape": TIMING_SHAPES[0]},
                             "the norm and step timings were not measured")
        rows = {(r["norm"], r["impl"]): r for r in measurement["norm_timings"]}
        # RMSNorm's time / LayerNorm's, each pair one algorithm: what the claim is about, not whose kernel is better;
        # each implementation a user meets, as (RMSNorm's rows, LayerNorm's): the norm alone, and a training step
        pairs, step_pairs = (matched(rows, NORM_ALGORITHMS),
                             matched({(r["norm"], r["impl"]): r for r in measurement["steps"]}, STEP_ALGORITHMS))
        ratios = {a: r for a, pair in pairs.items() if (r := paired_ratio(*pair, self.level))}
        step_ratios = {a: r for a, pair in step_pairs.items() if (r := paired_ratio(*pair, self.level))}
        torch_ratio = (rows["rmsnorm", "torch.nn"]["median_s"] / rows["layernorm", "torch.nn"]["median_s"]
                       if ("rmsnorm", "torch.nn") in rows and ("layernorm", "torch.nn") in rows else None)
        decided = ratios.get(DECIDING)
        cost = Part(f"RMSNorm costs less in the norm itself (forward + backward, {DECIDING} algorithm: "
                    f"{NORM_ALGORITHMS[DECIDING]})", cost_verdict(decided),
                    "RMSNorm / LayerNorm time of the norm's forward + backward",
                    decided and decided["ratio"], decided and decided["ci95"],
                    f"paired by interleaved round, the first {WARMUP_ROUNDS} discarded: the median of the per-round "
                    f"log ratio over {decided['rounds'] if decided else 0} rounds and its order-statistic interval, "
                    f"{pct(self.level.two_sided)}; holds below {1 - SPEED_SAME:g}", [],
                    ", ".join(f"{a} {r['ratio']:.2f}× {ci_text(r['ci95'], '.2f')}" for a, r in ratios.items()),
                    bounds=(1 - SPEED_SAME,), rounds=decided["rounds"] if decided else repeats, scale="log")
        converge = Part(f"RMSNorm converges as well as LayerNorm (within {LOSS_MARGIN:g} nats)",
                        HOLDS if ni == "not worse" else FAILS if ni == "worse" else INCONCLUSIVE,
                        "RMSNorm − LayerNorm final val loss (nats)", info.get("diff"), info.get("ci90"),
                        tost_test(info, self.level), info.get("seeds", []),
                        f"{nats(info.get('diff'))}, {pct(self.level.tost)} interval "
                        f"{ci_text(info.get('ci90'))} "
                        f"({said(ni, self.level)})")
        summary = (f"norm forward+backward at {TIMING_SHAPES[0]} fp32, RMSNorm/LayerNorm time as the same algorithm "
                   f"(paired by round, {pct(self.level.two_sided)}): "
                   + ", ".join(f"{a} {r['ratio']:.2f}× {ci_text(r['ci95'], '.2f')}" for a, r in ratios.items())
                   + "; a whole training step, RMSNorm/LayerNorm time: "
                   + ", ".join(f"{a} norms {r['ratio']:.2f}× {ci_text(r['ci95'], '.2f')}"
                               for a, r in step_ratios.items())
                   + (f" (torch.nn's two modules, which are different kernels: {torch_ratio:.2f}×)" if torch_ratio else "")
                   + f"; final val loss RMSNorm − LayerNorm {nats(info.get('diff'))} ({said(ni, self.level)})")
        verdict = self.make(None, f"RMSNorm / LayerNorm norm time ({DECIDING})", decided and decided["ratio"],
                         n_seeds(select(records, False, norm="rmsnorm")), self.settings(repeats), summary,
                         parts=[cost, converge], interval=decided and decided["ci95"], test=cost.test,
                         seeds=info.get("seeds"), norm_time_ratio=ratios, step_time_ratio=step_ratios,
                         torch_nn_ratio=torch_ratio, val_loss=info,
                         layernorm=group_record(ln), rmsnorm=group_record(rms), timings=measurement["norm_timings"])
        levels = self.implementations(pairs, step_pairs, converge.verdict, noninferior(rms, ln, self.level.split(2))[0])
        return dataclasses.replace(verdict, scope={"implementation": levels}) if levels else verdict

    def implementations(self, pairs: dict, step_pairs: dict, converge: str, converge_strict: str) -> dict[str, str]:
        """The claim at each implementation a user meets (each a scope level: their decisive verdicts disagreeing,
        the outcome depends on the implementation): the cost part there with the same convergence part, judged
        as the claim's own verdict is: a "does not hold" needs a part past the level split over its two parts
        (`Claim.corrected`), so the eager level is the verdict itself. `converge_strict`: the convergence test's
        outcome at that split level."""
        strict = self.level.split(2)
        converge_at_strict = {"not worse": HOLDS, "worse": FAILS}.get(converge_strict, INCONCLUSIVE)

        def at(pair) -> str:
            word = combine([Part("", cost_verdict(paired_ratio(*pair, self.level)), "", None),
                            Part("", converge, "", None)])
            if word != FAILS:
                return word
            return FAILS if FAILS in (cost_verdict(paired_ratio(*pair, strict)), converge_at_strict) else INCONCLUSIVE
        return {**{IMPLEMENTATIONS[a]: at(pair) for a, pair in pairs.items()},
                **{f"a training step ({a} norms)": at(pair) for a, pair in step_pairs.items()}}

    def figures(self, records, measurement, preset):
        rows = measurement["norm_timings"]
        labels = [f"{r['norm']} ({r['impl']})" for r in rows]
        timing = Figure(f"Norm forward+backward time, {TIMING_SHAPES[0]} fp32", "", "median time (ms)", kind="bar",
                        series=[Series("median", labels, [1000 * r["median_s"] for r in rows])])
        return [timing, loss_bars(records, preset, "Final val loss (Pre-LN)", {
            n: Change(scheme="pre", norm=n) | _at(preset) for n in ("layernorm", "rmsnorm")})]


@claim("C13", "A Pre-LN stack needs a final norm", sources="000, 002",
       paper="Radford et al. 2019 (GPT-2) §2.3: a final layer norm after the last block")
class FinalNormC13(Claim):
    """A Pre-LN stack needs a final norm before the output head (GPT-2's ln_f)."""

    init = "gpt2"  # the claim is GPT-2's: judged under GPT-2's init, re-measured under Xiong et al.'s

    gap = ("without its final norm the stack", "")

    @dataclass(frozen=True)
    class Knobs(Claim.Knobs):
        rounds: bool = True  # a next round is 2 small runs a seed
        init_pass: bool = True  # its verdict flipped with the init in an audit

    def runs(self, preset):
        # "with" is the default (final_norm unset), so it is the same run as C1's and C10's Pre-LN
        return [_fixed(preset, scheme="pre"), _fixed(preset, scheme="pre", final_norm=False)]

    def verdict(self, records, measurement, preset):
        with_norm = group(records, scheme="pre", **_at(preset))
        without = group(records, scheme="pre", final_norm=False, **_at(preset))
        base = select(records, scheme="pre", **_at(preset)) + select(records, scheme="pre", final_norm=False,
                                                                      **_at(preset))
        # needed: without it the stack is worse; not needed: it is not worse by more than the margin
        needed = worse(without, with_norm, self.level, sides=("without final norm", "with final norm"))
        cmp, info, failed = needed.outcome, needed.info, needed.failed
        summary = (f"Pre-LN without the final norm − with it: {nats(info.get('diff'))} "
                   f"({pct(self.level.two_sided)} interval {ci_text(info.get('ci95'))}, {pct(self.level.tost)} "
                   f"{ci_text(info.get('ci90'))}; {said(cmp, self.level)}; "
                   f"{failures(without)}{sign_p(failed)})")
        settings = {"lr": preset.lr_fixed, "warmup_steps": preset.warmup, "n_layer": preset.depth,
                    "margin_nats": LOSS_MARGIN,
                    "rule": f"holds when the stack without it is worse by more than the margin "
                            f"({pct(self.level.two_sided)} interval above "
                            f"0) or fails to train more often; does not hold when its {pct(self.level.tost)} interval "
                            "lies below +margin (not needed)"}
        return self.make(needed.verdict, "val loss without − with final norm (nats)", info.get("diff"),
                         n_seeds(base), settings, summary, interval=loss_interval(info), test=loss_test(info, failed),
                         seeds=info.get("seeds"), comparison=info, with_final_norm=group_record(with_norm),
                         without_final_norm=group_record(without))

    def figures(self, records, measurement, preset):
        at = Change(scheme="pre") | _at(preset)
        return [loss_bars(records, preset, "Pre-LN with and without the final norm",
                          {"final norm": at, "no final norm": at | Change(final_norm=False)})]


@claim("C15", "The LLaMA recipe does at least as well as the classic one", sources="003",
       paper="Touvron et al. 2023 (LLaMA, arXiv 2302.13971) §2.2: pre-normalization with RMSNorm, SwiGLU; "
             "Shazeer 2020 (arXiv 2002.05202)")
class LlamaRecipeC15(Claim):
    """Bias-free linear layers with SwiGLU and RMSNorm (the LLaMA recipe) do at least as well as the classic recipe."""

    # LLaMA's paper states no init; the GPT-style codebases its recipe is trained in (nanoGPT, litgpt) use GPT-2's
    init = "gpt2"
    RECIPES = {"llama": Change(norm="rmsnorm", mlp="swiglu", bias=False),
               "classic": Change(norm="layernorm", mlp="gelu", bias=True)}

    gap = ("the LLaMA recipe", " than the classic one")

    @dataclass(frozen=True)
    class Knobs(Claim.Knobs):
        rounds: bool = True  # a next round is 2 small runs a seed
        init_pass: bool = True  # cheap: its 2 small runs again under the other init

    def runs(self, preset):
        return [_fixed(preset, scheme="pre", **r) for r in self.RECIPES.values()]

    def _where(self, preset, recipe):
        return self.RECIPES[recipe] | Change(scheme="pre") | _at(preset)

    def verdict(self, records, measurement, preset):
        llama, classic = (group(records, **self._where(preset, r)) for r in ("llama", "classic"))
        as_well = not_worse(llama, classic, self.level, sides=("LLaMA recipe", "classic"))
        cmp, info = as_well.outcome, as_well.info
        speeds = {r: [x.tokens_per_s for x in select(records, **self._where(preset, r)) if x.tokens_per_s]
                  for r in ("llama", "classic")}
        speed_ratio = (sum(speeds["llama"]) / len(speeds["llama"])) / (sum(speeds["classic"]) / len(speeds["classic"])) \
            if speeds["llama"] and speeds["classic"] else None
        summary = (f"LLaMA recipe − classic val loss {nats(info.get('diff'))}, {pct(self.level.tost)} "
                   f"interval {ci_text(info.get('ci90'))} ({said(cmp, self.level)}); "
                   f"tokens/s ratio "
                   f"{'n/a' if speed_ratio is None else format(speed_ratio, '.2f')} (from the training runs, "
                   f"which shared the machine with other runs)")
        return self.make(as_well.verdict, "val loss LLaMA recipe − classic (nats)", info.get("diff"),
                         n_seeds(select(records, False, mlp="swiglu")),
                         {**{r: dict(o) for r, o in self.RECIPES.items()}, "margin_nats": LOSS_MARGIN,
                          "rule": f"at least as well: non-inferiority, the {pct(self.level.tost)} interval of LLaMA "
                                  "− classic below +margin; does not hold when it lies above +margin"},
                         summary, interval=info.get("ci90"), test=tost_test(info, self.level), seeds=info.get("seeds"),
                         comparison=info, tokens_per_s_ratio=speed_ratio)

    def figures(self, records, measurement, preset):
        return [loss_bars(records, preset, "LLaMA recipe vs classic",
                          {r: self._where(preset, r) for r in ("llama", "classic")})]

