"""Judge a study: every claim's verdict from the ledger alone, with where it holds.

A claim judges its runs at the level Holm's step over the study's claims gives it (`family.holm`), at the look of
its seed rounds with its shares of α (its plan's, study/power.py); it is judged once on each pass the study
measured (`judge_passes`: its own runs, the other init recipe, each `--vary` factor and study-file axis, another
thread count), and scope.py marks its own verdict with what the others said (`init-dependent`, `depends on
<factor>`, `fragile`). Nothing here trains or writes: the runner judges the study (`judge_study`) between looks to
plan seed rounds, and its last judgement is what `publish` renders.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from normlab.study import power
from normlab.study.claims import CLAIMS, INCONCLUSIVE, Figure, Verdict
from normlab.study.claims.statistics import Level
from normlab.study.design import design_beside
from normlab.study.family import holm
from normlab.study.ledger import Ledger
from normlab.study.plan import ClaimPlan, Pass, StudyPlan
from normlab.study.scope import PassVerdicts, error_text, mark_look, placed
from normlab.study.state import Completion
from normlab.study.trained import judge_trained


@dataclass(frozen=True)
class Judged:
    """A study judged from its ledger: the plan it was judged by, its runs (`ids`), how far it was (`status`), and
    every claim's verdict, in family order with the design seeds' beside it, and figures; and the claims whose
    verdict leans one way at its look (`leaning`, `power.leans`: more seeds could decide it). The runner judges a
    study once its runs are settled, to plan its seed rounds (`StudyPlan.grow` on `leaning`); where nothing is
    added after that, the same judgement is the one the report renders (`publish`), never worked out twice."""

    plan: StudyPlan
    ids: tuple[str, ...]
    status: Completion
    verdicts: tuple[Verdict, ...]
    figures: dict[str, list[Figure]]
    leaning: tuple[str, ...] = ()


def judge_study(plan: StudyPlan, ledger: Ledger, ids: list[str], status: Completion) -> Judged:
    """The study's judgement from its ledger alone, on the runs `ids` (its claims' and their follow-ups'), as far as
    `status` (`state.completion`) says they were: read before the verdicts, so that a run settling meanwhile is
    not called final."""
    verdicts, figures = compute_verdicts(plan, ledger, ids)
    leaning = tuple(v.id for v in verdicts if power.leans(v))
    return Judged(plan, tuple(ids), status, tuple(design_beside(plan.design, plan.preset.seeds, verdicts)), figures,
                  leaning)


def compute_verdicts(plan: StudyPlan, ledger: Ledger, ids: list[str] | None = None
                     ) -> tuple[list[Verdict], dict[str, list[Figure]]]:
    """Every claim's verdict and figures from the ledger alone (no training), under the family-wise control
    (`family.holm`) over every claim of the study."""
    records = judge_trained(ledger.records(set(ids) if ids is not None else None), plan.lines)
    measurements = ledger.measurements()
    figures: dict[str, list[Figure]] = {}

    def judge_at(claim_id: str, level: float) -> Verdict:
        own = plan[claim_id]  # the Holm step's level, at the claim's look with its shares (study/power.py)
        at = Level(level, own.look, own.shares if own.look else None)
        claim = CLAIMS.get(claim_id)(at)  # every decision of the claim is made at this level
        verdict, figs = judge(own, claim, records, measurements.get(claim_id))
        figures.setdefault(claim_id, figs)
        return mark_look(verdict, at, own) if at.look else verdict

    # an inconclusive verdict says which kind it is, at its last look's level
    decided = {c: power.explain(v, power.last_alpha(v)) for c, v in holm(list(plan.family), judge_at).items()}
    return [decided[c] for c in plan.family], {c: figures[c] for c in plan.family}


def rebased(records: list, at: Pass) -> list:
    """The records as one pass judges them: grouped against its base on every axis a claim does not name."""
    return [dataclasses.replace(r, base=at.base) for r in records]


def judge(plan: ClaimPlan, claim, records: list, measurement) -> tuple[Verdict, list[Figure]]:
    """One claim's verdict and figures on the runs of its seeds (a claim that stopped at an earlier look never sees
    the seeds another claim's round added to runs they share), with where it holds: the claim is judged once on
    each pass the study measured (`judge_passes`), then its own verdict is marked with what the others said
    (`scope.placed`: the other init recipe, each factor and axis, the thread count)."""
    seeds = set(plan.seeds)
    records = [r for r in records if r.seed in seeds]
    passes = [(at, rebased(records, at)) for at in (plan.passes if plan.trains else [plan.main])]
    own = passes[0][1]  # its own pass first: its paper's init recipe
    again = judge_passes(passes, claim, measurement, plan.preset)
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
    return (placed(verdict, again, plan) if plan.trains else verdict), figures


def judge_passes(passes: list[tuple[Pass, list]], claim, measurement, preset) -> PassVerdicts:
    """The claim judged once on each of its passes' records (`passes`: each pass with its records rebased on it, its
    own first; where it does not train, its own alone), each as the verdict or the error that kept it from being
    computed."""
    judged = []
    for at, records in passes:
        try:
            judged.append((at, (claim.judge(records, measurement, preset), None)))
        except Exception as e:
            judged.append((at, (None, e)))
    return PassVerdicts(tuple(judged))


