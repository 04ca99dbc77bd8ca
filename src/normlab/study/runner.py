"""Run a study: register its runs, train them in worker processes, measure, and plan its seed rounds from the
verdicts `judge.py` computes.

Workers are separate processes (spawned) that each take runs from the ledger until
none is left; each uses `threads` intra-op threads. A worker dies with the study process
(Linux parent-death signal), so a killed study leaves no orphan training on; the next
`normlab study` on the directory takes over the interrupted runs, which resume from
their checkpoints.

A study is final only once every run is settled (completed, diverged, or failed MAX_ATTEMPTS
times) and every claim measured; until then (another process still training here, say) its
verdicts and report are partial and say so (`state.Completion`: what the study directory holds is read in
state.py, which `normlab report` reads too).
"""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from normlab.bench.timing import steady_allocator
from normlab.config import ConfigError, RunConfig
from normlab.study.claims import CLAIMS, Figure, Verdict
from normlab.study.jobs import (EXECUTORS, claim_jobs, done_cost, events_dir, is_stacked, record_results, run_cost,
                                train_jobs)
from normlab.study.judge import compute_verdicts
from normlab.study.ledger import Ledger
from normlab.study.reference import REFERENCE_KEY, measure_reference
from normlab.study.spec import StudySpec
from normlab.study.state import completion, followup_runs, stale_measurements

ProgressCallback = Callable[[float, float, dict[str, int]], None]  # (done cost, total cost, status counts)


def default_workers() -> int:
    """Two single-threaded workers on a 2-core machine: for these small models one run per core beats
    one run on two threads (see benchmarks/study_workers.py); more cores → more workers of 2 threads."""
    cores = os.cpu_count() or 1
    return max(1, cores if cores <= 2 else cores // 2)


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:  # not Linux: the worker also checks its parent between runs
        pass


def default_stack_runs(runs: list) -> bool:
    """Stack runs on a GPU, where one small model leaves the device mostly idle; not on a CPU, where the
    quick preset measured 250 s stacked vs 236 s alone end to end (2 workers × 1 thread; README). A study's runs
    share their base's device (no claim sets one)."""
    from normlab.device import resolve_device

    return bool(runs) and resolve_device(runs[0].config.train.device).type == "cuda"


def worker_main(study_dir: str, ids: list[str], threads: int, stack_runs: bool = True,
                tensorboard: bool = False) -> None:
    """Claim runs until none is left. With `stack_runs`, a claim takes runs of one shape together (up to
    `group_limit`) and trains them as one stack, even a stack of one: a run's numerics then never
    depend on which runs it happened to be claimed with. Without it, each run trains alone."""
    _die_with_parent()
    # Ctrl-C reaches every process of the terminal's group: the study process alone answers it, and stops its
    # workers with SIGTERM, which each turns into KeyboardInterrupt (its runs: `interrupted`, handed back)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    import torch

    torch.set_num_threads(threads)
    parent = os.getppid()
    ledger = Ledger(study_dir)
    jobs: list = []
    try:  # SIGTERM may land anywhere in the loop: the runs held then are handed back, quietly
        while os.getppid() == parent:
            jobs = claim_jobs(ledger, os.getpid(), ids, stack_runs)
            if not jobs:
                return
            with ledger.holding([rid for rid, _ in jobs], os.getpid()):  # a live worker's runs are never taken over
                _train_group(ledger, jobs, is_stacked(jobs, stack_runs), tensorboard)
            jobs = []
    except KeyboardInterrupt:
        ledger.release([rid for rid, _ in jobs], os.getpid())


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _train_group(ledger: Ledger, jobs: list[tuple[str, RunConfig]], stacked: bool,
                 tensorboard: bool = False) -> None:
    """Train the claimed runs (as one stack, or the one run alone); each is finished or failed on its own."""
    runs = [(cfg, str(ledger.run_dir(rid))) for rid, cfg in jobs]
    events = [str(events_dir(ledger.dir, rid, cfg)) for rid, cfg in jobs] if tensorboard else None
    record_results(ledger, jobs, train_jobs(runs, stacked, events))


@dataclass
class StudyOutcome:
    verdicts: list[Verdict]
    figures: dict[str, list[Figure]]
    counts: dict[str, int]
    wall_s: float
    final: bool  # False: runs pending, running in another process, to be retried, or claims not measured
    done: int  # settled runs (see `Completion`)
    total: int
    failed: list[dict[str, Any]]  # `failed_runs`


def run_study(spec: StudySpec, study_dir: str | Path, workers: int | None = None,
              progress: ProgressCallback | None = None, stack_runs: bool | None = None, executor: str = "local",
              address: str | None = None, say: Callable[[str], None] = print, tensorboard: bool = False
              ) -> StudyOutcome:
    """Train what the claims need, measure, judge. `stack_runs`: stack runs of one shape (None: `default_stack_runs`).
    `executor`: `local` worker processes, or `ray` tasks on the cluster at `address` (ray_executor.py).
    `tensorboard`: each run writes live events to STUDY/tensorboard/<run name> as it trains."""
    if executor not in EXECUTORS:
        raise ConfigError(f"unknown executor {executor!r}; valid: {', '.join(EXECUTORS)}")
    if executor == "local" and address is not None:
        raise ConfigError(f"--address {address!r} is for --executor ray; valid with local: no --address")
    start = time.perf_counter()
    ledger, runs = register(spec, study_dir)
    workers = workers or default_workers()
    training = Training(spec, ledger, [r.id for r in runs], {r.id: run_cost(r.data) for r in runs}, workers,
                        # a Ray task gets one CPU (what one small run trains fastest on, benchmarks/study_workers.py)
                        1 if executor == "ray" else max(1, (os.cpu_count() or 1) // workers),
                        default_stack_runs(runs) if stack_runs is None else stack_runs, executor, address, progress,
                        say, tensorboard)
    training.phases(runs)
    while True:  # sequential seed rounds, while a look leaves a claim undecided
        training.more(followup_runs(spec, ledger, training.ids))  # runs that start from trained ones (C7's fine-tunes)
        more = seed_round(spec, ledger, training.ids, say)
        if not more:
            break
        training.more(more)
    ids = training.ids
    done, total = ledger.progress(set(ids))
    if done == total:  # not while another process still trains here: timings want a quiet machine
        measure_claims(spec, ledger)
    status = completion(spec, ledger, ids)
    verdicts, figures = compute_verdicts(spec, ledger, ids)
    return StudyOutcome(verdicts, figures, ledger.counts(set(ids)), time.perf_counter() - start,
                        status.final, status.done, status.total, status.failed)


def register(spec: StudySpec, study_dir: str | Path) -> tuple[Ledger, list]:
    """The study's runs registered in its ledger, with what `normlab report` reads later (the study's settings,
    each corpus's trained line) and the reference run timed before any worker starts, while the machine is
    quiet. The runs are expanded first: an invalid study leaves nothing on disk."""
    runs = spec.expand(CLAIMS)
    meta = spec.record([r.id for r in runs])
    ledger = Ledger(study_dir)
    ledger.add_runs([(r.id, r.data) for r in runs])
    ledger.set_meta("study", meta)
    known = ledger.meta().get(REFERENCE_KEY)
    reference = measure_reference(known)
    if reference and reference is not known:
        ledger.set_meta(REFERENCE_KEY, reference)
    return ledger, runs


@dataclass
class Training:
    """How a study trains (its workers, threads, executor) and what it has registered so far (`ids`, `costs`)."""

    spec: StudySpec
    ledger: Ledger
    ids: list[str]
    costs: dict[str, float]
    workers: int
    threads: int
    stack_runs: bool
    executor: str
    address: str | None
    progress: ProgressCallback | None
    say: Callable[[str], None]
    tensorboard: bool

    def phases(self, runs: list) -> None:
        """Train `runs`, one phase per thread count (`phases`), on the study's executor."""
        for phase_ids, phase_workers, phase_threads in phases(runs, self.workers, self.threads):
            if self.executor == "ray":
                from normlab.study.ray_executor import train_all_ray

                train_all_ray(self.ledger, phase_ids, self.costs, phase_threads, self.progress, self.stack_runs,
                              self.address, self.say, self.tensorboard)
            else:
                _train_all(self.ledger, phase_ids, self.costs, phase_workers, phase_threads, self.progress,
                           self.stack_runs, self.tensorboard)

    def more(self, more: list) -> None:
        """Register runs the study found it needs after the first ones (follow-ups, seed rounds) and train them;
        runs it already has (the follow-ups of earlier rounds) are not listed twice."""
        known = set(self.ids)
        more = [r for r in more if r.id not in known]
        if not more:
            return
        self.ledger.add_runs([(r.id, r.data) for r in more])
        self.costs.update({r.id: run_cost(r.data) for r in more})
        self.ids.extend(r.id for r in more)
        self.ledger.set_meta("study", self.spec.record(self.ids))
        self.phases(more)


def seed_round(spec: StudySpec, ledger: Ledger, ids: list[str], say: Callable[[str], None] = print) -> list:
    """The runs of the next seed round: once every run in `ids` is settled, each claim on the preset's schedule
    (`Preset.seed_rounds`) whose verdict at its look is inconclusive but leans one way (`power.leans`: a failure
    split whose majority falls one way, an interval that straddles its boundary) gets its next look's seeds
    (`StudySpec.grow`); the runs those seeds add and that `ids` lacks ([] when none: every claim decided or at its
    last look). Runs already trained are the same configs, so they are reused, never retrained."""
    done, total = ledger.progress(set(ids))
    if done < total:
        return []
    measure_claims(spec, ledger)  # a quiet machine now too; C10's verdict needs its timings to be judged at all
    grown = spec.grow(compute_verdicts(spec, ledger, ids, spec.on_schedule())[0])
    if grown:
        say(f"seed round: {', '.join(grown)}: its evidence leans one way but its test cannot yet reach its level")
    known = set(ids)
    return [r for r in spec.expand(CLAIMS) if r.id not in known]


def phases(runs: list, workers: int, threads: int) -> list[tuple[list[str], int, int]]:
    """Runs grouped by the thread count they pin (train.threads; `process`: the worker's): (ids, as many workers as the
    cores allow, threads). Why: 2 workers × 2 threads on 2 cores made each 7 s run take minutes
    (OpenMP threads spinning against each other), so runs that pin more threads get fewer workers."""
    cores = os.cpu_count() or 1
    by_threads: dict[int, list[str]] = {}
    for r in runs:
        by_threads.setdefault(r.config.train.number("threads") or threads, []).append(r.id)
    return [(ids, max(1, min(workers, cores // t)), t) for t, ids in sorted(by_threads.items())]


def _train_all(ledger: Ledger, ids: list[str], costs: dict[str, float], workers: int, threads: int,
               progress: ProgressCallback | None, stack_runs: bool = True, tensorboard: bool = False) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=worker_main, args=(str(ledger.dir), ids, threads, stack_runs, tensorboard),
                         daemon=True)
             for _ in range(workers)]
    for p in procs:
        p.start()
    total = sum(costs.values())
    try:
        while True:
            alive = any(p.is_alive() for p in procs)
            if progress is not None:
                progress(done_cost(ledger, costs), total, ledger.counts(set(costs)))  # the whole study
            if not alive:
                break
            time.sleep(0.5)
    except KeyboardInterrupt:  # stop the workers: each marks its runs interrupted and hands them back
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=60)
        raise
    for p in procs:
        p.join()


def measure_claims(spec: StudySpec, ledger: Ledger) -> None:
    """Timings, memory, constants, causality: once per study, after the training runs (a quiet machine).

    One process measures at a time: a second `normlab study` on the directory waits on a lock, then finds the
    claims measured. Why: both used to measure at once, timing each other's load, and on 2 cores their threads
    oversubscribed the machine (C16's 98 models took minutes each instead of 27 s, past a test's 10-minute limit).
    """
    import fcntl

    steady_allocator()  # as `normlab bench`: freed memory stays warm, so no candidate pays another's page faults
    with open(ledger.dir / MEASURE_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when the process dies
        have = ledger.measured() - stale_measurements(spec, ledger)
        for claim_id in spec.claims:
            if claim_id not in have:  # None is stored too: it marks the claim measured (for `completion`)
                ledger.set_measurement(claim_id, CLAIMS.get(claim_id)().measure(spec.preset))


MEASURE_LOCK = ".measuring.lock"  # in the study directory: held by the one process measuring
