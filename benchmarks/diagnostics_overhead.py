"""What the per-layer diagnostics cost at their default interval, side by side with them off.

Two measurements, in one process, on the config's model (configs/nanogpt_cpu.toml by default):

1. per step: one trainer alternates a measured step and an unmeasured one, `--pairs` times;
   the amortized overhead is (median measured − median unmeasured) / (interval × median unmeasured);
2. per chunk (a cross-check): two trainers, diagnostics on and off, alternate chunks of
   `interval` steps (each "on" chunk holds one measured step); the median chunk times are compared.

    python benchmarks/diagnostics_overhead.py [--config configs/nanogpt_cpu.toml] [--set key=value] [--json]
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


def paired_steps(trainer: Trainer, interval: int, pairs: int) -> tuple[float, float]:
    """Median seconds of a measured step and of an unmeasured one, alternating."""
    measured, plain = [], []
    for i in range(pairs):
        for due, out in ((True, measured), (False, plain)):
            trainer.step = interval * (i + 1) if due else interval * (i + 1) + 1
            start = time.perf_counter()
            trainer.train_step(learning_rate(trainer.step, trainer.tc))
            out.append(time.perf_counter() - start)
    return statistics.median(measured), statistics.median(plain)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO / "configs" / "nanogpt_cpu.toml"))
    parser.add_argument("--chunks", type=int, default=8)
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--set", action="append", default=[], help="config override, e.g. train.precision=bf16")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    interval = DiagnosticsConfig().interval
    with tempfile.TemporaryDirectory() as tmp:
        trainers = {}
        for name, every in (("off", "off"), ("on", interval)):
            cfg = load_config(args.config, [*args.set, f"diagnostics.interval={every}", "train.device=cpu"])
            trainers[name] = Trainer(cfg, Path(tmp) / name)
            trainers[name].lifecycle.run_dir.create()  # as `normlab train` claims it, lock aside
            trainers[name].start()
        chunk_time(trainers["off"], 20), chunk_time(trainers["on"], 20)  # warm up allocators
        for t in trainers.values():
            t.step = 0
        times = {"off": [], "on": []}
        for _ in range(args.chunks):
            for name in ("off", "on"):
                times[name].append(chunk_time(trainers[name], interval))
            per_step = paired_steps(trainers["on"], interval, args.pairs)
    off, on = statistics.median(times["off"]), statistics.median(times["on"])
    measured, plain = per_step
    result = {"interval": interval, "step_ms": 1000 * plain, "measured_step_ms": 1000 * measured,
              "overhead_per_step": (measured - plain) / (interval * plain), "pairs": args.pairs,
              "chunks": args.chunks, "median_chunk_s_off": off, "median_chunk_s_on": on,
              "overhead_per_chunk": on / off - 1}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"a measured step takes {1000 * measured:.1f} ms, a plain one {1000 * plain:.1f} ms: every "
              f"{interval} steps that is {100 * result['overhead_per_step']:+.2f} % (median of {args.pairs} pairs); "
              f"chunks of {interval} steps on/off: {100 * result['overhead_per_chunk']:+.2f} % "
              f"(median of {args.chunks})")


if __name__ == "__main__":
    main()
