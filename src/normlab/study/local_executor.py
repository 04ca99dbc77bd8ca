"""The local executor: a study's runs trained in worker processes on this machine (`train_all`), one phase of one
thread count at a time (workers.py hands them over; ray_executor.py is the other executor).

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
from typing import Callable

from normlab.config import RunConfig
from normlab.study.jobs import claim_jobs, done_cost, events_dir, is_stacked, record_results, train_jobs
from normlab.study.ledger import Ledger

ProgressCallback = Callable[[float, float, dict[str, int]], None]  # (done cost, total cost, status counts)


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:  # not Linux: the worker also checks its parent between runs
        pass


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


def train_all(ledger: Ledger, ids: list[str], costs: dict[str, float], workers: int, threads: int,
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
