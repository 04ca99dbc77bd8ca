"""Measurements that are not training runs: norm and step timings, training memory, causality.

Timings interleave the candidates in one process (A, B, A, B, ...) and report medians, so
a slow moment of the machine hits every candidate alike.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable

import torch
from torch import nn

import normlab
from normlab.nn.config import ModelConfig
from normlab.nn.norms import make_norm
from normlab.train.optim import build_optimizer
from normlab.config import TrainConfig


def interleaved_medians(candidates: dict[str, Callable[[], None]], repeats: int, warmup: int = 2) -> dict[str, float]:
    """Median seconds per call of each candidate, timed in round-robin order."""
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {k: [] for k in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def _norm_fwd_bwd(module: nn.Module, shape: tuple[int, int], dtype: torch.dtype) -> Callable[[], None]:
    x = torch.randn(*shape, dtype=dtype, requires_grad=True, generator=torch.Generator().manual_seed(0))
    grad = torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(1))
    module = module.to(dtype)

    def step():
        x.grad = None
        module(x).backward(grad)
    return step


def norm_candidates(d: int) -> dict[tuple[str, str], nn.Module]:
    """(norm, impl) -> module: normlab's default path and torch.nn's, for LayerNorm and RMSNorm."""
    return {("layernorm", "normlab"): make_norm("layernorm", d), ("rmsnorm", "normlab"): make_norm("rmsnorm", d),
            ("layernorm", "torch.nn"): nn.LayerNorm(d, bias=False), ("rmsnorm", "torch.nn"): nn.RMSNorm(d)}


def time_norms(shapes: list[tuple[int, int]], dtypes: list[str], repeats: int) -> list[dict]:
    """Forward+backward median seconds of each normalizer × implementation × shape × dtype."""
    rows = []
    for shape in shapes:
        for dtype_name in dtypes:
            dtype = getattr(torch, {"fp32": "float32", "bf16": "bfloat16"}[dtype_name])
            fns = {key: _norm_fwd_bwd(m, shape, dtype) for key, m in norm_candidates(shape[-1]).items()}
            medians = interleaved_medians({f"{n}|{i}": f for (n, i), f in fns.items()}, repeats)
            for key, median in medians.items():
                norm, impl = key.split("|")
                rows.append({"norm": norm, "impl": impl, "shape": list(shape), "dtype": dtype_name, "median_s": median})
    return rows


def _train_step(cfg: ModelConfig, batch_size: int) -> Callable[[], None]:
    torch.manual_seed(0)
    model = normlab.build_model(cfg)
    opt = build_optimizer(model, TrainConfig(), "cpu")
    x = torch.randint(cfg.vocab_size, (batch_size, cfg.block_size), generator=torch.Generator().manual_seed(0))

    def step():
        _, loss = model(x, x)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def time_train_steps(configs: dict[str, ModelConfig], batch_size: int, repeats: int) -> dict[str, float]:
    """Tokens per second of a full training step (forward, backward, AdamW) for each config, interleaved."""
    medians = interleaved_medians({k: _train_step(c, batch_size) for k, c in configs.items()}, repeats)
    return {k: batch_size * configs[k].block_size / s for k, s in medians.items()}


def training_memory(cfg: ModelConfig, batch_size: int) -> dict[str, float]:
    """Bytes a training step holds at its peak: parameters, gradients, AdamW states, and the activations
    autograd saves for backward (counted once per storage). On CUDA, the allocator's peak is given too."""
    torch.manual_seed(0)
    model = normlab.build_model(cfg)
    x = torch.randint(cfg.vocab_size, (batch_size, cfg.block_size), generator=torch.Generator().manual_seed(0))
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor):
        storage = t.untyped_storage()
        saved[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        _, loss = model(x, x)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    param_ids = {p.untyped_storage().data_ptr() for p in model.parameters()}
    activations = sum(n for ptr, n in saved.items() if ptr not in param_ids)
    loss.backward()
    total = params * 4 + activations  # weights + grads + AdamW's two moments, + saved activations
    return {"activations_mb": activations / 2**20, "params_mb": params / 2**20, "peak_mb": total / 2**20}


@torch.no_grad()
def causality(scheme: str, norm: str = "layernorm") -> dict[str, float]:
    """Largest change of logits at positions < t when every token from t on is replaced, over several t."""
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=31, block_size=16, n_layer=3, n_head=2, d_model=32, scheme=scheme, norm=norm)
    model = normlab.build_model(cfg).eval()
    g = torch.Generator().manual_seed(0)
    x = torch.randint(31, (2, 16), generator=g)
    base, _ = model(x)
    leak, reach = 0.0, float("inf")
    for t in (1, 5, 9, 15):
        y = x.clone()
        y[:, t:] = torch.randint(31, (2, 16 - t), generator=g)
        out, _ = model(y)
        leak = max(leak, (out[:, :t] - base[:, :t]).abs().max().item())
        reach = min(reach, (out[:, t] - base[:, t]).abs().max().item())
    return {"max_change_before_t": leak, "min_change_at_t": reach}
