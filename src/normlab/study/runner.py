"""Run a study: plan its runs, train them (workers.py), measure, and plan its follow-ups and seed rounds (judging
the claims on a schedule of looks, judge.py), until nothing is added. The study's last judgement is what its report
renders (publish.py); `normlab report` judges the ledger afresh.

A study is final only once every run is settled (completed, diverged, or failed MAX_ATTEMPTS
times) and every claim measured; until then (another process still training here, say) its
verdicts and report are partial and say so (`state.Completion`: what the study directory holds is read in
state.py, which `normlab report` reads too).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from normlab.bench.timing import steady_allocator
from normlab.config import ConfigError
from normlab.study.claims import CLAIMS
from normlab.study.jobs import EXECUTORS
from normlab.study.judge import Judged, judge_study
from normlab.study.ledger import Ledger
from normlab.study.plan import StudyPlan
from normlab.study.reference import REFERENCE_KEY, measure_reference
from normlab.study.state import completion, followup_runs, stale_measurements
from normlab.study.workers import ProgressCallback, Training


@dataclass(frozen=True)
class StudyOutcome:
    """What this process trained: the study's runs (`ids`), their counts by status when it stopped, and its wall
    time; the plan as it ended (its claims' seeds after their rounds) and the study judged from its ledger then
    (`judged`: how far it is, its verdicts), which the report renders."""

    ids: list[str]
    counts: dict[str, int]
    wall_s: float
    judged: Judged

    @property
    def plan(self) -> StudyPlan:
        return self.judged.plan


def run_study(plan: StudyPlan, study_dir: str | Path, workers: int | None = None,
              progress: ProgressCallback | None = None, stack_runs: bool | None = None, executor: str = "local",
              address: str | None = None, say: Callable[[str], None] = print, tensorboard: bool = False
              ) -> StudyOutcome:
    """Train what the claims need and measure, judging the claims on a schedule of looks between rounds
    (`next_runs`); the outcome carries the study's last judgement (`publish` renders it). `stack_runs`: stack runs
    of one shape (None: `workers.default_stack_runs`).
    `executor`: `local` worker processes, or `ray` tasks on the cluster at `address` (ray_executor.py).
    `tensorboard`: each run writes live events to STUDY/tensorboard/<run name> as it trains."""
    if executor not in EXECUTORS:
        raise ConfigError(f"unknown executor {executor!r}; valid: {', '.join(EXECUTORS)}")
    if executor == "local" and address is not None:
        raise ConfigError(f"--address {address!r} is for --executor ray; valid with local: no --address")
    start = time.perf_counter()
    runs = plan.runs  # first: an invalid study leaves nothing on disk
    ledger = open_study(study_dir)
    training = Training(plan, ledger, workers, stack_runs, executor, address, progress, say, tensorboard)
    judged = None
    while judged is None:  # the claims' runs, then the runs that start from them, then seed rounds while a look leans
        training.train(runs)
        if wait_for_others(ledger, set(training.ids), say):
            continue  # then take what they left: a run whose owner was lost is claimed again
        plan, runs, judged = next_runs(plan, ledger, training.ids, say)
        training.plan = plan  # what the ledger records of the study: its seeds after this round
    training.record()  # the study as it ended (a round whose runs all existed trained nothing, and wrote nothing)
    # judged once: the last step judged the study and added nothing; that is its judgement
    return StudyOutcome(training.ids, ledger.counts(set(training.ids)), time.perf_counter() - start, judged)


def wait_for_others(ledger: Ledger, ids: set[str], say: Callable[[str], None], poll_s: float = 2.0) -> bool:
    """Wait while another process trains runs of this study (a second `normlab study` on the directory), so that
    both go on to the same next step and end with the final report; True if it waited. Before, the one that
    finished its share first reported "partial" and exited 5 while the other still trained."""
    pid, waited = os.getpid(), False
    while held := ledger.held_elsewhere(ids, pid):
        if not waited:
            say(f"another process is training {len(held)} of this study's runs: waiting for them to settle")
            waited = True
        time.sleep(poll_s)
    return waited


def open_study(study_dir: str | Path) -> Ledger:
    """The study's ledger, with the reference run timed before any worker starts, while the machine is quiet (a
    resumed study keeps the timing it took first)."""
    ledger = Ledger(study_dir)
    known = ledger.meta().get(REFERENCE_KEY)
    start = time.time()
    reference = measure_reference(known)
    if reference and reference is not known:
        ledger.set_meta(REFERENCE_KEY, reference)
        ledger.add_quiet_span("reference run", start, time.time())
    return ledger


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
    if settled:  # once, on a quiet machine; C10's verdict needs its timings to be judged at all
        measure_claims(plan, ledger)
    status = completion(plan, ledger, ids)  # before the verdicts: a run settling meanwhile is not called final
    more = [r for r in followup_runs(plan, ledger, ids) if r.id not in known]  # none before the runs settle
    if more:
        return plan, more, None
    while True:
        judged = judge_study(plan, ledger, ids, status)
        grown_plan, grown = plan.grow(list(judged.verdicts)) if settled else (plan, [])
        if not grown:
            return plan, [], judged
        say(f"seed round: {', '.join(grown)}: its evidence leans one way but its test cannot yet reach its level")
        plan, runs = grown_plan, [r for r in grown_plan.runs if r.id not in known]
        if runs:
            return plan, runs, None


def measure_claims(plan: StudyPlan, ledger: Ledger) -> None:
    """Timings, memory, constants, causality: once per study, once its runs are settled (a quiet machine).

    One process measures at a time: a second `normlab study` on the directory waits on a lock, then finds the
    claims measured. Why: both used to measure at once, timing each other's load, and on 2 cores their threads
    oversubscribed the machine (C16's 98 models took minutes each instead of 27 s, past a test's 10-minute limit).
    """
    import fcntl

    steady_allocator()  # as `normlab bench`: freed memory stays warm, so no candidate pays another's page faults
    with open(ledger.dir / MEASURE_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when the process dies
        have = ledger.measured() - stale_measurements(plan, ledger)
        for claim_id in plan.claims:
            if claim_id not in have:  # None is stored too: it marks the claim measured (for `completion`)
                start = time.time()
                ledger.set_measurement(claim_id, CLAIMS.get(claim_id)().measure(plan.preset))
                ledger.add_quiet_span(f"measure {claim_id}", start, time.time())


MEASURE_LOCK = ".measuring.lock"  # in the study directory: held by the one process measuring
