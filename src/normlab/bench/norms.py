"""Normalizer forward+backward: normlab's fused kernels against everything else.

For each (normalizer, shape, dtype) one round times, interleaved:

    normlab-fast       normlab's module with NORMLAB_NORM_IMPL=fast (the fused C++ kernel)
    normlab-reference  normlab's module, `reference_forward` (RMSNorm: plain torch ops; LayerNorm: torch's
                       native F.layer_norm kernel; fp32 statistics)
    eager-formula      both written as the same chain of plain torch ops (mean, rsqrt, multiply): the
                       algorithms compared with neither one's hand-fused kernel
    torch.nn           torch.nn.RMSNorm / torch.nn.LayerNorm, parameters in the input dtype
    torch.compile      torch.compile of that torch.nn module

One call is y = norm(x) then the gradients of (x, weight[, bias]) for a fixed dy.
LayerNorm has a bias (as torch.nn.LayerNorm by default), RMSNorm none (as torch.nn.RMSNorm).
A sample repeats a call for at least 20 ms; the median of 7 shuffled rounds is
reported (timing.interleaved_medians), with glibc told to keep freed memory
(timing.steady_allocator).
"""
from __future__ import annotations

import statistics

from typing import Callable

import torch

from normlab.bench.timing import interleaved_samples, spread_of
from normlab.nn import kernels
from normlab.nn.norms import make_norm

SHAPES = [(768, 128), (4096, 768), (8192, 4096)]
QUICK_SHAPES = [(64, 96)]
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
NORMS = ["rmsnorm", "layernorm"]
BASELINE = ("layernorm", "torch.nn")  # every ratio is against torch.nn.LayerNorm at the same shape and dtype


def fwd_bwd(forward: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, params, dy: torch.Tensor):
    """A zero-argument function: one forward and the gradients of x and the parameters."""
    inputs = (x, *params)

    def run():
        torch.autograd.grad(forward(x), inputs, dy)
    return run


def with_impl(impl: str, module: torch.nn.Module):
    def forward(x):
        kernels.set_norm_impl(impl)  # a global switch: set on every call, as calls interleave
        return module(x)
    return forward


def eager_formula(norm: str, module: torch.nn.Module, eps: float = 1e-5) -> Callable[[torch.Tensor], torch.Tensor]:
    """The normalizer's textbook formula as plain torch ops, in the input dtype (no fused kernel anywhere):
    LayerNorm (x − μ)/√(σ² + ε)·w + b, RMSNorm x/√(mean x² + ε)·w."""
    w, b = module.weight, getattr(module, "bias", None)

    def layer_norm(x):
        centred = x - x.mean(-1, keepdim=True)
        y = centred * torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + eps) * w
        return y if b is None else y + b

    def rms_norm(x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
    return layer_norm if norm == "layernorm" else rms_norm


def candidates(norm: str, d: int, dtype: torch.dtype, compile: bool) -> dict[str, tuple]:
    """impl -> (forward, parameters) for one normalizer of width d."""
    ours = make_norm(norm, d, bias=norm == "layernorm")
    theirs = (torch.nn.LayerNorm(d) if norm == "layernorm" else torch.nn.RMSNorm(d, eps=1e-5)).to(dtype)
    plain = make_norm(norm, d, bias=norm == "layernorm").to(dtype)
    out = {
        "normlab-fast": (with_impl("fast", ours), list(ours.parameters())),
        "normlab-reference": (ours.reference_forward, list(ours.parameters())),
        "eager-formula": (eager_formula(norm, plain), list(plain.parameters())),
        "torch.nn": (theirs, list(theirs.parameters())),
    }
    if compile:
        out["torch.compile"] = (torch.compile(theirs, dynamic=False), list(theirs.parameters()))
    return out


def bench_norms(quick: bool = False, rounds: int = 7, compile: bool = True, clock: str = "wall") -> list[dict]:
    """Rows {norm, impl, shape, dtype, median_s, ratio} (ratio: to torch.nn.LayerNorm)."""
    shapes = QUICK_SHAPES if quick else SHAPES
    rows = []
    before = kernels.get_norm_impl()
    try:
        for shape in shapes:
            for dtype_name in DTYPES:
                rows += bench_norm_group(shape, dtype_name, rounds, compile, clock)
    finally:
        kernels.set_norm_impl(before)
    return rows


def bench_norm_group(shape, dtype_name: str, rounds: int, compile: bool, clock: str = "wall") -> list[dict]:
    """All normalizers and implementations at one shape and dtype, interleaved."""
    dtype = DTYPES[dtype_name]
    if compile:
        torch.compiler.reset()  # fresh compile caches: dynamo's recompile limit (8) is per function
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=gen).to(dtype).requires_grad_()
    dy = torch.randn(shape, generator=gen).to(dtype)
    fns = {}
    for norm in NORMS:
        for impl, (forward, params) in candidates(norm, shape[-1], dtype, compile).items():
            fns[(norm, impl)] = fwd_bwd(forward, x, params, dy)
    samples = interleaved_samples(fns, rounds, clock=clock)
    base = statistics.median(samples[BASELINE])
    return [{"norm": norm, "impl": impl, "shape": list(shape), "dtype": dtype_name,
             "median_s": statistics.median(v), "ratio": statistics.median(v) / base, "samples_s": v,
             **spread_of(v, "time_s")}
            for (norm, impl), v in samples.items()]
