"""Why normlab runs short bf16 attention in fp32 on CPU (nn/attention.py, CPU_BF16_MIN_WORK).

Causal SDPA forward+backward, bf16 inputs, timed interleaved in one process:
native bf16 vs the same inputs cast to fp32 (what `causal_attention` does below the threshold).

    python benchmarks/bf16_attention.py [--rounds 7] [--threads N]
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from normlab.bench.timing import interleaved_medians

SHAPES = [(12, 4, 64, 32), (8, 8, 128, 64), (8, 4, 192, 64), (16, 6, 256, 64), (4, 4, 1024, 64)]  # (B, nh, T, hs)


def fwd_bwd(shape, upcast: bool):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(shape, generator=g).bfloat16().requires_grad_() for _ in range(3))
    dy = torch.randn(shape, generator=g).bfloat16()

    def step():
        for t in (q, k, v):
            t.grad = None
        args = (q.float(), k.float(), v.float()) if upcast else (q, k, v)
        F.scaled_dot_product_attention(*args, is_causal=True).to(torch.bfloat16).backward(dy)
    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; causal SDPA fwd+bwd, median ms")
    for shape in SHAPES:
        t = interleaved_medians({"bf16": fwd_bwd(shape, False), "fp32": fwd_bwd(shape, True)}, args.rounds)
        print(f"(B, nh, T, hs) = {shape}: bf16 {1000 * t['bf16']:.2f}, via fp32 {1000 * t['fp32']:.2f} "
              f"→ bf16/fp32 {t['bf16'] / t['fp32']:.2f}×  (T·hs = {shape[2] * shape[3]})")


if __name__ == "__main__":
    main()
