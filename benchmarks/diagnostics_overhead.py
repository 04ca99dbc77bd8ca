"""What the per-layer diagnostics cost at their default interval, side by side with them off.

Two trainers with the same config (configs/nanogpt_cpu.toml by default) but for
diagnostics.interval, in one process; chunks of `interval` training steps alternate
between them (so each "on" chunk holds exactly one measured step), and the median
chunk times are compared.

    python benchmarks/diagnostics_overhead.py [--config configs/nanogpt_cpu.toml] [--chunks 8] [--json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from normlab.config import DiagnosticsConfig, load_config
from normlab.train.loop import Trainer
from normlab.train.optim import learning_rate

REPO = Path(__file__).resolve().parents[1]


def chunk_time(trainer: Trainer, steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        trainer.train_step(learning_rate(trainer.step, trainer.tc))
        trainer.step += 1
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO / "configs" / "nanogpt_cpu.toml"))
    parser.add_argument("--chunks", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    interval = DiagnosticsConfig().interval
    with tempfile.TemporaryDirectory() as tmp:
        trainers = {}
        for name, every in (("off", 0), ("on", interval)):
            cfg = load_config(args.config, [f"diagnostics.interval={every}", "train.device=cpu"])
            trainers[name] = Trainer(cfg, Path(tmp) / name)
            trainers[name]._prepare_dir()
            trainers[name]._build()
        chunk_time(trainers["off"], 20), chunk_time(trainers["on"], 20)  # warm up allocators
        for t in trainers.values():
            t.step = 0
        times = {"off": [], "on": []}
        for _ in range(args.chunks):
            for name in ("off", "on"):
                times[name].append(chunk_time(trainers[name], interval))
    off, on = statistics.median(times["off"]), statistics.median(times["on"])
    result = {"interval": interval, "chunks": args.chunks, "median_chunk_s_off": off, "median_chunk_s_on": on,
              "step_ms_off": 1000 * off / interval, "overhead": on / off - 1}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"diagnostics every {interval} steps: {1000 * off / interval:.2f} ms/step off, "
              f"{1000 * on / interval:.2f} ms/step on → overhead {100 * (on / off - 1):+.2f} % "
              f"(median of {args.chunks} interleaved chunks of {interval} steps)")


if __name__ == "__main__":
    main()
