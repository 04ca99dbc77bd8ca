"""Family-wise error over a study's claims: Holm's step-down procedure on their primary decisions.

Each claim decides at a level α (an interval's, a TOST's, a sign test's). Sixteen claims each at α = 0.05 would
make some false decision likely in a study where every claim's null were true. Holm (1979) keeps the chance of
any false decision in the family at α: the family's m decisions are tried at α/m; those that are decisive there
are made, and the rest are tried again at α/(m − j), j being the decisions made so far, until a step makes none.

A claim's rule is not one p-value (it may combine a loss interval with a failure count, or a conjunction of
parts), so this is Holm's procedure in its step form: "decisive at level t" stands for "p ≤ t" — the claim is
judged again at each step's level, which is exactly the rule's own decision at that level. A claim that
measures something exact (DeepNorm's constants, causality) is decisive at every level and is decided at the
first step.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from normlab.study.claims.base import Verdict, decisive
from normlab.study.claims.statistics import ALPHA


def holm(claims: list[str], judge_at: Callable[[str, float], Verdict], alpha: float = ALPHA) -> dict[str, Verdict]:
    """{claim: its verdict under Holm's step-down at family-wise level `alpha`}. `judge_at(claim, level)` judges
    a claim with every decision it makes at `level` (a look's share of it on a schedule of looks). A claim's
    verdict is its verdict at the level of the step that decided it; a claim no step decided keeps its verdict
    at the last step's level (inconclusive there). Each verdict's `family` says at which level and step it was
    decided, the family's size, and what it was at `alpha` alone."""
    m = len(claims)
    alone = {c: judge_at(c, alpha) for c in claims}
    out: dict[str, Verdict] = {}
    remaining, made, step = list(claims), 0, 0
    while remaining:
        step += 1
        level = alpha / (m - made)
        at = {c: alone[c] if level == alpha else judge_at(c, level) for c in remaining}
        now = [c for c in remaining if decisive(at[c].verdict)]
        if not now:
            for c in remaining:
                out[c] = _mark(at[c], level, None, m, alpha, alone[c])
            break
        for c in now:
            out[c] = _mark(at[c], level, step, m, alpha, alone[c])
        made += len(now)
        remaining = [c for c in remaining if c not in now]
    return out


def _mark(v: Verdict, level: float, step: int | None, m: int, alpha: float, alone: Verdict) -> Verdict:
    """The verdict with its family-wise record: the level and step that decided it, the family's size, and what it
    was at `alpha` alone (said in its summary where no step decided it)."""
    family = {"alpha": alpha, "m": m, "level": round(level, 12), "step": step, "alone": alone.outcome.text,
              "method": f"Holm's step-down over the study's {m} claims at family-wise α = {alpha:g}"}
    summary = v.summary
    if step is None and decisive(alone.verdict):
        # a measurement's part left open (C10's timing) narrows with more timing rounds, not with more seeds
        more = "timing rounds" if any(p.get("rounds") and not decisive(p["verdict"]) for p in v.parts) else "seeds"
        summary += (f"; {alone.outcome.text} at α = {alpha:g} alone, not at the family level {level:.3g} (Holm over "
                    f"{m} claims): more {more} would decide")
    return dataclasses.replace(v, family=family, summary=summary)
