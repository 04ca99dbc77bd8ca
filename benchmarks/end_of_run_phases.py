"""Wall time of a run's training and of each phase after its last step, at depths 12, 100 and 1,000.

Each depth is the README's 1,000-layer DeepNorm command at that depth, trained through normlab's own trainer as
`normlab train` does (default settings: the layer-skip ablation fitted to `diagnostics.end_of_run_budget`):

    normlab train configs/nanogpt_cpu.toml --set model.scheme="deepnorm" --set model.n_layer=DEPTH
        --set model.d_model=64 --set train.steps=10 --set train.warmup_steps=0 --set train.activation_checkpointing=true
        --out DIR

Per depth it records: the wall time end to end (the trainer built and run, corpus and model included); the wall
time to the last step's metrics row (what the terminal shows as `step 10/10`: set-up, the step-0 evaluation,
the steps and the final evaluation); the trainer's own training time (status.json's `elapsed_s`, which the
budget is a share of); each phase's seconds (final evaluation, checkpoint, layer-skip ablation: the trainer's
phases, train/end_of_run.py); the ablation's plan (layers, val batches, status); and the ratio of the wall time to
the time to the last step (issue 37: at most 1.25 at 1,000 layers). Runs go one at a time on a quiet machine.

    python benchmarks/end_of_run_phases.py [--depths 12 100 1000] [--set KEY=VALUE ...]
        [--out benchmarks/results/end_of_run_phases_2core_cpu.json]

`--set` (TOML values, as `normlab train --set`) goes over the command's settings, e.g. a smoke check of the script:
`--depths 2 4 --set model.d_model=16 --set train.steps=2 --set train.eval_batches=2`.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

import normlab
from normlab.config import load_config
from normlab.device import cpu_model
from normlab.rundir import RunDir
from normlab.train.loop import Trainer

CONFIG = Path(__file__).resolve().parent.parent / "configs" / "nanogpt_cpu.toml"
COMMAND = ['model.scheme="deepnorm"', "model.d_model=64", "train.steps=10", "train.warmup_steps=0",
           "train.activation_checkpointing=true"]


def measure(depth: int, overrides: list[str], out: Path) -> dict[str, Any]:
    """One run at `depth`, timed end to end and phase by phase."""
    cfg = load_config(CONFIG, [*COMMAND, f"model.n_layer={depth}", *overrides])
    phases: dict[str, float] = {}
    last_row = [0.0]

    def on_phase(phase) -> None:
        if phase.ended:
            phases[phase.name] = phase.elapsed_s

    def on_log(row: dict) -> None:
        if row["step"] == cfg.train.steps:
            last_row[0] = time.perf_counter() - started

    started = time.perf_counter()
    result = Trainer(cfg, str(out), on_log=on_log, on_phase=on_phase).run()
    wall = time.perf_counter() - started
    run = RunDir(out)
    status = run.read_status()
    skip = run.read_json("layer_skip.json") if (out / "layer_skip.json").is_file() else {}
    return {"depth": depth, "status": result.status, "wall_s": wall, "to_last_step_s": last_row[0],
            "training_s": status.get("elapsed_s"), "phases_s": phases,
            "after_last_step_s": wall - last_row[0], "wall_over_to_last_step": wall / last_row[0],
            "layer_skip": {"status": status.get("layer_skip"), "plan": skip.get("plan"),
                           "layers": len(skip.get("sampled_layers", [])), "eval_batches": skip.get("eval_batches"),
                           "budget_s": skip.get("budget_s"), "seconds": skip.get("seconds")}}


def line(row: dict[str, Any]) -> str:
    phases = ", ".join(f"{name} {s:.1f} s" for name, s in row["phases_s"].items())
    return (f"L={row['depth']:5d}: {row['wall_s']:.1f} s end to end, {row['to_last_step_s']:.1f} s to the last step "
            f"(training {row['training_s']:.1f} s), then {row['after_last_step_s']:.1f} s ({phases}); "
            f"{row['wall_over_to_last_step']:.2f}x; ablation {row['layer_skip']['status']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", type=int, nargs="+", default=[12, 100, 1000])
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", default=None, help="JSON file to write (its folder must exist)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for depth in args.depths:
            rows.append(measure(depth, args.overrides, Path(tmp) / f"L{depth}"))
            print(line(rows[-1]), flush=True)
    result = {"what": __doc__.splitlines()[0], "command": ["normlab train", str(CONFIG.name), *COMMAND],
              "overrides": args.overrides, "rows": rows, "normlab": normlab.__version__, "torch": torch.__version__,
              "threads": torch.get_num_threads(), "cpu": cpu_model(), "platform": platform.platform(),
              "python": sys.version.split()[0]}
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
