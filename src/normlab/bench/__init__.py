"""`normlab bench`: how fast are normlab's normalizers and training steps?

    norms   forward+backward of each normalizer x implementation, ratios to torch.nn.LayerNorm
    steps   training-step tokens/s and peak memory, ratios to a plain nanoGPT-style model

`run_bench` returns {"environment", "norms", "steps"}; `tables` renders it for the terminal.
"""
from __future__ import annotations

import platform

import torch

from normlab.bench.norms import bench_norms
from normlab.bench.report import tables
from normlab.bench.steps import STEP_NORMS, STEP_SCHEMES, bench_steps, combinations
from normlab.bench.timing import steady_allocator
from normlab.nn import kernels

__all__ = ["bench_norms", "bench_steps", "run_bench", "tables"]


def run_bench(quick: bool = False, rounds: int | None = None, steps_per_sample: int = 2, compile: bool = True,
              only: str | None = None, clock: str = "wall", **step_options) -> dict:
    """Both benchmarks; quick: one tiny shape, a tiny rmsnorm model, 2 rounds, no torch.compile."""
    allocator = not quick and steady_allocator()  # quick runs in test processes: leave malloc alone
    compile = compile and not quick
    rounds = rounds or (2 if quick else 7)
    if quick:
        step_options.setdefault("norms", ("rmsnorm",))
    result = {"environment": environment(allocator) | {"clock": clock}, "norms": [], "steps": [], "scheme_notes": []}
    if only in (None, "norms"):
        result["norms"] = bench_norms(quick=quick, rounds=rounds, compile=compile, clock=clock)
    if only in (None, "steps"):
        # the pairs skipped, and the settings filled in, where a scheme fixes them (the command prints them)
        result["scheme_notes"] = combinations(step_options.get("schemes", STEP_SCHEMES),
                                              step_options.get("norms", STEP_NORMS))[1]
        result["steps"] = bench_steps(quick=quick, rounds=rounds, steps_per_sample=steps_per_sample,
                                      compile=compile, clock=clock, **step_options)
    return result


def environment(steady_alloc: bool) -> dict:
    ext = kernels.extension()
    return {"torch": torch.__version__, "threads": torch.get_num_threads(), "machine": platform.machine(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "fused_kernels": "built" if ext is not None else f"unavailable ({kernels.unavailable_reason()})",
            "norm_impl_default": kernels.get_norm_impl(), "steady_allocator": steady_alloc}
