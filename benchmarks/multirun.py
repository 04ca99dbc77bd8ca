"""Stacked vs one-after-another: K same-shape runs trained as one `StackedGPT` or as K separate GPTs.

One training step of all K members (forward, backward, per-member clip, AdamW update), timed in
interleaved rounds in this one process: stacked, sequential, stacked, sequential, ... The
sequential side is exactly what a single run does (GPT + clip_grad_norm_ + torch AdamW); the
stacked side is what `GroupTrainer` does (StackedGPT + per-member clip + StackedAdamW). Also
measures this machine's fp32 matmul peak (a 1024² matmul), and reports achieved GFLOP/s of the
model's matmuls (6·N·P, attention excluded) for each side. Run it on an otherwise idle machine.

    python benchmarks/multirun.py [--ks 2,8,32] [--shapes quick,nanogpt] [--threads 1,2] [--rounds 5]
    python benchmarks/multirun.py --shapes frontier --ks 8,16,32 --threads 1 > multirun_frontier_2core_cpu.json
        (the frontier's RoPE runs, which stack since 2026-11-29)
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import time

import torch

from normlab.bench.timing import steady_allocator
from normlab.nn.config import ModelConfig
from normlab.nn.model import GPT
from normlab.nn.stacked import StackedGPT
from normlab.config import TrainConfig
from normlab.train.optim import StackedAdamW, build_optimizer, clip_stacked_grads

SHAPES = {  # (model fields, batch size): the quick preset's base run, nanoGPT's CPU recipe, the frontier's base
    "quick": (dict(block_size=64, n_layer=4, n_head=4, d_model=64), 12),
    "nanogpt": (dict(block_size=64, n_layer=4, n_head=4, d_model=128, bias=False), 12),
    "frontier": (dict(block_size=64, n_layer=4, n_head=4, d_model=64, positions="rope", mlp="swiglu", init="gpt2"), 12),
}
VOCAB = 65


def members(shape: str, k: int) -> tuple[list[GPT], int]:
    fields, batch = SHAPES[shape]
    out = []
    for seed in range(k):
        torch.manual_seed(seed)
        out.append(GPT(ModelConfig(vocab_size=VOCAB, **fields)))
    return out, batch


def sequential_step(models, opts, x, y) -> None:
    for k, (m, opt) in enumerate(zip(models, opts)):
        _, loss = m(x[k], y[k])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)


def stacked_step(stack: StackedGPT, opt: StackedAdamW, x, y) -> None:
    _, losses = stack(x, y)
    losses.sum().backward()
    K = x.shape[0]
    clip_stacked_grads([s for s, _ in stack.pairs()], [1.0] * K)
    opt.step([1e-3] * K, [0.1] * K)
    stack.zero_grad(set_to_none=True)


def matmul_flops(model: GPT, tokens: int) -> float:
    """6·N·P over the matmul weights (embeddings are gathers, not matmuls; attention's QKᵀ, AV left out)."""
    p = sum(w.numel() for n, w in model.named_parameters() if w.dim() == 2 and not n.startswith(("wte", "wpe")))
    p += model.lm_head.weight.numel() if model.cfg.tie_weights else 0
    return 6.0 * tokens * p


def matmul_peak(rounds: int = 5) -> float:
    a = torch.randn(1024, 1024)
    a @ a
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(5):
            a @ a
        times.append((time.perf_counter() - t) / 5)
    return 2 * 1024 ** 3 / min(times) / 1e9


def bench(shape: str, k: int, rounds: int) -> dict:
    seq_models, batch = members(shape, k)
    stack_models, _ = members(shape, k)
    seq_opts = [build_optimizer(m, TrainConfig(), "cpu") for m in seq_models]  # a single run's AdamW
    stack = StackedGPT(stack_models)
    opt = StackedAdamW(stack.pairs(), 0.9, 0.99)
    T = SHAPES[shape][0]["block_size"]
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randint(VOCAB, (k, batch, T), generator=g) for _ in range(2))
    sides = {"stacked": lambda: stacked_step(stack, opt, x, y), "sequential": lambda: sequential_step(seq_models, seq_opts, x, y)}
    for fn in sides.values():  # warm-up: allocator, kernels, optimizer state
        fn()
        fn()
    times: dict[str, list[float]] = {name: [] for name in sides}
    steps = max(1, math.ceil(8 / k))
    for _ in range(rounds):
        for name, fn in sides.items():
            t = time.perf_counter()
            for _ in range(steps):
                fn()
            times[name].append((time.perf_counter() - t) / steps)
    tokens = k * batch * T
    flops = matmul_flops(seq_models[0], batch * T) * k
    out = {"shape": shape, "K": k, "tokens_per_step": tokens}
    for name, ts in times.items():
        median = statistics.median(ts)
        out[name] = {"step_ms": median * 1e3, "tokens_per_s": tokens / median, "matmul_gflops": flops / median / 1e9}
    out["speedup"] = out["sequential"]["step_ms"] / out["stacked"]["step_ms"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", default="2,8,32")
    parser.add_argument("--shapes", default="quick,nanogpt")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    steady_allocator()
    report = []
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        peak = matmul_peak()
        for shape in args.shapes.split(","):
            for k in (int(v) for v in args.ks.split(",")):
                row = {"threads": threads, "matmul_peak_gflops": peak, **bench(shape, k, args.rounds)}
                report.append(row)
                print(f"{threads} thr  {shape:8s} K={k:<3d} stacked {row['stacked']['step_ms']:8.1f} ms "
                      f"({row['stacked']['matmul_gflops']:5.1f} GFLOP/s)  sequential {row['sequential']['step_ms']:8.1f} ms "
                      f"({row['sequential']['matmul_gflops']:5.1f} GFLOP/s)  ratio {row['speedup']:.2f}x  "
                      f"[peak {peak:.0f} GFLOP/s]", flush=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
