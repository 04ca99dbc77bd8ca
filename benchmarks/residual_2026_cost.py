"""What the residual stream of 2026 costs: each new scheme's training step against Pre-LN's, side by side in one
process, and its peak step memory.

    python benchmarks/residual_2026_cost.py [--rounds 15] [--threads 1] [--out benchmarks/results/residual_2026_cost_2core_cpu.json]

The model is the standard preset's (4 layers, 64 wide, 4 heads, context 64, batch 12, LayerNorm, GELU MLP,
AdamW as normlab bench builds it), once per scheme. One step = forward, backward, clip, update (normlab bench's
step, as the trainer's). The steps are timed in
interleaved, shuffled rounds (normlab.bench.timing): every round runs every scheme once, so a round's samples are
paired; the ratio to Pre-LN is the median over rounds of the paired ratios, which one slow round cannot move,
with its 10th–90th percentile range. The first two rounds are warm-up and not kept. Peak memory: normlab
bench's accounting (parameters + AdamW state + the most one step holds on top, from PyTorch's allocator events).
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics

import torch

import normlab
from normlab.bench.steps import adamw, make_step
from normlab.bench.timing import interleaved_samples, peak_step_memory_mb, steady_allocator, tensor_bytes
from normlab.device import cpu_model

CANDIDATES = {  # label: (scheme, scheme options)
    "pre": ("pre", {}),
    "hc (static, n=4)": ("hc", {}),
    "hc (dynamic, n=4)": ("hc", {"dynamic": True}),
    "mhc (n=4, 20 Sinkhorn)": ("mhc", {}),
    "attnres (full)": ("attnres", {}),
    "attnres (block of 2)": ("attnres", {"block_layers": 2}),
    "spannorm": ("spannorm", {}),
}
SHAPE = dict(vocab_size=65, block_size=64, n_layer=4, n_head=4, d_model=64)
BATCH = 12


def stepper(scheme: str, options: dict):
    """One training step of the scheme's model, and the bytes it keeps between steps."""
    torch.manual_seed(0)
    model = normlab.build_model(dict(SHAPE, scheme=scheme, scheme_options=options)).train()
    cpu = torch.device("cpu")
    opt = adamw(model, cpu)
    g = torch.Generator().manual_seed(0)
    batch = tuple(torch.randint(SHAPE["vocab_size"], (BATCH, SHAPE["block_size"]), generator=g) for _ in range(2))
    step = make_step(model, model, opt, batch, "fp32", cpu, None)  # normlab bench's step: the trainer's
    step()  # AdamW's state exists from here on
    state = [t for s in opt.state.values() for t in s.values() if torch.is_tensor(t)]
    return step, model, tensor_bytes(model.parameters(), model.buffers(), state)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    steady_allocator()
    steps = {label: stepper(*spec) for label, spec in CANDIDATES.items()}
    samples = interleaved_samples({label: s[0] for label, s in steps.items()}, args.rounds, warmup=2)
    rows = []
    for label, (step, model, persistent) in steps.items():
        ratios = [a / b for a, b in zip(samples[label], samples["pre"])]
        rows.append({"scheme": label, "step_ms": 1000 * statistics.median(samples[label]),
                     "ratio_to_pre": statistics.median(ratios),
                     "ratio_p10": quantile(ratios, 0.1), "ratio_p90": quantile(ratios, 0.9),
                     "peak_mem_mb": peak_step_memory_mb(step, torch.device("cpu"), persistent),
                     "params": sum(p.numel() for p in model.parameters())})
    pre_mem = rows[0]["peak_mem_mb"]
    for row in rows:
        row["memory_ratio_to_pre"] = row["peak_mem_mb"] / pre_mem if pre_mem else None
    record = {"what": __doc__.splitlines()[0], "shape": {**SHAPE, "batch": BATCH}, "rounds": args.rounds,
              "threads": args.threads, "cpu": cpu_model(), "torch": torch.__version__,
              "python": platform.python_version(), "rows": rows}
    text = json.dumps(record, indent=2)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
