"""Claims about whether a placement trains at all: warmup (C1), depth (C4), learning rate (C11),
very deep DeepNorm (C8), Peri-LN as a stabilizer (C14)."""
from __future__ import annotations

from typing import Any

from normlab.study.claims.base import (CLAIMS, FAILS, HOLDS, INCONCLUSIVE, LOSS_MARGIN, MIN_SEEDS, Claim, Figure,
                                       Series, compare, failures, from_runs, group, n_seeds, said, select,
                                       setting_text, spearman)

SCHEME_NAMES = {"pre": "Pre-LN", "post": "Post-LN", "peri": "Peri-LN", "deepnorm": "DeepNorm"}  # in summaries
CONVERGED_WITHIN = 1.10  # "converges": no seed diverged and mean val loss ≤ 1.10 × the sweep's best


def lr_sweep(preset, schemes: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{"model.scheme": s, "train.lr": lr, "train.warmup_steps": w}
            for s in schemes for lr in preset.lrs for w in (0, preset.warmup)]


def depth_sweep(preset, schemes: tuple[str, ...], depths: list[int] | None = None, **extra) -> list[dict[str, Any]]:
    return [{"model.scheme": s, "model.n_layer": d, "train.lr": preset.lr_fixed,
             "train.warmup_steps": preset.warmup, **extra} for s in schemes for d in (depths or preset.depths)]


def describe(g) -> dict[str, Any]:
    """One configuration over seeds: the loss of the runs that trained (mean, sd, 95 % t interval), and the
    runs that did not, as a rate with its 95 % Wilson interval; `two_mode` when some seeds trained and some not."""
    interval = g.failure_interval
    return {"setting": setting_text(g.where), "mean_val_loss": g.mean, "sd": g.sd, "mean_ci95": g.mean_interval,
            "n_runs": g.n_runs,
            "n_trained": g.n, "n_diverged": g.n_diverged, "n_failed_to_train": g.n_failed_to_train,
            "did_not_train_rate": g.failure_rate, "did_not_train_ci95": list(interval) if interval else None,
            "two_mode": g.two_mode}


def sweep_table(records, preset, schemes, warmups=None) -> dict[str, Any]:
    """{scheme: {warmup: {lr: group description}}} over the lr sweep at the base depth."""
    return {s: {str(w): {f"{lr:g}": describe(group(records, model__scheme=s, train__lr=lr, train__warmup_steps=w,
                                                    model__n_layer=preset.depth))
                        for lr in preset.lrs} for w in (warmups or (0, preset.warmup))} for s in schemes}


OMITTED = ("Mean over seeds ± one standard deviation, of the runs that trained; a point is missing where no "
           "run did (diverged, or failed to train: see the heatmap of runs that did not train).")


def sweep_figure(records, preset, schemes, title, warmups=None) -> Figure:
    fig = Figure(title, "learning rate", "final val loss (nats)", kind="line", logx=True, caption=OMITTED)
    for s in schemes:
        for w in (warmups or (0, preset.warmup)):
            gs = [group(records, model__scheme=s, train__lr=lr, train__warmup_steps=w, model__n_layer=preset.depth)
                  for lr in preset.lrs]
            fig.series.append(Series(trained_label(f"{s}, warmup {w}", gs), list(preset.lrs), [g.mean for g in gs],
                                     [g.sd for g in gs]))
    return fig


def trained_label(label: str, groups) -> str:
    """A series' legend label, saying so when none of its runs trained (it has no point to show)."""
    if any(g.n_runs for g in groups) and all(g.mean is None for g in groups):
        return f"{label}: no run trained"
    return label


@CLAIMS.register("C1")
class WarmupC1(Claim):
    id, title = "C1", "Pre-LN needs no warmup; Post-LN does"
    statement = ("Pre-LN trains stably without learning-rate warmup; Post-LN needs warmup and, without it, "
                 "diverges or ends clearly worse at the same learning rate.")
    sources = "000, 001, 002, 003"
    paper = ("Xiong et al. 2020 (arXiv 2002.04745) §3.2 and Fig. 2: Post-LN without warmup ends worse or "
             "diverges; Pre-LN trains without it (§4)")


    def reading(self, value):
        return (f"dropping warmup costs Post-LN {value:.3f} nats" if value > 0 else
                f"dropping warmup helped Post-LN by {-value:.3f} nats")

    def runs(self, preset):
        return lr_sweep(preset, ("pre", "post"))

    def verdict(self, records, measurement, preset):
        at = dict(train__lr=preset.lr_fixed, model__n_layer=preset.depth)
        pre0, preW = group(records, model__scheme="pre", train__warmup_steps=0, **at), \
            group(records, model__scheme="pre", train__warmup_steps=preset.warmup, **at)
        post0, postW = group(records, model__scheme="post", train__warmup_steps=0, **at), \
            group(records, model__scheme="post", train__warmup_steps=preset.warmup, **at)
        pre_cmp, pre_info = compare(pre0, preW, sides=("Pre-LN without warmup", f"Pre-LN, warmup {preset.warmup}"))
        post_cmp, post_info = compare(post0, postW,
                                      sides=("Post-LN without warmup", f"Post-LN, warmup {preset.warmup}"))
        pre_fine = pre0.n_failed == 0 and pre_cmp in ("same", "better")
        post_hurt = (post0.n_failed > postW.n_failed) or post_cmp == "worse"
        settings = {"lr": preset.lr_fixed, "warmup_steps": preset.warmup, "n_layer": preset.depth,
                    "steps": preset.base["train.steps"], "margin_nats": LOSS_MARGIN}
        seeds = n_seeds(select(records, False, **at))
        if pre_fine and post_hurt:
            verdict = HOLDS
        elif pre0.n_failed > preW.n_failed or pre_cmp == "worse":
            verdict = FAILS  # Pre-LN itself suffers without warmup
        elif "too-few-seeds" in (pre_cmp, post_cmp):
            verdict = INCONCLUSIVE
        elif post0.n_failed == 0 and post_cmp in ("same", "better"):
            verdict = FAILS
        else:
            verdict = INCONCLUSIVE
        penalty = post_info.get("diff")
        summary = (f"at lr {preset.lr_fixed:g}: dropping warmup changes Post-LN's val loss by "
                   f"{_fmt(penalty)} ({failures(post0)}; {said(post_cmp)}) and Pre-LN's by "
                   f"{_fmt(pre_info.get('diff'))} ({failures(pre0)}; {said(pre_cmp)})")
        return self.make(verdict, "Post-LN val-loss penalty without warmup (nats)", penalty, seeds, settings, summary,
                         pre=pre_info, post=post_info, pre_no_warmup=describe(pre0), pre_warmup=describe(preW),
                         post_no_warmup=describe(post0), post_warmup=describe(postW),
                         sweep=sweep_table(records, preset, ("pre", "post")))

    def figures(self, records, measurement, preset):
        return [sweep_figure(records, preset, ("pre", "post"), "Final val loss vs lr, with and without warmup")]


@CLAIMS.register("C11")
class LearningRateC11(Claim):
    id, title = "C11", "Pre-LN tolerates larger learning rates"
    statement = "Pre-LN tolerates larger learning rates than Post-LN."
    sources = "000, 002"
    paper = "Xiong et al. 2020 (arXiv 2002.04745) §4: Pre-LN trains at larger learning rates than Post-LN"


    def reading(self, value):
        return f"Pre-LN's highest converging lr is {value:.3g}× Post-LN's"

    def runs(self, preset):
        return lr_sweep(preset, ("pre", "post"))

    def verdict(self, records, measurement, preset):
        best = {w: max_stable_lr(records, preset, ("pre", "post"), w) for w in (preset.warmup, 0)}
        pre, post = best[preset.warmup]["pre"], best[preset.warmup]["post"]
        top = max(preset.lrs)
        seeds = n_seeds(select(records, False, model__n_layer=preset.depth))
        if seeds < 2:
            verdict = INCONCLUSIVE
        elif pre is None and post is None:
            verdict = INCONCLUSIVE
        elif (pre or 0) > (post or 0):
            verdict = HOLDS
        elif pre == post == top:
            verdict = INCONCLUSIVE  # the sweep never found either limit
        else:
            verdict = FAILS
        ratio = pre / post if pre and post else None
        summary = (f"highest converging lr with warmup {preset.warmup}: Pre-LN {_fmt(pre, 'g')}, Post-LN "
                   f"{_fmt(post, 'g')}; without warmup: Pre-LN {_fmt(best[0]['pre'], 'g')}, "
                   f"Post-LN {_fmt(best[0]['post'], 'g')}")
        settings = {"lrs": preset.lrs, "warmup_steps": preset.warmup, "n_layer": preset.depth,
                    "converged": f"no seed diverged and mean val loss ≤ {CONVERGED_WITHIN:g} × best in the sweep"}
        return self.make(verdict, "highest converging lr, Pre-LN / Post-LN", ratio, seeds, settings, summary,
                         max_stable_lr={str(w): v for w, v in best.items()},
                         sweep=sweep_table(records, preset, ("pre", "post")))

    def figures(self, records, measurement, preset):
        return [sweep_figure(records, preset, ("pre", "post"), "Learning-rate sweep")]


def max_stable_lr(records, preset, schemes, warmup) -> dict[str, float | None]:
    groups = {(s, lr): group(records, model__scheme=s, train__lr=lr, train__warmup_steps=warmup,
                             model__n_layer=preset.depth) for s in schemes for lr in preset.lrs}
    means = [g.mean for g in groups.values() if g.mean is not None and g.n_failed == 0]
    if not means:
        return {s: None for s in schemes}
    limit = CONVERGED_WITHIN * min(means)
    out = {}
    for s in schemes:
        ok = [lr for lr in preset.lrs if groups[s, lr].n and groups[s, lr].n_failed == 0
              and groups[s, lr].mean <= limit]
        out[s] = max(ok) if ok else None
    return out


@CLAIMS.register("C4")
class DepthC4(Claim):
    id, title = "C4", "Post-LN gets harder to train with depth"
    statement = "Post-LN gets harder to train as depth grows (beyond roughly 10–20 layers); Pre-LN trains 100+ layers."
    sources = "000, 001"
    paper = ("Wang et al. 2022 (DeepNet, arXiv 2203.00555) §3 and Fig. 3: Post-LN's training breaks down as "
             "depth grows; Liu et al. 2020 (Admin, arXiv 2004.08249) §3")


    def reading(self, value):
        return f"at the deepest depth Post-LN ends {abs(value):.3f} nats {'worse' if value > 0 else 'better'} than Pre-LN"

    def runs(self, preset):
        return depth_sweep(preset, ("pre", "post"))

    def verdict(self, records, measurement, preset):
        rows, gaps = depth_rows(records, preset, ("pre", "post"))
        deepest = max(preset.depths)
        at = dict(model__n_layer=deepest, train__lr=preset.lr_fixed, train__warmup_steps=preset.warmup)
        pre_d, post_d = group(records, model__scheme="pre", **at), group(records, model__scheme="post", **at)
        cmp, info = compare(post_d, pre_d, sides=("Post-LN", "Pre-LN"))
        trend = spearman(list(preset.depths), gaps)
        seeds = n_seeds(select(records, False, train__lr=preset.lr_fixed, train__warmup_steps=preset.warmup))
        worse_deep = cmp == "worse" or post_d.n_failed > pre_d.n_failed
        if pre_d.n_failed > post_d.n_failed:
            verdict = FAILS  # Pre-LN is the one that breaks at depth
        elif cmp == "too-few-seeds" and not post_d.n_failed:
            verdict = INCONCLUSIVE
        elif worse_deep and (trend or 0) > 0.5:
            verdict = HOLDS
        elif cmp in ("same", "better") and not post_d.n_failed:
            verdict = FAILS
        else:
            verdict = INCONCLUSIVE
        by_depth = ", ".join(
            f"{d} layers " + (_fmt(g) if g != float("inf") else
                              f"n/a: {_did_not_train(rows[str(d)]['post'])} Post-LN runs did not train")
            for d, g in zip(preset.depths, gaps))
        summary = (f"Post-LN − Pre-LN val loss by depth: {by_depth}; "
                   f"rank correlation with depth {_fmt(trend)}; at {deepest} layers Post-LN against Pre-LN: "
                   f"{said(cmp)} "
                   f"({failures(post_d)}). 100+ layers are not tested at this preset.")
        settings = {"depths": preset.depths, "lr": preset.lr_fixed, "warmup_steps": preset.warmup,
                    "steps": preset.base["train.steps"], "d_model": preset.base["model.d_model"]}
        missing = (f"at {deepest} layers too few Post-LN runs trained to compare ({failures(post_d)}) where Pre-LN's "
                   f"did ({failures(pre_d)}): no loss gap to give; the failure rate is the evidence"
                   if post_d.n < MIN_SEEDS <= pre_d.n else
                   f"no loss gap at {deepest} layers: too few runs trained to compare (Post-LN {failures(post_d)}, "
                   f"Pre-LN {failures(pre_d)})")
        return self.make(verdict, f"Post-LN − Pre-LN val loss at {deepest} layers (nats)", info.get("diff"), seeds,
                         settings, summary, missing=missing, depth_trend_spearman=trend, by_depth=rows, deepest=info)

    def figures(self, records, measurement, preset):
        return [depth_figure(records, preset, ("pre", "post"))]


def depth_rows(records, preset, schemes, **where) -> tuple[dict[str, Any], list[float | None]]:
    rows, gaps = {}, []
    for d in preset.depths:
        gs = {s: group(records, model__scheme=s, model__n_layer=d, train__lr=preset.lr_fixed,
                       train__warmup_steps=preset.warmup, **where) for s in schemes}
        rows[str(d)] = {s: describe(g) for s, g in gs.items()}
        a, b = gs[schemes[1]], gs[schemes[0]]
        gaps.append(float("inf") if a.n_failed and not b.n_failed else
                    (a.mean - b.mean if a.mean is not None and b.mean is not None else None))
    return rows, gaps


def depth_figure(records, preset, schemes, depths=None, **where) -> Figure:
    depths = depths or preset.depths
    fig = Figure("Final val loss vs depth", "layers", "final val loss (nats)", logx=True, caption=OMITTED)
    for s in schemes:
        gs = [group(records, model__scheme=s, model__n_layer=d, train__lr=preset.lr_fixed,
                    train__warmup_steps=preset.warmup, **where) for d in depths]
        fig.series.append(Series(trained_label(s, gs), list(depths), [g.mean for g in gs], [g.sd for g in gs]))
    return fig


@CLAIMS.register("C8")
class DeepNormC8(Claim):
    id, title = "C8", "DeepNorm trains very deep models"
    statement = ("DeepNorm trains extremely deep models (1,000 layers) stably, where Post-LN fails, and beats "
                 "Pre-LN at the same depth.")
    sources = "001, 003"
    paper = ("Wang et al. 2022 (DeepNet, arXiv 2203.00555) §4–5: 1,000-layer DeepNorm trains where Post-LN "
             "diverges, and beats Pre-LN")


    def reading(self, value):
        return f"DeepNorm ends {abs(value):.3f} nats {'worse' if value > 0 else 'better'} than Pre-LN at the deepest depth"

    def runs(self, preset):
        return [{**preset.deep_base, **r} for r in
                depth_sweep(preset, ("pre", "post", "deepnorm"), preset.deep_depths)]

    def verdict(self, records, measurement, preset):
        if not preset.deep_depths:
            return self.make(INCONCLUSIVE, "not measured", None, 0, {"preset": preset.name},
                             f"the {preset.name} preset has no very deep models; run the full preset")
        deepest = max(preset.deep_depths)
        where = dict(model__n_layer=deepest, train__lr=preset.lr_fixed, train__warmup_steps=preset.warmup,
                     **_deep(preset))
        deep, post, pre = (group(records, model__scheme=s, **where) for s in ("deepnorm", "post", "pre"))
        cmp, info = compare(deep, pre, sides=("DeepNorm", "Pre-LN"))
        post_fails = post.n_failed > 0 or compare(post, deep)[0] == "worse"
        if not deep.n_runs:
            verdict = INCONCLUSIVE
        elif deep.n_diverged:
            verdict = FAILS  # DeepNorm itself diverged
        elif deep.n_failed_to_train:
            # where Pre-LN trained at this depth and budget, DeepNorm's plateau is DeepNorm's; where Pre-LN did
            # not train either, the budget is too short to say
            verdict = FAILS if pre.n_runs and not pre.n_failed else INCONCLUSIVE
        elif cmp == "too-few-seeds":
            verdict = INCONCLUSIVE
        elif post_fails and cmp == "better":
            verdict = HOLDS
        elif cmp == "worse" or not post_fails:
            verdict = FAILS
        else:
            verdict = INCONCLUSIVE
        summary = (f"at {deepest} layers: DeepNorm {failures(deep)}, val {_fmt(deep.mean)}; "
                   f"Post-LN {failures(post)}, val {_fmt(post.mean)}; Pre-LN val "
                   f"{_fmt(pre.mean)} ({failures(pre)}); DeepNorm − Pre-LN {_fmt(info.get('diff'))} ({said(cmp)}). "
                   f"1,000 layers are beyond this preset.")
        settings = {"depths": preset.deep_depths, **{k.split(".")[-1]: v for k, v in preset.deep_base.items()},
                    "lr": preset.lr_fixed, "warmup_steps": preset.warmup}
        rows = {str(d): {s: describe(group(records, model__scheme=s, model__n_layer=d, train__lr=preset.lr_fixed,
                                           train__warmup_steps=preset.warmup, **_deep(preset)))
                         for s in ("deepnorm", "post", "pre")}
                for d in preset.deep_depths}
        missing = (f"no loss gap at {deepest} layers: too few runs trained to compare (DeepNorm {failures(deep)}, "
                   f"Pre-LN {failures(pre)})")
        return self.make(verdict, f"DeepNorm − Pre-LN val loss at {deepest} layers", info.get("diff"),
                         n_seeds(select(records, False, model__scheme="deepnorm")), settings, summary,
                         missing=missing, by_depth=rows)

    def figures(self, records, measurement, preset):
        if not preset.deep_depths:
            return []
        return [depth_figure(records, preset, ("pre", "post", "deepnorm"), preset.deep_depths, **_deep(preset))]


@CLAIMS.register("C14")
class PeriC14(Claim):
    id, title = "C14", "Peri-LN is a further stabilizer"
    statement = "Peri-LN (normalize both the input and the output of each sub-layer) is a further stabilizer."
    sources = "002"
    paper = ("Kim et al. 2025 (Peri-LN, arXiv 2502.02732) §4: fewer divergences and larger usable learning rates "
             "than Pre-LN")


    def reading(self, value):
        return f"{100 * value:.0f} % of Peri-LN's runs did not train"

    def runs(self, preset):
        # the lr sweep without warmup (where stability is tested) and the depth sweep
        return [r for r in lr_sweep(preset, ("peri", "pre", "post")) if not r["train.warmup_steps"]] + \
            depth_sweep(preset, ("peri", "pre", "post"))

    def verdict(self, records, measurement, preset):
        rates = {}
        for s in ("peri", "pre", "post"):
            chosen = from_runs(records, [o for o in self.runs(preset) if o["model.scheme"] == s])
            rates[s] = (sum(r.did_not_train for r in chosen) / len(chosen)) if chosen else None
        lr_best = max_stable_lr(records, preset, ("peri", "pre", "post"), 0)
        seeds = n_seeds(select(records, False, model__scheme="peri"))
        others = [rates["pre"], rates["post"]]
        if None in (rates["peri"], *others) or seeds < 2:
            verdict = INCONCLUSIVE
        elif rates["peri"] <= min(others) and (rates["peri"] < min(others) or
                                               (lr_best["peri"] or 0) > max(lr_best["pre"] or 0, lr_best["post"] or 0)):
            verdict = HOLDS  # never less stable, and more stable by divergence or by learning rate
        elif rates["peri"] > min(others) or (lr_best["peri"] or 0) < (lr_best["pre"] or 0):
            verdict = FAILS
        else:
            verdict = INCONCLUSIVE  # as stable as Pre-LN here: no room to show more stability
        summary = (f"rate of runs that diverged or failed to train over the lr and depth sweeps: Peri-LN {_fmt(rates['peri'])}, Pre-LN "
                   f"{_fmt(rates['pre'])}, Post-LN {_fmt(rates['post'])}; highest converging lr without warmup: "
                   + ", ".join(f"{SCHEME_NAMES.get(k, k)} {_fmt(v, 'g')}" for k, v in lr_best.items()))
        return self.make(verdict, "Peri-LN rate of runs that did not train", rates["peri"], seeds,
                         {"lrs": preset.lrs, "lr_sweep_warmup_steps": 0, "depths": preset.depths,
                          "depth_sweep": f"lr {preset.lr_fixed:g}, warmup {preset.warmup}"}, summary, did_not_train_rate=rates,
                         max_stable_lr_no_warmup=lr_best, sweep=sweep_table(records, preset, ("peri", "pre", "post"), (0,)))

    def figures(self, records, measurement, preset):
        return [sweep_figure(records, preset, ("peri", "pre", "post"), "Learning-rate sweep with Peri-LN, no warmup",
                             (0,)),
                depth_figure(records, preset, ("peri", "pre", "post"))]


def _deep(preset) -> dict[str, Any]:
    """The very deep models' own overrides (e.g. a narrower width), as `select` keywords."""
    return {k.replace(".", "__"): v for k, v in preset.deep_base.items()}


def _fmt(value, spec: str = ".3f") -> str:
    return "n/a" if value is None else format(value, spec)


def _did_not_train(g: dict[str, Any]) -> str:
    """`4/5`: a `describe`d group's runs that did not train, of all its runs."""
    return f"{(g.get('n_diverged') or 0) + (g.get('n_failed_to_train') or 0)}/{g.get('n_runs') or 0}"
