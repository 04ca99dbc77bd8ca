"""Interleaved timing and peak-memory measurement shared by the benchmarks.

Why interleave: on a shared machine the load drifts over seconds; timing A for a
while and then B would charge the drift to one of them. Here every round runs each
candidate once, in a freshly shuffled order, and the median over rounds is
reported. Shuffled, not rotated: a rotation keeps every candidate behind the same
neighbour, and a candidate right after one that left 100 MB of dirty cache lines
pays for writing them back (measured: up to 1.5x on a 2 ms norm).
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import math
import os
import random
import statistics
import sys
import time
from typing import Callable

import torch


def steady_allocator() -> bool:
    """Make glibc keep freed memory instead of returning it to the OS (True if it could).

    Why: a large tensor freed to the OS costs the next allocation thousands of page
    faults (3000 faults, ~2 ms for a 12 MB tensor on this machine), and which candidate
    pays depends on the order of the frees, not on its own kernel. With fixed mmap and
    trim thresholds every candidate runs on warm memory, as in a training loop.
    """
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        m_trim_threshold, m_mmap_threshold = -1, -3  # from glibc's malloc.h
        return bool(libc.mallopt(m_mmap_threshold, 1 << 30) and libc.mallopt(m_trim_threshold, 2**31 - 1))
    except (OSError, AttributeError):
        return False


CLOCKS = {
    "wall": time.perf_counter,
    # CPU time of this process: on a shared machine, with --threads 1, the time other
    # processes hold the core is left out (their cache and memory traffic still counts).
    "cpu": time.process_time,
}


def interleaved_medians(fns: dict[str, Callable[[], object]], rounds: int, warmup: int = 2,
                        min_sample_s: float = 0.02, clock: str = "wall") -> dict[str, float]:
    """Median seconds per call of each function, timed in `rounds` interleaved rounds (`interleaved_samples`)."""
    samples = interleaved_samples(fns, rounds, warmup, min_sample_s, clock)
    return {name: statistics.median(v) for name, v in samples.items()}


WIDE_SPREAD = 1.5  # max / min over the rounds past which a figure is flagged as noise, not a finding


def spread_of(values: list[float], name: str) -> dict[str, float | bool]:
    """min, median and max of a figure over its timing rounds, their ratio (max / min) and whether it is wide
    (`WIDE_SPREAD`): what a table prints beside the median, so that noise never reads as a finding."""
    lo, hi = min(values), max(values)
    return {f"{name}_min": lo, f"{name}_median": statistics.median(values), f"{name}_max": hi,
            f"{name}_spread": hi / lo if lo > 0 else math.inf, f"{name}_wide": hi / lo > WIDE_SPREAD if lo > 0 else True}


def interleaved_samples(fns: dict[str, Callable[[], object]], rounds: int, warmup: int = 2,
                        min_sample_s: float = 0.02, clock: str = "wall") -> dict[str, list[float]]:
    """Seconds per call of each function in each of `rounds` interleaved rounds: sample r of every function
    comes from the same round, so two functions' samples are paired by round (a machine slowed for a moment
    slows both).

    Each sample repeats a call enough times to last about `min_sample_s`: microsecond
    calls are not dominated by the timer, and what the previous candidate left behind
    (dirty cache lines) is spread over many calls, so that a sample measures the
    call's own steady-state cost.
    """
    now = CLOCKS[clock]
    reps = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
        t0 = now()
        fn()
        reps[name] = max(1, math.ceil(min_sample_s / max(now() - t0, 1e-7)))
    samples: dict[str, list[float]] = {name: [] for name in fns}
    names, rng = list(fns), random.Random(0)
    for _ in range(rounds):
        rng.shuffle(names)
        for name in names:
            fn, n = fns[name], reps[name]
            t0 = now()
            for _ in range(n):
                fn()
            samples[name].append((now() - t0) / n)
    return samples


def peak_step_memory_mb(step: Callable[[], object], device: torch.device, persistent_bytes: int) -> float | None:
    """Peak tensor memory of one call of `step`, in MiB: `persistent_bytes` plus the most
    `step` held at once on top of it.

    CUDA: torch.cuda.max_memory_allocated over the step (all live tensors).
    CPU: torch keeps no allocator statistics, so the step runs once under the profiler
    with profile_memory=True and the allocation/free events of PyTorch's CPU allocator
    are summed in time order; their running maximum is what the step allocates on top
    of what existed before (activations, gradients, temporaries). `persistent_bytes`
    (parameters, buffers, optimizer state) is added. Not counted: oneDNN/MKL scratch
    space and anything else allocated outside PyTorch's allocator, and Python objects.
    None if the profiler's event tree (a private API) is unavailable.
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) / 2**20
    try:
        from torch._C._profiler import _EventType
        from torch.profiler import ProfilerActivity, profile

        with _stderr_silenced(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            step()
        sizes = sorted(_allocations(prof.profiler.kineto_results.experimental_event_tree(), _EventType.Allocation))
    except Exception:  # a private API: report "unknown" rather than a wrong number
        return None
    live = peak = 0
    for _, size in sizes:
        live += size
        peak = max(peak, live)
    return (persistent_bytes + peak) / 2**20


@contextlib.contextmanager
def _stderr_silenced():
    """Kineto writes two 'USDT: profiler_start/stop' lines to fd 2 per profile; not ours to show."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _allocations(nodes, allocation_tag) -> list[tuple[int, int]]:
    """(time, signed bytes) of every allocator event in the profiler's event tree."""
    out, stack = [], list(nodes)
    while stack:
        node = stack.pop()
        if node.tag == allocation_tag:
            out.append((node.start_time_ns, node.extra_fields.alloc_size))
        stack.extend(node.children)
    return out


def tensor_bytes(*groups) -> int:
    """Bytes of the distinct storages among tensors (tied weights are counted once)."""
    seen, total = set(), 0
    for group in groups:
        for t in group:
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in seen:
                seen.add(t.untyped_storage().data_ptr())
                total += t.untyped_storage().nbytes()
    return total
