"""The local executor: a study's runs trained in worker processes on this machine, one phase per thread count, and
the one place that hands runs to an executor (`Training`: local workers here, or Ray tasks, ray_executor.py).

Workers are separate processes (spawned) that each take runs from the ledger until none is left; each uses
`threads` intra-op threads. A worker dies with the study process (Linux parent-death signal), so a killed study
leaves no orphan training on; the next `normlab study` on the directory takes over the interrupted runs, which
resume from their checkpoints.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from normlab.config import RunConfig
from normlab.study.jobs import claim_jobs, done_cost, events_dir, is_stacked, record_results, run_cost, train_jobs
from normlab.study.ledger import Ledger
from normlab.study.plan import StudyPlan

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


def default_stack_runs(device: str) -> bool:
    """Stack runs on a GPU, where one small model leaves the device mostly idle; not on a CPU, where the quick
    preset measured 250 s stacked vs 236 s alone end to end (2 workers × 1 thread; README). `device`: the study's
    base config's (`auto` resolved), which every run shares (no claim sets one)."""
    from normlab.device import resolve_device

    return resolve_device(device).type == "cuda"


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
class Training:
    """How a study trains (its workers, threads per worker, executor, whether runs stack) and what it has registered
    so far (`ids`, `costs`). Unset, `workers` is `default_workers()`; the cores are shared among them (a Ray task
    gets one CPU: what one small run trains fastest on, benchmarks/study_workers.py); `stack_runs` is
    `default_stack_runs` of the study's device."""

    plan: StudyPlan  # the study at its current look: what the ledger records of it
    ledger: Ledger
    workers: int | None = None
    stack_runs: bool | None = None
    executor: str = "local"
    address: str | None = None
    progress: ProgressCallback | None = None
    say: Callable[[str], None] = print
    tensorboard: bool = False
    ids: list[str] = field(default_factory=list)
    costs: dict[str, float] = field(default_factory=dict)
    threads: int = field(init=False)

    def __post_init__(self) -> None:
        self.workers = self.workers or default_workers()
        self.threads = 1 if self.executor == "ray" else max(1, (os.cpu_count() or 1) // self.workers)
        if self.stack_runs is None:
            self.stack_runs = default_stack_runs(self.plan.base_config().train.device)

    def train(self, runs: list) -> None:
        """Register `runs` in the ledger, with what `normlab report` reads later (the study's settings, each
        corpus's trained line; written even for a study of no runs), and train those not yet settled: one phase
        per thread count (`phases`), on the study's executor. Runs it has already registered (the follow-ups of
        earlier rounds) are not listed twice."""
        known = set(self.ids)
        runs = [r for r in runs if r.id not in known]
        by_threads = phases(runs, self.workers, self.threads)
        self.ledger.add_runs([(r.id, r.data) for r in runs])
        self.costs.update({r.id: run_cost(r.data) for r in runs})
        self.ids.extend(r.id for r in runs)
        self.record()
        for phase in by_threads:
            if self.executor == "local":
                _train_all(self.ledger, phase.ids, self.costs, phase.workers, phase.threads, self.progress,
                           self.stack_runs, self.tensorboard)
            else:
                from normlab.study.ray_executor import train_all_ray

                train_all_ray(self.ledger, phase.ids, self.costs, phase.threads, self.progress, self.stack_runs,
                              self.address, self.say, self.tensorboard)


    def record(self) -> None:
        """What the ledger holds of the study (`normlab report` reads it): its settings, runs and seeds as now."""
        self.ledger.set_meta("study", self.plan.record(self.ids))


class Phase(NamedTuple):
    """Runs that pin one thread count, and as many workers as the cores allow at that count."""

    ids: list[str]
    workers: int
    threads: int


def phases(runs: list, workers: int, threads: int) -> list[Phase]:
    """Runs grouped by the thread count they pin (train.threads; `process`: the worker's `threads`). Why: 2 workers × 2 threads on 2 cores made each 7 s run take minutes
    (OpenMP threads spinning against each other), so runs that pin more threads get fewer workers."""
    cores = os.cpu_count() or 1
    by_threads: dict[int, list[str]] = {}
    for r in runs:
        by_threads.setdefault(r.config.train.number("threads") or threads, []).append(r.id)
    return [Phase(ids, max(1, min(workers, cores // t)), t) for t, ids in sorted(by_threads.items())]


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
