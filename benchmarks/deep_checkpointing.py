"""Very deep DeepNorm decoders on a CPU: training-step time and peak memory with and without
`train.activation_checkpointing`, side by side in one process.

    python benchmarks/deep_checkpointing.py [--depths 100 1000] [--steps 3] [--out benchmarks/results/deep_checkpointing.json]

The model is DeepNet's decoder (DeepNorm, α = (2L)^¼, β = (8L)^−¼), 64 wide, 2 heads, context 64, batch 8,
AdamW; one step = forward, backward, clip, update (as the trainer). Time: the median of `--steps` steps after
one warm-up step. Peak memory: normlab bench's accounting (parameters + AdamW state + the most one step holds
on top, from PyTorch's allocator events; oneDNN scratch space is not counted).
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch

import normlab
from normlab.bench.timing import peak_step_memory_mb, tensor_bytes
from normlab.device import cpu_model


def measure(depth: int, checkpointing: bool, steps: int) -> dict:
    torch.manual_seed(0)
    model = normlab.build_model(dict(vocab_size=65, block_size=64, n_layer=depth, n_head=2, d_model=64,
                                     scheme="deepnorm"))
    model.train()
    model.checkpoint_blocks = checkpointing
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randint(65, (8, 64), generator=g), torch.randint(65, (8, 64), generator=g)

    def step():
        _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()
    step()  # warm-up: AdamW state exists from here on
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    state = [t for s in opt.state.values() for t in s.values() if torch.is_tensor(t)]
    persistent = tensor_bytes(model.parameters(), model.buffers(), state)
    return {"depth": depth, "activation_checkpointing": checkpointing, "step_s": statistics.median(times),
            "peak_mem_mb": peak_step_memory_mb(step, torch.device("cpu"), persistent),
            "params_m": sum(p.numel() for p in model.parameters()) / 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    rows = []
    for depth in args.depths:
        for flag in (False, True):
            rows.append(measure(depth, flag, args.steps))
            r = rows[-1]
            print(f"L={depth:5d} checkpointing={str(flag):5s} step {r['step_s']:.2f} s  peak {r['peak_mem_mb']:.0f} MB"
                  f"  ({r['params_m']:.1f} M params)", flush=True)
    for depth in args.depths:
        off, on = (next(r for r in rows if r["depth"] == depth and r["activation_checkpointing"] is f)
                   for f in (False, True))
        print(f"L={depth}: checkpointing takes {on['step_s'] / off['step_s']:.2f}x the time and "
              f"{on['peak_mem_mb'] / off['peak_mem_mb']:.2f}x the peak memory")
    result = {"rows": rows, "torch": torch.__version__, "threads": torch.get_num_threads(), "cpu": cpu_model(),
              "platform": platform.platform()}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
