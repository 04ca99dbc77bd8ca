"""Judge a study: every claim's verdict from the ledger alone, with where it holds.

A claim judges its runs at the level `power.level` gives it (Holm's step over the study's claims, and the look of
its seed rounds: `family.holm`); then, where the study measured them, the same claim is judged again on each other
pass's runs: the other init recipe (`init-dependent`), each `--vary` factor and study-file axis (`depends on
<factor>`, `scope_verdict`), and another thread count (`fragile`). Nothing here trains or writes: the runner judges
the study (`judge_study`) between looks to plan seed rounds, and its last judgement is what `publish` renders.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from normlab.study import power
from normlab.study.claims import CLAIMS, INCONCLUSIVE, Figure, Verdict
from normlab.study.claims.base import split_and_open
from normlab.study.claims.prose import init_text
from normlab.study.claims.statistics import ALPHA, SPENDING, Level
from normlab.study.design import design_beside
from normlab.study.family import holm
from normlab.study.ledger import Ledger
from normlab.study.plan import ClaimPlan, Pass, StudyPlan
from normlab.study.state import Completion
from normlab.study.trained import judge_trained


@dataclass(frozen=True)
class Judged:
    """A study judged from its ledger: the plan it was judged by, its runs (`ids`), how far it was (`status`), and
    every claim's verdict, in family order with the design seeds' beside it, and figures. The runner judges a study
    once its runs are settled, to plan its seed rounds; where nothing is added after that, the same judgement is
    the one the report renders (`publish`), never worked out twice."""

    plan: StudyPlan
    ids: tuple[str, ...]
    status: Completion
    verdicts: tuple[Verdict, ...]
    figures: dict[str, list[Figure]]


def judge_study(plan: StudyPlan, ledger: Ledger, ids: list[str], status: Completion) -> Judged:
    """The study's judgement from its ledger alone, on the runs `ids` (its claims' and their follow-ups'), as far as
    `status` (`state.completion`) says they were: read before the verdicts, so that a run settling meanwhile is
    not called final."""
    verdicts, figures = compute_verdicts(plan, ledger, ids)
    return Judged(plan, tuple(ids), status, tuple(design_beside(plan.preset, verdicts)), figures)


def compute_verdicts(plan: StudyPlan, ledger: Ledger, ids: list[str] | None = None
                     ) -> tuple[list[Verdict], dict[str, list[Figure]]]:
    """Every claim's verdict and figures from the ledger alone (no training), under the family-wise control
    (`family.holm`) over every claim of the study."""
    records = judge_trained(ledger.records(set(ids) if ids is not None else None), plan.lines)
    measurements = ledger.measurements()
    figures: dict[str, list[Figure]] = {}

    def judge_at(claim_id: str, level: float) -> Verdict:
        at = power.level(plan[claim_id], level)
        claim = CLAIMS.get(claim_id)(at)  # every decision of the claim is made at this level
        verdict, figs = judge(plan[claim_id], claim, records, measurements.get(claim_id))
        figures.setdefault(claim_id, figs)
        return mark_look(verdict, at, plan[claim_id]) if at.look else verdict

    # an inconclusive verdict says which kind it is, at its last look's level
    decided = {c: power.explain(v, power.last_alpha(v)) for c, v in holm(list(plan.family), judge_at).items()}
    return [decided[c] for c in plan.family], {c: figures[c] for c in plan.family}


def rebased(records: list, at: Pass) -> list:
    """The records as one pass judges them: grouped against its base on every axis a claim does not name."""
    return [dataclasses.replace(r, base=at.base) for r in records]


def judge(plan: ClaimPlan, claim, records: list, measurement) -> tuple[Verdict, list[Figure]]:
    """One claim's verdict and figures on the runs of its seeds (a claim that stopped at an earlier look never sees
    the seeds another claim's round added to runs they share), with where it holds: the claim is judged once on
    each pass the study measured (`judge_passes`), then its own verdict is marked with what the others said: the
    other init recipe (`mark_init_dependent`), each factor and axis (`scope_verdict`), the thread count
    (`mark_fragile`)."""
    seeds = set(plan.seeds)
    records = [r for r in records if r.seed in seeds]
    own = rebased(records, plan.main)  # its own pass: its paper's init recipe
    again = judge_passes(plan, claim, records, measurement)
    verdict, error = again[plan.main]
    figures: list[Figure] = []
    if verdict is not None:
        try:
            figures = claim.figures(own, measurement, plan.preset)
        except Exception as e:  # as an error of the verdict's: a figure that cannot be drawn is reported too
            verdict, error = None, e
    if verdict is None:  # a verdict that cannot be computed is reported, never hidden
        return Verdict(claim.id, INCONCLUSIVE, "could not be computed", None, 0, {}, {"error": error_text(error)},
                       f"error while computing: {error}"), []
    if not plan.trains:
        return verdict, figures
    # a claim that trains: the init its schemes started from, and the other passes
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
    return verdict, figures


def judge_passes(plan: ClaimPlan, claim, records: list, measurement) -> PassVerdicts:
    """The claim judged once on each of its passes' records (its own first; where it does not train, its own alone),
    each as the verdict or the error that kept it from being computed."""
    judged = []
    for at in plan.passes if plan.trains else [plan.main]:
        try:
            judged.append((at, (claim.judge(rebased(records, at), measurement, plan.preset), None)))
        except Exception as e:
            judged.append((at, (None, e)))
    return PassVerdicts(tuple(judged))


Judgement = tuple[Verdict | None, Exception | None]  # a pass's verdict, or the error that kept it from being computed


@dataclass(frozen=True)
class PassVerdicts:
    """A claim's judgement on each of its passes, found by the plan's own Pass (a Pass holds its base, a dict, so it
    is matched by identity, not hashed)."""

    judged: tuple[tuple[Pass, Judgement], ...]

    def __getitem__(self, at: Pass) -> Judgement:
        return next(j for p, j in self.judged if p is at)


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


def main_records(plan: StudyPlan, records: list) -> list:
    """The study's own runs, without the robustness pass's reruns (which the report does not plot twice)."""
    rerun = plan.robust_changed
    if not rerun:
        return records
    return [r for r in records if any(r.get(k) != v for k, v in rerun.items())]


def mark_fragile(verdict: Verdict, judged: Judgement, plan: ClaimPlan) -> Verdict:
    """`fragile` when the same runs at another thread count (a one-bit change of numerics) give another verdict."""
    again, error = judged
    if again is None:
        return dataclasses.replace(verdict, robustness={"changed": plan.robust_changed, "error": error_text(error)})
    return dataclasses.replace(verdict, fragile=again.verdict != verdict.verdict, robustness={
        "changed": plan.robust_changed, "verdict": again.verdict, "value": again.value, "summary": again.summary})
