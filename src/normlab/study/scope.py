"""Where a claim's verdict holds: its own verdict marked with what the same claim said on each other pass the study
measured (judge.py judges every pass once): the other init recipe (`init-dependent`), each `--vary` factor and
study-file axis (`depends on <factor>`, `scope_verdict`), another thread count (`fragile`); and the look of the
sequential schedule it was decided at (`mark_look`). Nothing here judges: it composes verdicts already judged.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from normlab.study.claims import Verdict
from normlab.study.claims.base import split_and_open
from normlab.study.claims.prose import init_text
from normlab.study.claims.statistics import ALPHA, SPENDING, Level
from normlab.study.plan import ClaimPlan, Pass

Judgement = tuple[Verdict | None, Exception | None]  # a pass's verdict, or the error that kept it from being computed


@dataclass(frozen=True)
class PassVerdicts:
    """A claim's judgement on each of its passes, found by the plan's own Pass (a Pass holds its base, a dict, so it
    is matched by identity, not hashed)."""

    judged: tuple[tuple[Pass, Judgement], ...]

    def __getitem__(self, at: Pass) -> Judgement:
        return next(j for p, j in self.judged if p is at)


def placed(verdict: Verdict, again: PassVerdicts, plan: ClaimPlan) -> Verdict:
    """A training claim's own verdict with the init its schemes started from, and where it holds: under the other
    init recipe, each factor's and axis's other levels, and another thread count (`again`: every pass judged)."""
    verdict = dataclasses.replace(verdict, init=plan.inits[0], settings={
        **verdict.settings, "init": verdict.settings.get("init", init_text(plan.inits[0]))})
    if plan.other_init:
        verdict = mark_init_dependent(verdict, again[plan.other_init], plan)
    levels = {}
    for own, other in plan.varied:
        levels[other.factor] = {own.level: verdict.verdict, other.level: level_verdict(again[other])}
    for axis in plan.axes:  # a study file's axes: the claim judged at each value
        levels[axis.key] = {axis.own_level: verdict.verdict, **{at.level: level_verdict(again[at])
                                                                for at in axis.passes}}
    if verdict.other_init.get("verdict"):
        levels = {"init": {verdict.init: verdict.verdict, verdict.other_init["recipe"]:
                           verdict.other_init["primary"]}, **levels}
    verdict = scope_verdict(verdict, levels, list(plan.fixed))
    if plan.robustness:
        verdict = mark_fragile(verdict, again[plan.robustness], plan)
    return verdict


def error_text(error: Exception | None) -> str:
    return f"{type(error).__name__}: {error}"


def level_verdict(judged: Judgement) -> str:
    """A pass's verdict as a level of the scope, or the error that kept it from being computed."""
    verdict, error = judged
    return verdict.verdict if verdict else f"error: {error_text(error)}"


def scope_verdict(verdict: Verdict, levels: dict[str, dict[str, str]], fixed: list[str]) -> Verdict:
    """Where the verdict holds: `scope` = {factor: {level: verdict}}, the claim's own level first, each level judged
    at the verdict's own family-wise level (one rule for every factor, C1's lr included). A factor whose levels
    give opposite decisive verdicts (holds under one, does not hold under the other) makes the outcome `depends on
    <factor>` (`depends_on`), which never counts as holds; a level that is inconclusive leaves a decisive verdict
    standing where it was judged, counted apart from one decisive under every level (`Outcome.open_levels`)."""
    scope = {**verdict.scope, **{factor: dict(by_level) for factor, by_level in levels.items()}}
    for factor in fixed:  # the claim's own runs set this factor (C8's narrow models): not varied for it
        scope[factor] = {"its own runs' level (not varied)": verdict.verdict}
    summary = verdict.summary
    if scope:
        summary += "; where it holds: " + "; ".join(
            f"{factor}: " + ", ".join(f"{v} under {level}" for level, v in by_level.items())
            for factor, by_level in scope.items())
    return dataclasses.replace(verdict, scope=scope, depends_on=list(split_and_open(scope)[0]), summary=summary)


def mark_look(verdict: Verdict, level: Level, plan: ClaimPlan) -> Verdict:
    """Which look of the sequential schedule a verdict was decided at, with its level and the claim's spending
    over its looks (study/power.py), in verdicts.json and in the verdict's test."""
    k, looks = level.look
    shares = list(level.shares or SPENDING[looks])
    n = len(plan.seeds)
    look = {"look": k, "looks": looks, "alpha": round(ALPHA * shares[k - 1], 12), "n_seeds": n,
            "schedule": plan.preset.seed_rounds, "shares": shares,
            "spending": "Bonferroni over the looks: α = 0.05 split " + " + ".join(f"{ALPHA * x:g}" for x in shares)}
    return dataclasses.replace(verdict, look=look, test=(f"{verdict.test}; " if verdict.test else "")
                               + f"look {k} of {looks} at {n} seeds (α = {ALPHA * shares[k - 1]:g} at this look)")


def mark_init_dependent(verdict: Verdict, judged: Judgement, plan: ClaimPlan
                        ) -> Verdict:
    """`init-dependent` when the same claim judged on the runs of the other init recipe gives another verdict;
    both numbers are kept (the other's verdict, value, interval and sub-verdicts)."""
    recipe = plan.inits[1]
    again, error = judged
    if again is None:
        return dataclasses.replace(verdict, other_init={"recipe": recipe, "error": error_text(error)})
    return dataclasses.replace(verdict, init_dependent=again.verdict != verdict.verdict, other_init={
        "recipe": recipe, "verdict": again.outcome.text, "primary": again.verdict, "value": again.value,
        "interval": again.interval, "reading": again.reading, "summary": again.summary,
        "parts": [{"name": p["name"], "verdict": p["verdict"], "value": p["value"], "interval": p["interval"]}
                  for p in again.parts]})


def mark_fragile(verdict: Verdict, judged: Judgement, plan: ClaimPlan) -> Verdict:
    """`fragile` when the same runs at another thread count (a one-bit change of numerics) give another verdict."""
    again, error = judged
    if again is None:
        return dataclasses.replace(verdict, robustness={"changed": plan.robust_changed, "error": error_text(error)})
    return dataclasses.replace(verdict, fragile=again.verdict != verdict.verdict, robustness={
        "changed": plan.robust_changed, "verdict": again.verdict, "value": again.value, "summary": again.summary})
