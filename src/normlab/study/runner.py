"""Run a study: train its plan's runs (workers.py), then take its next step (rounds.py: measure, then the follow-ups
and seed rounds its claims ask for, judging them on a schedule of looks), until nothing is added. The study's last
judgement is what its report renders (publish.py); `normlab report` judges the ledger afresh.

A study is final only once every run is settled (completed, diverged, or failed MAX_ATTEMPTS times) and every claim
measured; until then (another process still training here, say) its verdicts and report are partial and say so
(`state.Completion`: what the study directory holds is read in state.py, which `normlab report` reads too).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from normlab.config import ConfigError
from normlab.study.jobs import EXECUTORS
from normlab.study.judge import Judged
from normlab.study.ledger import Ledger
from normlab.study.plan import StudyPlan
from normlab.study.reference import REFERENCE_KEY, measure_reference
from normlab.study.rounds import next_runs
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
