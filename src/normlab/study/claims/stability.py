"""Claims about whether a placement trains at all: warmup (C1), depth (C4), learning rate (C11),
very deep DeepNorm (C8), Peri-LN as a stabilizer (C14)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from normlab.config import Change
from normlab.report.outcome import OFF_GRID
from normlab.study.claims.base import FAILS, HOLDS, INCONCLUSIVE, Claim, Part, claim, split_and_open
from normlab.study.claims.decisions import (by_failures, compare, fails_more, limit_verdict, loss_interval, noninferior,
                                            not_worse, worse)
from normlab.study.claims.grouping import failures, from_runs, group, group_record, n_seeds, select
from normlab.study.claims.prose import ci_text, fmt, loss_test, pct, said, sign_p, tost_test
from normlab.study.claims.statistics import LOSS_MARGIN, MIN_SEEDS, TRAINS, SignSplit, sign_evidence, spearman
from normlab.study.claims.sweeps import (at_depth, deeper_deficit, depth_figure, depth_rows, depth_sweep, lr_sweep,
                                         max_stable_lr, paired_limits, seed_limits,
                                         sweep_figure, swept_lrs, sweep_table)


@claim("C1", "Pre-LN needs no warmup; Post-LN does", sources="000, 001, 002, 003",
       paper="Xiong et al. 2020 (arXiv 2002.04745) §3.2 and Fig. 2: Post-LN without warmup ends worse or diverges; "
             "Pre-LN trains without it (§4)")
class WarmupC1(Claim):
    """Pre-LN trains stably without learning-rate warmup; Post-LN needs warmup and, without it, diverges or ends clearly
    worse at the same learning rate.
    """

    test_kind = "sign"  # where Post-LN fails without warmup, its failures decide (an exact sign test)

    @dataclass(frozen=True)
    class Knobs(Claim.Knobs):
        rounds: bool = True  # its next round is small: the 4-layer lr sweep of Pre-LN and Post-LN

    def reading(self, value):
        return (f"dropping warmup costs Post-LN {value:.3f} nats" if value > 0 else
                f"dropping warmup helped Post-LN by {-value:.3f} nats")

    def runs(self, preset):
        return lr_sweep(preset, ("pre", "post"))

    def judge(self, records, measurement, preset):
        """`verdict`: it corrects each lr's bundle for its parts itself (`Claim.corrected`)."""
        return self.verdict(records, measurement, preset)

    def verdict(self, records, measurement, preset):
        # the rule at every lr the sweep trains without warmup: the claim is about warmup at a given lr, and what
        # happens depends on the lr (at small lrs neither scheme needs warmup, at large ones both may). Its own
        # level is the preset's fixed lr; every other lr is a level of its scope, judged at the same family-wise
        # level as every scope (scope.scope_verdict), so a split along lr makes it `depends on lr`
        lrs, sweep = swept_lrs(preset, 0), sweep_table(records, preset, ("pre", "post"))  # the table: once
        # each lr judged once, the fixed one too where the sweep does not train it without warmup: every one
        # corrected for its parts alike
        judged = {lr: self.corrected(self.at_lr(records, preset, lr, sweep),
                                     lambda c, lr=lr: c.at_lr(records, preset, lr, sweep))
                  for lr in dict.fromkeys([*lrs, preset.lr_fixed])}
        at, verdict = {lr: judged[lr] for lr in lrs}, judged[preset.lr_fixed]
        regions = {lr: region(v) for lr, v in at.items()}
        details = {**verdict.details, "regions": {f"{lr:g}": r for lr, r in regions.items()}}
        if len(at) <= 1:
            return dataclasses.replace(verdict, details=details, evidence=leaning_split(at))
        scope = {"lr": {f"lr {lr:g}": v.verdict for lr, v in at.items()}}
        return dataclasses.replace(
            verdict, scope=scope, evidence=leaning_split(at), depends_on=list(split_and_open(scope)[0]),
            details={**details, "lr_boundary": lr_boundary({lr: v.verdict for lr, v in at.items()})},
            reading=region_text(regions) + f"; at lr {preset.lr_fixed:g}: {verdict.reading}",
            summary=verdict.summary + "; along lr: " + region_text(regions))

    def at_lr(self, records, preset, lr: float, sweep: dict):
        """C1's rule at one lr of the sweep (its verdict is at `Preset.lr_fixed`); `sweep`: the records' sweep
        table (`sweeps.sweep_table`), which every lr's verdict carries."""
        at = dict(lr=lr, n_layer=preset.depth)
        pre0, preW = group(records, scheme="pre", warmup_steps=0, **at), \
            group(records, scheme="pre", warmup_steps=preset.warmup, **at)
        post0, postW = group(records, scheme="post", warmup_steps=0, **at), \
            group(records, scheme="post", warmup_steps=preset.warmup, **at)
        n = n_seeds(select(records, False, **at))
        kept = {"pre_no_warmup": group_record(pre0), "pre_warmup": group_record(preW),
                "post_no_warmup": group_record(post0), "post_warmup": group_record(postW)}
        post = worse(post0, postW, self.level, sides=("Post-LN without warmup", f"Post-LN, warmup {preset.warmup}"))
        pre = not_worse(pre0, preW, self.level, sides=("Pre-LN without warmup", f"Pre-LN, warmup {preset.warmup}"))
        post_info, pre_info = post.info, pre.info
        post_part = Part(
            "Post-LN needs warmup: without it, it fails to train more often or ends clearly worse", post.verdict,
            "Post-LN val loss without − with warmup (nats)", post_info.get("diff"), loss_interval(post_info),
            loss_test(post_info, post.failed), post_info.get("seeds", []),
            f"{fmt(post_info.get('diff'))} nats ({said(post.outcome, self.level)}); without warmup "
            f"{failures(post0)}, with "
            f"{failures(postW)}" + sign_p(post.failed))
        pre_part = Part(
            f"Pre-LN is barely affected: without warmup it trains and ends within {LOSS_MARGIN:g} nats of warmup",
            pre.verdict, "Pre-LN val loss without − with warmup (nats)", pre_info.get("diff"), pre_info.get("ci90"),
            tost_test(pre_info, self.level), pre_info.get("seeds", []),
            f"{fmt(pre_info.get('diff'))} nats, {pct(self.level.tost)} interval {ci_text(pre_info.get('ci90'))} "
            "against "
            f"+{LOSS_MARGIN:g} ({said(pre.outcome, self.level)}); without warmup {failures(pre0)}" + sign_p(pre.failed))
        settings = {"lr": lr, "warmup_steps": preset.warmup, "n_layer": preset.depth,
                    "steps": preset.config.train.steps, "margin_nats": LOSS_MARGIN,
                    "margin_why": "under 1 % of the loss, about 4× the seed-to-seed sd (0.005 nats) of the "
                                  "4-layer Pre-LN run"}
        summary = (f"at lr {lr:g}: dropping warmup changes Post-LN's val loss by "
                   f"{fmt(post_info.get('diff'))} ({failures(post0)}; {said(post.outcome, self.level)}) and "
                   "Pre-LN's by "
                   f"{fmt(pre_info.get('diff'))} ({failures(pre0)}; {said(pre.outcome, self.level)})")
        return self.make(None, "Post-LN val-loss penalty without warmup (nats)", post_info.get("diff"), n, settings,
                         summary, parts=[post_part, pre_part], interval=loss_interval(post_info),
                         test=post_part.test, seeds=post_part.seeds, pre=pre_info, post=post_info,
                         post_failed=post.failed, **kept, sweep=sweep)

    def figures(self, records, measurement, preset):
        return [sweep_figure(records, preset, ("pre", "post"), "Final val loss vs lr, with and without warmup")]


@claim("C11", "Pre-LN tolerates larger learning rates", sources="000, 002",
       paper="Xiong et al. 2020 (arXiv 2002.04745) §4: Pre-LN trains at larger learning rates than Post-LN")
class LearningRateC11(Claim):
    """Pre-LN tolerates larger learning rates than Post-LN."""

    test_kind = "sign"  # at the lr between the two limits: the seeds where one scheme alone did not train

    @dataclass(frozen=True)
    class Knobs(Claim.Knobs):
        rounds: bool = True  # its exact test needs more seeds; C1's round trains the same runs (reused, not twice)

    def reading(self, value):
        return f"Pre-LN's highest trainable lr is {value:.3g}× Post-LN's"

    def runs(self, preset):
        return lr_sweep(preset, ("pre", "post"))

    RULE = ("each scheme's highest lr of the grid where ≥ 80 % of seeds train says which way; the decision is the "
            "exact sign test over the seeds whose own highest trainable lr differs between the schemes (one outcome "
            "per seed): holds when Pre-LN's is the higher in significantly many and its limit is no lower; does not "
            "hold when Post-LN's is the higher in significantly many and Pre-LN's limit is no higher")

    def verdict(self, records, measurement, preset):
        best = {w: max_stable_lr(records, preset, ("pre", "post"), w) for w in (preset.warmup, 0)}
        pre, post = best[preset.warmup]["pre"], best[preset.warmup]["post"]
        lrs, top = sorted(preset.lrs), max(preset.lrs)
        seeds = n_seeds(select(records, False, n_layer=preset.depth))
        # a limit is a threshold on a rate (≥ 80 % of seeds trained): it says which way, and decides only where the
        # seeds back it: each seed's own highest trainable lr, paired by seed (one outcome per seed: a seed whose
        # limits differ by two lrs is one seed, not two pairs; one lr picked by the threshold would be a test the
        # data chose)
        limits = {s: seed_limits(records, s, lrs, preset.warmup, preset.depth) for s in ("pre", "post")}
        paired = paired_limits(limits["pre"], limits["post"], self.level)
        pooled = {"fewer": paired["higher"], "more": paired["lower"]}  # Pre-LN's limit higher: it fails less
        if seeds < MIN_SEEDS:
            verdict, why = INCONCLUSIVE, f"{seeds} seeds: fewer than {MIN_SEEDS}"
        elif pre is None and post is None:
            verdict, why = INCONCLUSIVE, "neither trains at any lr of the grid: lower lrs would decide"
        else:
            verdict, why = limit_verdict(pre, post, top, pooled)
        censored = pre == top  # Pre-LN trains at the grid's top: its own limit is above the grid
        ratio = pre / post if pre and post else None
        summary = (f"highest lr at which ≥ {TRAINS:.0%} of seeds train, with warmup {preset.warmup}: Pre-LN "
                   f"{fmt(pre, 'g')}" + (" (the grid's top: its limit is at or above it)" if censored else "")
                   + f", Post-LN {fmt(post, 'g')}; without warmup: Pre-LN {fmt(best[0]['pre'], 'g')}, "
                   f"Post-LN {fmt(best[0]['post'], 'g')}; per seed, Pre-LN's highest trainable lr is above "
                   f"Post-LN's in {paired['a_higher']} seeds and below it in {paired['b_higher']} (sign test p = "
                   f"{fmt(paired['p_higher'] if paired['a_higher'] >= paired['b_higher'] else paired['p_lower'], '.3g')}"
                   f"; {len(paired['censored_seeds'])} seeds' limits censored) ({why})")
        settings = {"lrs": preset.lrs, "warmup_steps": preset.warmup, "n_layer": preset.depth,
                    "trainable": f"at least {TRAINS:.0%} of the seeds trained (neither diverged nor stayed on the "
                                 f"unigram plateau); each scheme's own limit, whatever it is compared with",
                    "rule": self.RULE}
        reading = None
        if ratio is not None:
            reading = (f"Pre-LN's highest trainable lr is {'at least ' if censored else ''}{ratio:.3g}× Post-LN's"
                       + (" (Pre-LN trains at the grid's top lr)" if censored else ""))
        evidence = sign_evidence(paired["a_higher"], paired["b_higher"], len(paired["seeds"]),
                                 "seeds whose highest trainable lr differs between Pre-LN and Post-LN")
        result = self.make(verdict, "highest trainable lr, Pre-LN / Post-LN", ratio, seeds, settings, summary,
                           test=paired["test"], seeds=paired["seeds"] or _seeds(records, n_layer=preset.depth),
                           reading=reading, max_stable_lr={str(w): v for w, v in best.items()},
                           limit_censored_by_grid=censored, limits_paired=paired,
                           seed_limits={s: {str(k): v for k, v in lim.items()} for s, lim in limits.items()},
                           evidence=evidence,
                           sweep=sweep_table(records, preset, ("pre", "post")))
        # both limits beyond the grid (neither trains at any lr, or both at its top): a wider grid would decide
        beyond_grid = pre == post and (pre is None or pre == top) and seeds >= MIN_SEEDS
        return dataclasses.replace(result, why=OFF_GRID if verdict == INCONCLUSIVE and beyond_grid else "")

    def figures(self, records, measurement, preset):
        return [sweep_figure(records, preset, ("pre", "post"), "Learning-rate sweep")]


def lr_boundary(by_lr: dict[float, str]) -> str:
    """Where a verdict judged at each lr of a sweep changes from one decisive outcome to the opposite: `holds at lr
    ≥ 0.01, does not hold at lr ≤ 0.003` ("" where no two lrs give opposite decisive verdicts)."""
    holds = sorted(lr for lr, v in by_lr.items() if v == HOLDS)
    fails = sorted(lr for lr, v in by_lr.items() if v == FAILS)
    if not holds or not fails:
        return ""
    if min(holds) > max(fails):
        return f"holds at lr ≥ {min(holds):g}, does not hold at lr ≤ {max(fails):g}"
    if max(holds) < min(fails):
        return f"holds at lr ≤ {max(holds):g}, does not hold at lr ≥ {min(fails):g}"
    return ("holds at lr " + ", ".join(f"{lr:g}" for lr in holds) + "; does not hold at lr "
            + ", ".join(f"{lr:g}" for lr in fails))


# C1's outcome at one lr, from its two parts (Post-LN needs warmup; Pre-LN is barely affected)
REGIONS = {(HOLDS, HOLDS): "Post-LN needs warmup, Pre-LN does not", (FAILS, HOLDS): "neither needs warmup",
           (HOLDS, FAILS): "both need warmup", (FAILS, FAILS): "Pre-LN needs warmup, Post-LN does not"}


POST_SAYS = {HOLDS: "Post-LN needs warmup", FAILS: "Post-LN does not need warmup", INCONCLUSIVE: "Post-LN undecided"}
PRE_SAYS = {HOLDS: "Pre-LN does not need it", FAILS: "Pre-LN needs it", INCONCLUSIVE: "Pre-LN undecided"}


def region(verdict) -> str:
    """What C1's parts say at one lr: which scheme needs warmup there (`neither needs warmup`), each part's say
    where one is undecided (`Post-LN undecided, Pre-LN does not need it`). A part's "does not hold" that the level
    split over the parts did not confirm (the lr's verdict left inconclusive: `Claim.corrected`) is undecided."""
    post, pre = (INCONCLUSIVE if verdict.verdict == INCONCLUSIVE and p["verdict"] == FAILS else p["verdict"]
                 for p in verdict.parts)
    return REGIONS.get((post, pre), f"{POST_SAYS[post]}, {PRE_SAYS[pre]}")


def region_text(regions: dict[float, str]) -> str:
    """`Post-LN needs warmup, Pre-LN does not at lr 0.01; neither needs warmup at lr 0.001, 0.003`: C1's region
    along lr, neighbouring lrs with the same region named together."""
    by_region: dict[str, list[float]] = {}
    for lr, r in sorted(regions.items()):
        by_region.setdefault(r, []).append(lr)
    return "; ".join(f"{r} at lr {', '.join(f'{lr:g}' for lr in lrs)}" for r, lrs in by_region.items())


def leaning_split(at: dict[float, Any]) -> SignSplit | None:
    """The failure split a seed round could decide: at the lr where C1 is open (its verdict there, or a part,
    inconclusive) and Post-LN without warmup failed alone in most discordant seeds; the strongest such split."""
    best = None
    for lr, v in at.items():
        if v.verdict != INCONCLUSIVE and all(p["verdict"] != INCONCLUSIVE for p in v.parts):
            continue
        post = v.details.get("post_failed") or {}
        k, against = post.get("only_a_failed", 0), post.get("only_b_failed", 0)
        if k + against and (best is None or abs(k - against) > 2 * best.k - best.n):
            best = sign_evidence(k, against, len(post.get("seeds") or []),
                                 f"Post-LN without warmup alone did not train, at lr {lr:g}", open=True)
    return best


@claim("C4", "Post-LN gets harder to train with depth", sources="000, 001",
       paper="Wang et al. 2022 (DeepNet, arXiv 2203.00555) §3 and Fig. 3: Post-LN's training breaks down as depth "
             "grows; Liu et al. 2020 (Admin, arXiv 2004.08249) §3")
class DepthC4(Claim):
    """Post-LN gets harder to train as depth grows (beyond roughly 10–20 layers); Pre-LN trains 100+ layers."""

    test_kind = "sign"  # per seed, is Post-LN's deficit larger at the deepest depth (a failure: infinite)?
    gap = ("at the deepest depth Post-LN", " than Pre-LN")

    @dataclass(frozen=True)
    class Knobs(Claim.Knobs):
        # its failure split's exact test needs more seeds than the first look's (study/power.py); a round adds only
        # the two depths its test reads (`round_runs`), not the whole sweep
        rounds: bool = True

    def runs(self, preset):
        return depth_sweep(preset, ("pre", "post"))

    def round_runs(self, preset):
        """The shallowest and deepest depths: what C4's test compares per seed."""
        return depth_sweep(preset, ("pre", "post"), [min(preset.depths), max(preset.depths)])

    RULE = ("significantly many seeds (one-sided exact sign test, a failure where Pre-LN trained counting as an "
            "infinite deficit) and Post-LN is worse at the deepest depth (one test, its failures' where they can "
            "decide, else its losses'); does not hold when the deficit shrinks by the same test, Pre-LN fails more, "
            "or Post-LN is not worse at the deepest depth")

    def verdict(self, records, measurement, preset):
        rows, gaps = depth_rows(records, preset, ("pre", "post"))
        deepest, shallowest = max(preset.depths), min(preset.depths)
        pre_d, post_d = (group(records, **at_depth(preset, s, deepest)) for s in ("pre", "post"))
        cmp, info = compare(post_d, pre_d, self.level, sides=("Post-LN", "Pre-LN"))
        post_fail, pre_fail = fails_more(post_d, pre_d, self.level), fails_more(pre_d, post_d, self.level)
        trend = spearman(list(preset.depths), gaps)  # descriptive only: 4 depths decide nothing by themselves
        # the test of "harder with depth": per seed, is Post-LN's deficit to Pre-LN at the deepest depth larger
        # than at the shallowest? (a failure where the other trained is an infinite deficit) — paired sign test
        harder = deeper_deficit(records, preset, shallowest, deepest, self.level)
        seeds = n_seeds(select(records, False, lr=preset.lr_fixed, warmup_steps=preset.warmup))
        # worse at the deepest depth: by the failures where they can decide, else by the losses (`by_failures`)
        worse_deep = post_fail["more"] if by_failures(post_fail, self.level) else cmp == "worse"
        if (by_failures(pre_fail, self.level) and pre_fail["more"]) or harder["easier"]:
            verdict = FAILS  # Pre-LN is the one that breaks at depth, or Post-LN's deficit shrinks with depth
        elif harder["n"] < MIN_SEEDS and not post_d.n_failed:
            verdict = INCONCLUSIVE
        elif worse_deep and harder["harder"]:
            verdict = HOLDS
        elif cmp in ("same", "better") and post_d.n_failed <= pre_d.n_failed:
            verdict = FAILS
        else:
            verdict = INCONCLUSIVE
        by_depth = ", ".join(
            f"{d} layers " + (fmt(g) if g != float("inf") else
                              f"n/a: {_did_not_train(rows[str(d)]['post'])} Post-LN runs did not train")
            for d, g in zip(preset.depths, gaps))
        summary = (f"Post-LN − Pre-LN val loss by depth: {by_depth}; "
                   f"Post-LN's deficit is larger at {deepest} than at {shallowest} layers in {harder['up']} seeds and "
                   f"smaller in {harder['down']} (sign test p = {harder['p_up']:.3g}); rank correlation with depth "
                   f"{fmt(trend)} (descriptive); at {deepest} layers Post-LN against Pre-LN: {said(cmp, self.level)} "
                   f"({failures(post_d)}). 100+ layers are not tested at this preset.")
        settings = {"depths": preset.depths, "lr": preset.lr_fixed, "warmup_steps": preset.warmup,
                    "steps": preset.config.train.steps, "d_model": preset.config.model.d_model,
                    "rule": f"holds when Post-LN's deficit to Pre-LN grows from {shallowest} to {deepest} layers in "
                            + self.RULE}
        return self.make(verdict, f"Post-LN − Pre-LN val loss at {deepest} layers (nats)", info.get("diff"), seeds,
                         settings, summary, missing=_no_gap(post_d, pre_d, deepest), interval=loss_interval(info),
                         test=f"{harder['test']}; at the deepest depth: {loss_test(info, post_fail)}",
                         seeds=harder["seeds"] or info.get("seeds") or post_fail["seeds"],
                         depth_trend_spearman=trend, deficit_growth=harder, by_depth=rows, deepest=info,
                         failures_deepest=post_fail,
                         evidence=sign_evidence(harder["up"], harder["down"], harder["n"],
                                                f"Post-LN's deficit to Pre-LN larger at {deepest} than at {shallowest} "
                                                "layers"))

    def figures(self, records, measurement, preset):
        return [depth_figure(records, preset, ("pre", "post"))]


@claim("C8", "DeepNorm trains very deep models", sources="001, 003",
       paper="Wang et al. 2022 (DeepNet, arXiv 2203.00555) §4–5: 1,000-layer DeepNorm trains where Post-LN diverges, "
             "and beats Pre-LN")
class DeepNormC8(Claim):
    """DeepNorm trains extremely deep models (1,000 layers) stably, where Post-LN fails, and beats Pre-LN at the same
    depth.
    """

    gap = ("DeepNorm", " than Pre-LN at the deepest depth")
    test_kind = "sign"  # "where Post-LN fails": its failures against DeepNorm's, an exact sign test

    @dataclass(frozen=True)
    class Knobs(Claim.Knobs):
        rounds: bool = True  # its failure split's exact test needs more seeds than the first look's (study/power.py)
        depths: list[int] = field(default_factory=list)  # the very deep models' depths; none: C8 is not measured
        base: dict[str, Any] = field(default_factory=dict)  # their own overrides on the base (a narrower width)

    def runs(self, preset):
        knobs = self.knobs(preset)
        return [Change(knobs.base) | r for r in depth_sweep(preset, ("pre", "post", "deepnorm"), knobs.depths)]

    def verdict(self, records, measurement, preset):
        knobs = self.knobs(preset)
        if not knobs.depths:
            return self.make(INCONCLUSIVE, "not measured", None, 0, {"preset": preset.name},
                             f"the {preset.name} preset has no very deep models; run the full preset")
        deepest = max(knobs.depths)
        deep, post, pre = (group(records, **at_depth(preset, s, deepest, **knobs.base))
                           for s in ("deepnorm", "post", "pre"))
        cmp, info = compare(deep, pre, self.level, sides=("DeepNorm", "Pre-LN"))
        post_fail, post_cmp = fails_more(post, deep, self.level), compare(post, deep, self.level)[0]
        post_fails = post_fail["more"] if by_failures(post_fail, self.level) else post_cmp == "worse"  # one test, by D
        # Post-LN trains as well as DeepNorm here: nothing for DeepNorm to rescue
        post_fine = post.n_failed <= deep.n_failed and post_cmp in ("same", "better")
        # Pre-LN is not worse by more than the margin
        cannot_beat = noninferior(pre, deep, self.level)[0] == "not worse"
        # DeepNorm's own failures against Pre-LN's at this depth and budget, paired by seed: where Pre-LN trains in a
        # seed and DeepNorm does not, the failure is DeepNorm's; a failure decides only by the sign test
        deep_fail = fails_more(deep, pre, self.level)
        if not deep.n_runs:
            verdict = INCONCLUSIVE
        elif by_failures(deep_fail, self.level) and deep_fail["more"]:
            verdict = FAILS  # DeepNorm fails to train more often than Pre-LN (exact sign test)
        elif cmp == "too-few-seeds":
            verdict = INCONCLUSIVE
        elif post_fails and cmp == "better" and deep.n_failed <= pre.n_failed:
            verdict = HOLDS
        elif cmp == "worse" or post_fine or (cannot_beat and cmp != "better"):
            verdict = FAILS
        else:
            verdict = INCONCLUSIVE
        why = ("; Pre-LN is not worse than DeepNorm by more than the margin (one-sided), so DeepNorm cannot beat it"
               if verdict == FAILS and cannot_beat and cmp not in ("worse", "better") and not post_fine else "")
        summary = (f"at {deepest} layers: DeepNorm {failures(deep)}, val {fmt(deep.mean)}; "
                   f"Post-LN {failures(post)}, val {fmt(post.mean)}; Pre-LN val "
                   f"{fmt(pre.mean)} ({failures(pre)}); DeepNorm − Pre-LN {fmt(info.get('diff'))} "
                   f"({said(cmp, self.level)}){why}. 1,000 layers are beyond this preset.")
        settings = {"depths": knobs.depths, **{k.split(".")[-1]: v for k, v in knobs.base.items()},
                    "lr": preset.lr_fixed, "warmup_steps": preset.warmup}
        rows = {str(d): {s: group_record(group(records, **at_depth(preset, s, d, **knobs.base)))
                         for s in ("deepnorm", "post", "pre")} for d in knobs.depths}
        missing = (f"no loss gap at {deepest} layers: too few runs trained to compare (DeepNorm {failures(deep)}, "
                   f"Pre-LN {failures(pre)})")
        return self.make(verdict, f"DeepNorm − Pre-LN val loss at {deepest} layers", info.get("diff"),
                         n_seeds(select(records, False, scheme="deepnorm")), settings, summary,
                         missing=missing, interval=loss_interval(info), test=loss_test(info, post_fail),
                         seeds=info.get("seeds") or post_fail["seeds"], by_depth=rows, post_vs_deepnorm=post_fail,
                         evidence=sign_evidence(post_fail["only_a_failed"], post_fail["only_b_failed"],
                                                len(post_fail["seeds"]),
                                                f"Post-LN alone did not train where DeepNorm did, at {deepest} layers"))

    def figures(self, records, measurement, preset):
        knobs = self.knobs(preset)
        if not knobs.depths:
            return []
        return [depth_figure(records, preset, ("pre", "post", "deepnorm"), knobs.depths, **knobs.base)]


@claim("C14", "Peri-LN is a further stabilizer", sources="002",
       paper="Kim et al. 2025 (Peri-LN, arXiv 2502.02732) §4: fewer divergences and larger usable learning rates than "
             "Pre-LN")
class PeriC14(Claim):
    """Peri-LN (normalize both the input and the output of each sub-layer) is a further stabilizer."""

    SCHEMES = ("peri", "pre")  # the claim: Peri-LN more stable than Pre-LN (Post-LN's limit is C11's)
    test_kind = "sign"  # each seed's highest trainable lr, Peri-LN's against Pre-LN's

    @dataclass(frozen=True)
    class Knobs(Claim.Knobs):
        rounds: bool = True  # its exact sign test over seeds needs more than the first look's (study/power.py)
        # the lrs C14 trains without warmup, beyond the grid: where Pre-LN trains at every lr of the grid, only an
        # lr beyond it can show whether Peri-LN is *more* stable (the standard run of 2026-11-24: both trained
        # everywhere); none: the grid's top lr alone
        stress_lrs: list[float] = field(default_factory=list)

    def lrs(self, preset) -> list[float]:
        """The lrs C14 trains without warmup: its stress lrs, else the grid's top. The paper's stability claim is
        about learning rates (its §4: larger usable lrs, fewer divergences). In the standard runs of 2026-11-25
        Peri-LN and Pre-LN trained in every seed at every lr up to 0.3 and failed in every seed at 1, so the
        standard preset's stress lrs lie between: lower ones decided nothing."""
        return sorted(self.knobs(preset).stress_lrs) or [max(preset.lrs)]

    def runs(self, preset):
        # the lr sweep without warmup, where stability is tested (the depth sweep was dropped in the round of
        # 2026-11-25: at the fixed lr with warmup no scheme failed at any depth of it, and it was half of C14's cost)
        return [r for r in lr_sweep(preset, self.SCHEMES, self.lrs(preset)) if not r["train.warmup_steps"]]

    RULE = ("each seed's highest lr at which its run trained, per scheme; holds when Peri-LN's is the higher one in "
            "significantly many seeds (one-sided exact sign test over the seeds where they differ), does not hold "
            "when Pre-LN's is; a seed with a run censored by the plateau stop above its highest trained lr is left out")

    def rates(self, records, preset) -> tuple[dict[str, float | None], dict[str, int]]:
        """Each scheme's share of its runs that did not train (censored runs left out), and how many were censored."""
        rates, censored = {}, {}
        for s in self.SCHEMES:
            chosen = from_runs(records, [o for o in self.runs(preset) if o["model.scheme"] == s])
            counted = [r for r in chosen if not r.censored]
            rates[s] = (sum(r.did_not_train for r in counted) / len(counted)) if counted else None
            censored[s] = len(chosen) - len(counted)
        return rates, censored

    def undecided(self, paired, pre_limits, lrs) -> str:
        """What would decide an inconclusive verdict, as the summary's last clause."""
        n_paired, top = len(paired["seeds"]), max(lrs)
        if n_paired < MIN_SEEDS:
            return (f"; {n_paired} seeds with both limits known ({len(paired['censored_seeds'])} unknown: a run "
                    "censored by the plateau stop or missing): more seeds would decide")
        if paired["a_higher"] == paired["b_higher"] == 0:
            known = sorted({v for v in pre_limits.values() if v is not None})
            where = (f"lrs above {top:g} would decide" if known == [top] else
                     f"lrs below {min(lrs):g} would decide" if known == [0.0] else
                     "lrs between the grid's, or more seeds, would decide")
            return (f"; the same highest trainable lr in all {paired['ties']} seeds, as stable as Pre-LN on this "
                    f"grid: {where}")
        return (f"; not significant at α = {self.level.alpha:g} (sign test p = "
                f"{min(paired['p_higher'], paired['p_lower']):.3g}): more seeds would decide")

    def verdict(self, records, measurement, preset):
        lrs = self.lrs(preset)
        rates, censored = self.rates(records, preset)
        lr_best = max_stable_lr(records, preset, self.SCHEMES, 0, lrs)
        own = [o for o in self.runs(preset) if o["model.scheme"] == "peri"]
        seeds = n_seeds(from_runs(records, own))  # C14's own Peri-LN runs, not every Peri-LN run of the study
        # one outcome per seed: each seed's highest trainable lr per scheme, paired over seeds (the (lr, seed)
        # pairs share their seeds across the lrs, so they are not independent)
        limits = {s: seed_limits(records, s, lrs, 0, preset.depth) for s in self.SCHEMES}
        paired = paired_limits(limits["peri"], limits["pre"], self.level)
        n_paired = len(paired["seeds"])
        if rates["peri"] is None or rates["pre"] is None or n_paired < MIN_SEEDS:
            verdict = INCONCLUSIVE
        elif paired["higher"]:
            verdict = HOLDS  # Peri-LN's highest trainable lr is above Pre-LN's in significantly many seeds
        elif paired["lower"]:
            verdict = FAILS  # below it
        else:
            verdict = INCONCLUSIVE
        up, down, ties = paired["a_higher"], paired["b_higher"], paired["ties"]
        decide = "" if verdict != INCONCLUSIVE else self.undecided(paired, limits["pre"], lrs)
        per_seed = "; ".join(f"seed {k}: Peri-LN {_lr(limits['peri'].get(k))}, Pre-LN {_lr(limits['pre'].get(k))}"
                             for k in sorted(set(limits["peri"]) | set(limits["pre"])))
        summary = (f"runs that did not train over lrs {', '.join(f'{lr:g}' for lr in lrs)} without warmup: Peri-LN "
                   f"{fmt(rates['peri'])}, Pre-LN {fmt(rates['pre'])}"
                   + (f" (censored by the plateau stop: Peri-LN {censored['peri']}, Pre-LN {censored['pre']})"
                      if any(censored.values()) else "")
                   + f"; each seed's highest trainable lr: {per_seed}; Peri-LN's is higher in {up} seeds, lower in "
                     f"{down}, the same in {ties}" + decide)
        # every seed's limits the same, Pre-LN's all at the grid's top or at none of it: a wider grid would decide
        known = {v for v in limits["pre"].values() if v is not None}
        beyond_grid = n_paired >= MIN_SEEDS and up == down == 0 and known in ({max(lrs)}, {0.0})
        reading = (f"Peri-LN's highest trainable lr without warmup is above Pre-LN's in {up} of {n_paired} seeds "
                   f"and below it in {down}" + (f" (sign test p = {paired['p_higher']:.3g})" if up >= down and up
                                                else f" (sign test p = {paired['p_lower']:.3g})" if down else "")
                   if n_paired else None)
        result = self.make(verdict, "seeds where Peri-LN's highest trainable lr is above Pre-LN's, of those paired",
                         up / n_paired if n_paired else None, seeds,
                         {"lrs": lrs, "lr_sweep_warmup_steps": 0, "rule": self.RULE},
                         summary, test=paired["test"], seeds=paired["seeds"], reading=reading,
                         did_not_train_rate=rates, censored=censored, limits_paired=paired,
                         evidence=sign_evidence(up, down, n_paired, "Peri-LN's highest trainable lr differs from "
                                                                   "Pre-LN's"),
                         seed_limits={sch: {str(k): v for k, v in lim.items()} for sch, lim in limits.items()},
                         max_stable_lr_no_warmup=lr_best,
                         sweep=sweep_table(records, preset, self.SCHEMES, (0,), lrs))
        return dataclasses.replace(result, why=OFF_GRID if verdict == INCONCLUSIVE and beyond_grid else "")

    def figures(self, records, measurement, preset):
        return [sweep_figure(records, preset, self.SCHEMES, "Learning-rate sweep of Peri-LN and Pre-LN, no warmup",
                             (0,), self.lrs(preset))]


def _seeds(records, **where) -> list[int]:
    return sorted({r.seed for r in select(records, False, **where)})


def _lr(limit: float | None) -> str:
    """A seed's limit in words: `0.5`, `none` (trained at no lr), `censored`."""
    return "censored" if limit is None else "none" if not limit else f"{limit:g}"


def _no_gap(post, pre, depth: int) -> str:
    """Why C4 gives no loss gap at its deepest depth: Post-LN's failures (its evidence), or too few runs of both."""
    if post.n < MIN_SEEDS <= pre.n:
        return (f"at {depth} layers too few Post-LN runs trained to compare ({failures(post)}) where Pre-LN's did "
                f"({failures(pre)}): no loss gap to give; the failure rate is the evidence")
    return (f"no loss gap at {depth} layers: too few runs trained to compare (Post-LN {failures(post)}, "
            f"Pre-LN {failures(pre)})")


def _did_not_train(g: dict[str, Any]) -> str:
    """`4/5`: a `group_record`d group's runs that did not train, of all its runs."""
    return f"{(g.get('n_diverged') or 0) + (g.get('n_failed_to_train') or 0)}/{g.get('n_runs') or 0}"
