"""How a study trains: its workers and threads, whether runs stack, and the one place that hands its runs to an
executor (`Training`): local worker processes (local_executor.py) or Ray tasks (ray_executor.py), one phase per
thread count.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from normlab.study.jobs import run_cost
from normlab.study.ledger import Ledger
from normlab.study.local_executor import ProgressCallback, train_all
from normlab.study.plan import StudyPlan


def default_workers() -> int:
    """Two single-threaded workers on a 2-core machine: for these small models one run per core beats
    one run on two threads (see benchmarks/study_workers.py); more cores → more workers of 2 threads."""
    cores = os.cpu_count() or 1
    return max(1, cores if cores <= 2 else cores // 2)


def default_stack_runs(device: str) -> bool:
    """Stack runs on a GPU, where one small model leaves the device mostly idle; not on a CPU, where the quick
    preset measured 250 s stacked vs 236 s alone end to end (2 workers × 1 thread; README). `device`: the study's
    base config's (`auto` resolved), which every run shares (no claim sets one)."""
    from normlab.device import resolve_device

    return resolve_device(device).type == "cuda"


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
                train_all(self.ledger, phase.ids, self.costs, phase.workers, phase.threads, self.progress,
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


