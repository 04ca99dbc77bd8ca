"""The frontier's learning-rate claims (the `frontier` preset): QK-norm raises the highest trainable lr (F7), Keel
tolerates a higher lr than Post-LN and Pre-LN at depth (F8). Each arm's limit is the highest lr of a grid at which
it trains, backed by the exact sign test over the seeds whose own highest trainable lr differs between the arms."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from normlab.config import Change
from normlab.report.figure import Figure, Series
from normlab.report.outcome import OFF_GRID, OFF_SCALE
from normlab.study.claims.base import FAILS, HOLDS, INCONCLUSIVE, Part, claim
from normlab.study.claims.decisions import limit_verdict
from normlab.study.claims.frontier import PAPERS, FrontierClaim, arm
from normlab.study.claims.grouping import group, n_seeds, select
from normlab.study.claims.prose import fmt
from normlab.study.claims.statistics import TRAINS, SignSplit, sign_evidence
from normlab.study.claims.sweeps import limit_split, trains


def highest_trainable(records, lrs, **fixed) -> float | None:
    """The highest lr of `lrs` at which the configuration `fixed` (run overrides, warmup included) trains (≥ TRAINS
    of its seeds)."""
    ok = [lr for lr in lrs if trains(group(records, **fixed, lr=lr))]
    return max(ok) if ok else None


def open_split(parts: list[Part], splits: list[dict[str, Any]]) -> SignSplit | None:
    """The primary test's split (`Verdict.evidence`) of the first part that does not hold, else of the first
    part: the seeds where the claimed arm's own limit is the higher (`k`) against those where it is the lower
    (`sweeps.limit_split`)."""
    at = next((i for i, p in enumerate(parts) if p.verdict != HOLDS), 0) if parts else None
    if at is None:
        return None
    split = splits[at]
    return sign_evidence(split["a_higher"], split["b_higher"], len(split["seeds"]),
                         f"{parts[at].name}: the seeds whose own highest trainable lr differs between the arms")


def grid_why(verdicts: list[str], kinds: list[str]) -> str:
    """An inconclusive verdict's kind where the claim knows it (its parts' `verdicts`, and each one's `kinds`:
    OFF_GRID, OFF_SCALE, or '' where more seeds could decide): every part that does not hold is open only by the
    grid (OFF_SCALE where one is finer than the paper's gap), else '' (study/power.py's `explain` says which kind)."""
    open_kinds = [k for v, k in zip(verdicts, kinds) if v != HOLDS]
    if not open_kinds or not all(open_kinds) or FAILS in verdicts:
        return ""
    return OFF_SCALE if OFF_SCALE in open_kinds else OFF_GRID


@claim("F7", "QK-norm raises the highest trainable learning rate, per head and over the full width",
       sources=PAPERS,
       paper="Dehghani et al. 2023 (arXiv 2302.05442) §3.1; Wortsman et al. 2023 (arXiv 2309.14322) §3.2: QK-norm "
             "keeps attention logits bounded and widens the trainable lr range; per head in Qwen3 and torchtitan, "
             "full width in OLMo 2 (arXiv 2501.00656)")
class QKNormF7(FrontierClaim):
    """QK-norm (q and k normalized before their dot product) raises the highest learning rate at which Pre-LN
    trains without warmup, whether per head or over the full width."""

    MODES = {"per head": "per_head", "full width": "full_width"}
    test_kind = "sign"  # the seeds whose own highest trainable lr differs between the arms
    scale = "ViT-22B (Dehghani et al.) and transformers of 10M–1.2B parameters (Wortsman et al.)"

    @dataclass(frozen=True)
    class Knobs(FrontierClaim.Knobs):
        # the lrs, without warmup: from where Pre-LN began to strain without warmup up to past where all trained (0.1
        # in the first frontier run, on a grid 0.01–0.1 that could not decide)
        lrs: list[float] = field(default_factory=lambda: [3e-2, 1e-1, 3e-1])
        # one outcome per seed: 5 of 5 (p = 1/32) cannot reach Holm's strictest level over the preset's claims; a
        # second look at 10 can (its 9 small runs a seed are cheap). F8's round (15 runs of 16 layers a seed) is
        # not taken on a CPU: `normlab study --plan` says what its 5 seeds can reach
        rounds: bool = True

    def lrs(self, preset) -> list[float]:
        return list(self.knobs(preset).lrs)

    def runs(self, preset):
        return [Change(qk_norm=m, lr=lr, warmup_steps=0)
                for m in ("none", *self.MODES.values()) for lr in self.lrs(preset)]

    def reading(self, value):
        return f"QK-norm per head trains up to lr {value:g} without warmup"

    def paired(self, records, preset, mode) -> dict[str, Any]:
        """Each seed's own highest trainable lr with QK-norm `mode` and without, paired by seed."""
        return limit_split(records, lambda lr: Change(qk_norm=mode, lr=lr, warmup_steps=0),
                           lambda lr: Change(qk_norm="none", lr=lr, warmup_steps=0), self.lrs(preset), self.level)

    def verdict(self, records, measurement, preset):
        lrs = self.lrs(preset)
        top = max(lrs)
        limit = {m: highest_trainable(records, lrs, **Change(qk_norm=m, warmup_steps=0))
                 for m in ("none", *self.MODES.values())}
        parts, splits, kinds = [], [], []
        for label, mode in self.MODES.items():
            q, n = limit[mode] or 0.0, limit["none"] or 0.0
            paired = self.paired(records, preset, mode)
            ran, kind = select(records, False, qk_norm=mode), ""
            if not ran or limit[mode] is None and limit["none"] is None:
                verdict, why = INCONCLUSIVE, "neither trains at any lr of the grid: a lower grid would decide"
                kind = OFF_GRID if ran else ""
            else:
                verdict, why = limit_verdict(limit[mode], limit["none"], top, paired)
                kind = OFF_GRID if verdict == INCONCLUSIVE and q == n == top else ""
            parts.append(Part(f"QK-norm {label} raises the highest trainable lr", verdict,
                              f"highest trainable lr, QK-norm {label}", limit[mode], None, paired["test"],
                              paired["seeds"],
                              f"{fmt(limit[mode], 'g')} vs {fmt(limit['none'], 'g')} without QK-norm ({why}); per "
                              f"seed, QK-norm's own limit is the higher in {paired['a_higher']} seeds, the lower in "
                              f"{paired['b_higher']} (p = {fmt(paired['p_one_sided'], '.3g')})"))
            splits.append(paired)
            kinds.append(kind)
        summary = ("highest lr where ≥ " f"{TRAINS:.0%} of seeds train, no warmup: "
                   + ", ".join(f"{m} {fmt(v, 'g')}" for m, v in limit.items())
                   + f" (grid {', '.join(f'{lr:g}' for lr in lrs)}); per head vs full width: "
                   + ("the same limit" if limit["per_head"] == limit["full_width"] else
                      f"{'per head' if (limit['per_head'] or 0) > (limit['full_width'] or 0) else 'full width'} "
                      "trains at a higher lr"))
        verdict = self.make(None, "highest trainable lr with QK-norm per head", limit["per_head"],
                         n_seeds(select(records, False, qk_norm="per_head")),
                         self.settings(preset, lrs=lrs, warmup_steps=0,
                                       trainable=f"at least {TRAINS:.0%} of the seeds trained",
                                       rule="holds when each QK-norm's own highest trainable lr is the higher in "
                                            "significantly many seeds (exact sign test over the seeds whose limits "
                                            "differ) and its grid limit is no lower; does not hold when it is the "
                                            "lower, so backed; a limit the test does not back decides nothing"),
                         summary, parts=parts, test=parts[0].test, seeds=parts[0].seeds, highest_lr=limit,
                         evidence=open_split(parts, splits))
        return dataclasses.replace(verdict, why=grid_why([p.verdict for p in parts], kinds)
                                   if verdict.verdict == INCONCLUSIVE else "")

    def figures(self, records, measurement, preset):
        lrs = self.lrs(preset)
        labels = [f"{lr:g}" for lr in lrs]
        fig = Figure("Runs that trained without warmup, by lr and QK-norm", "learning rate", "share of seeds trained",
                     kind="line")
        for m in ("none", *self.MODES.values()):
            gs = [group(records, qk_norm=m, lr=lr, warmup_steps=0) for lr in lrs]
            fig.series.append(Series(m, labels, [g.n / g.n_runs if g.n_runs else None for g in gs]))
        return [fig]


@claim("F8", "Keel tolerates a higher learning rate than Post-LN and Pre-LN at depth, with warmup",
       sources=PAPERS,
       paper="Chen & Wei 2026 (Keel, \"Post-LayerNorm Is Back\", arXiv 2601.19895): the maximum tolerable lr during "
             "warmup at depth, Keel 1.01e-2 against Post-LN 3.0e-4 at 64 layers (Pre-LN 7.65e-3 in its Table 1)")
class KeelF8(FrontierClaim):
    """Keel, Post-LN with a Highway-style scaled residual and a normalized branch input, trains at a higher
    learning rate than Post-LN and than Pre-LN at depth, every arm with the same warmup (all of the paper's runs
    warm up, 2,500–5,000 steps; it claims nothing about training without warmup)."""

    OTHERS = {"Post-LN": "post", "Pre-LN": "pre"}
    test_kind = "sign"  # the seeds whose own highest trainable lr differs between the arms
    # the paper's ratio of Keel's maximum tolerable lr to each other arm's at 64 layers (1.01e-2 / 3.0e-4, / 7.65e-3)
    PAPER_RATIO = {"Post-LN": 1.01e-2 / 3.0e-4, "Pre-LN": 1.01e-2 / 7.65e-3}
    scale = "64 layers (Keel 1.01e-2, Post-LN 3.0e-4) in LLaMA-style models with 2,500–5,000 warmup steps"

    @dataclass(frozen=True)
    class Knobs(FrontierClaim.Knobs):
        """The paper's claim is the highest lr that trains with warmup at depth (64 layers, Keel 1.01e-2, Post-LN
        3.0e-4): here 16 layers, the preset's warmup, and a grid a factor ~3 apart from 1e-3 (below where Post-LN
        is expected to stop training at 16 layers; no frontier run has measured it yet) to 1e-1 (where Pre-LN
        still trained without warmup at 4 layers in the first frontier run). Its cell, forced by the cost of 75
        runs of 16 layers on 2 cores: 32 tokens of context (a deep step at 32 tokens takes 0.68x the time of one
        at 64, benchmarks/cpu_step_costs.py); no plateau stop (a run it stops is censored, not a failure, and F8
        counts failures); not yet timed as a whole."""

        depth: int = 16
        lrs: list[float] = field(default_factory=lambda: [1e-3, 3e-3, 1e-2, 3e-2, 1e-1])
        cell: dict[str, Any] = field(default_factory=lambda: {"model.block_size": 32, "train.eval_batches": 20})

    def depth(self, preset) -> int:
        return self.knobs(preset).depth

    def lrs(self, preset) -> list[float]:
        return sorted(self.knobs(preset).lrs)

    def _arm(self, preset, scheme, lr) -> Change:
        """At the preset's warmup, in Keel's cell (its knob `cell`: what the depth costs on a CPU)."""
        return arm(preset, **(Change(self.knobs(preset).cell) | Change(scheme=scheme, n_layer=self.depth(preset),
                                                                        lr=lr)))

    def runs(self, preset):
        return [self._arm(preset, s, lr) for s in ("keel", *self.OTHERS.values()) for lr in self.lrs(preset)]

    def reading(self, value):
        return f"Keel trains up to lr {value:g} at this depth, with warmup"

    def limit(self, records, preset, scheme) -> float | None:
        fixed = {k: v for k, v in self._arm(preset, scheme, 0.0).items() if k != "train.lr"}
        return highest_trainable(records, self.lrs(preset), **fixed)

    def part(self, records, preset, label, other) -> tuple[Part, dict[str, Any]]:
        """Keel against `other`: each one's highest trainable lr of the grid, backed by the exact sign test over the
        seeds whose own limits differ, one outcome per seed, as F7's and C11's are (a limit is a threshold on a
        failure rate; one lr's 5 seeds cannot reach the family-wise level). Where the limits are the
        same and the paper's gap between the two is finer than the grid's step, the grid cannot tell them apart:
        inconclusive, not at the paper's resolution (Keel vs Pre-LN: 1.01e-2 against 7.65e-3, 1.3×)."""
        lrs, top = self.lrs(preset), max(self.lrs(preset))
        mine, theirs = self.limit(records, preset, "keel"), self.limit(records, preset, other)
        pooled = limit_split(records, lambda lr: self._arm(preset, "keel", lr),
                             lambda lr: self._arm(preset, other, lr), lrs, self.level)
        step = max(b / a for a, b in zip(lrs, lrs[1:])) if len(lrs) > 1 else math.inf
        finer = self.PAPER_RATIO[label] < step
        ran, kind = select(records, False, **self._arm(preset, "keel", lrs[0])), ""
        if not ran or (mine is None and theirs is None):
            verdict, why = INCONCLUSIVE, "neither trains at any lr of the grid: lower lrs would decide"
            kind = OFF_GRID if ran else ""
        else:
            verdict, why = limit_verdict(mine, theirs, top, pooled)
            same = verdict == INCONCLUSIVE and mine == theirs
            if same and mine == top:
                kind = OFF_GRID
            elif same and finer:
                kind = OFF_SCALE
                why = (f"the same limit, {fmt(mine, 'g')}; the paper's gap ({self.PAPER_RATIO[label]:.2g}×) is finer "
                       f"than the grid's steps ({step:.2g}×): the grid cannot resolve it")
        p = pooled["p_higher"] if (mine or 0) >= (theirs or 0) else pooled["p_lower"]
        summary = (f"Keel {fmt(mine, 'g')} vs {label} {fmt(theirs, 'g')} ({why}); per seed, Keel's own limit is the "
                   f"higher in {pooled['a_higher']} seeds, {label}'s in {pooled['b_higher']} (p = {fmt(p, '.3g')}, "
                   "one-sided, the tail of the limits' side)")
        part = Part(f"Keel trains at a higher lr than {label}", verdict, "Keel's highest trainable lr", mine, None,
                    pooled["test"], pooled["seeds"], summary)
        return part, {**pooled, "p_one_sided": p, "why": kind, "finer_than_grid": kind == OFF_SCALE}

    def judge(self, records, measurement, preset):
        """Inconclusive only because a paper's gap is finer than the grid: not at the paper's resolution; only
        because the limits lie beyond the grid: beyond the lr grid (`grid_why`; the parts are in OTHERS' order)."""
        verdict = super().judge(records, measurement, preset)
        splits = verdict.details.get("limits_split", {})
        if verdict.verdict == INCONCLUSIVE:
            return dataclasses.replace(verdict, why=grid_why([p["verdict"] for p in verdict.parts],
                                                             [splits.get(label, {}).get("why", "")
                                                              for label in self.OTHERS]))
        return verdict

    def verdict(self, records, measurement, preset):
        parts, splits = [], {}
        for label, other in self.OTHERS.items():
            part, splits[label] = self.part(records, preset, label, other)
            parts.append(part)
        limits = {"Keel": self.limit(records, preset, "keel"),
                  **{label: self.limit(records, preset, s) for label, s in self.OTHERS.items()}}
        depth, lrs = self.depth(preset), self.lrs(preset)
        summary = (f"highest lr where ≥ {TRAINS:.0%} of seeds train at {depth} layers, with {preset.warmup} warmup "
                   "steps: " + ", ".join(f"{k} {fmt(v, 'g')}" for k, v in limits.items())
                   + f" (grid {', '.join(f'{lr:g}' for lr in lrs)}); " + "; ".join(p.summary for p in parts))
        return self.make(None, "Keel's highest trainable lr at depth, with warmup", limits["Keel"],
                         n_seeds(select(records, False, scheme="keel")),
                         self.settings(preset, n_layer=depth, lrs=lrs, cell=self.knobs(preset).cell,
                                       trainable=f"at least {TRAINS:.0%} of the seeds trained",
                                       rule="holds when Keel's highest trainable lr of the grid is above Post-LN's "
                                            "and above Pre-LN's, each backed by the exact sign test over the seeds "
                                            "whose own limits differ (one outcome per seed); does not hold when "
                                            "Keel's is lower, so backed; the same limit decides nothing, and where "
                                            "the paper's gap is finer than the grid's step it is not at the paper's "
                                            "resolution"),
                         summary, parts=parts, test=parts[0].test, seeds=parts[0].seeds, highest_lr=limits,
                         limits_split=splits,
                         evidence=open_split(parts, [splits[label] for label in self.OTHERS]))

    def figures(self, records, measurement, preset):
        lrs = self.lrs(preset)
        fig = Figure(f"Runs that trained at {self.depth(preset)} layers with warmup, by lr", "learning rate",
                     "share of seeds trained", kind="line")
        for label, s in {"Keel": "keel", **self.OTHERS}.items():
            gs = [group(records, **self._arm(preset, s, lr)) for lr in lrs]
            fig.series.append(Series(label, [f"{lr:g}" for lr in lrs], [g.n / g.n_runs if g.n_runs else None
                                                                         for g in gs]))
        return [fig]
