"""A study's next step, chosen from its ledger once its runs are settled (`next_runs`): its claims measured
(measuring.py), then the runs its claims start from trained ones, else a seed round's, else its judgement. The
runner (runner.py) trains what this chooses and asks again; nothing here trains.
"""
from __future__ import annotations

from typing import Callable

from normlab.study.judge import Judged, judge_study
from normlab.study.ledger import Ledger
from normlab.study.measuring import measure_claims
from normlab.study.plan import StudyPlan
from normlab.study.state import completion, followup_runs


def next_runs(plan: StudyPlan, ledger: Ledger, ids: list[str], say: Callable[[str], None] = print
              ) -> tuple[StudyPlan, list, Judged | None]:
    """The study at its next step, and what it trains there, or, where nothing is left to train, the study judged
    (partial where another process still trains its runs). Nothing is chosen before every run in `ids` is
    settled (chosen from partial results, it could differ from what the final ones choose):
    - the runs the claims start from trained ones (C7's fine-tunes, `state.followup_runs`);
    - else the next seed round's: each claim on the preset's schedule (`Preset.seed_rounds`) whose verdict at its
      look is inconclusive but leans one way (`power.leans`: a failure split whose majority falls one way, an
      interval that straddles its boundary) gets its next look's seeds (`StudyPlan.grow`: a new plan, this one
      left as it is), and the runs those seeds add are trained. Runs already trained are the same configs, so
      they are reused, never retrained; a round whose runs are all known already is judged at once, at its look,
      and may lean into the next."""
    known = set(ids)
    done, total = ledger.progress(known)
    settled = done == total
    # measured once, on a quiet machine (C10's verdict needs its timings to be judged at all); its completion then,
    # before the verdicts: a run settling meanwhile is not called final
    measured = measure_claims(plan, ledger, measure=settled)
    status = completion(plan, ledger, ids, measured)
    more = [r for r in followup_runs(plan, ledger, ids) if r.id not in known]  # none before the runs settle
    if more:
        return plan, more, None
    while True:
        judged = judge_study(plan, ledger, ids, status)
        grown_plan, grown = plan.grow(judged.leaning) if settled else (plan, [])
        if not grown:
            return plan, [], judged
        say(f"seed round: {', '.join(grown)}: its evidence leans one way but its test cannot yet reach its level")
        plan, runs = grown_plan, [r for r in grown_plan.runs if r.id not in known]
        if runs:
            return plan, runs, None
