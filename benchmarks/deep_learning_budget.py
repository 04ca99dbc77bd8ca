"""At what budget or learning rate does the `deep` preset's 1,000-layer DeepNorm decoder leave the unigram plateau?

Trains the `deep` preset's deepest C8 run (QUICK_BASE + C8's knob `base`: DeepNorm, 1,000 layers, 64 wide,
2 heads, batch 8, Xiong et al.'s init, cosine to 0, the preset's warmup 50) over a grid of learning rates × step
budgets, each run through normlab's own trainer (`normlab.train.train`, a run directory per run), and reports per
run: lr, warmup, steps, the val-loss curve (metrics.jsonl), the final val loss, its gap to the corpus's unigram
cross-entropy (status.json's `unigram_ce`, 3.3473 nats on tiny Shakespeare), whether it learned (final val loss
more than `train.untrained_margin` = 0.1 nats below the plateau: normlab's `failed_to_train` rule), whether it
diverged, and seconds per training step (median over logged rows of batch·context / tokens_per_s: training steps
only, evals excluded; with `--jobs` > 1 the runs share the device, so this is the step time under that sharing).

    python benchmarks/deep_learning_budget.py --lrs 1e-3 3e-3 1e-2 --steps 300 [--warmup 50 | --warmup-frac 0.1]
        [--schemes deepnorm] [--depth 1000] [--seeds 0] [--device cuda] [--jobs 3] [--deadline-s 500]
        [--set train.activation_checkpointing=false ...] [--runs-dir /tmp/dlb] [--out results.json [--append]]

`--set KEY=VALUE` (TOML values, as `normlab train --set`) is applied last, over the grid's own fields. By default
each run writes one checkpoint, at its last step (`train.ckpt_interval` = steps; checkpoints never change the
math). `--deadline-s`: runs still going then are stopped and reported with the curve they reached
(`status` = "stopped at the deadline"); the JSON is rewritten after every finished run.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PLATEAU = 3.3473  # tiny Shakespeare's unigram cross-entropy, char level; a run's status.json gives its own


def run_config(spec: dict[str, Any]):
    """The `deep` preset's C8 config for this grid point, built as the study builds it, then `--set` on top."""
    from normlab.config import apply_override, validate_config
    from normlab.study.claims import CLAIMS
    from normlab.study.runs import build_config
    from normlab.study.presets import PRESETS

    preset = PRESETS[spec["preset"]]
    overrides = {**CLAIMS.get("C8").knobs(preset).base, "model.scheme": spec["scheme"], "model.n_layer": spec["depth"],
                 "train.lr": spec["lr"], "train.warmup_steps": spec["warmup"], "train.steps": spec["steps"],
                 "train.ckpt_interval": spec["steps"], "train.device": spec["device"]}
    raw = build_config(preset, overrides, spec["seed"]).to_dict()
    for item in spec["sets"]:
        apply_override(raw, item)
    return validate_config(raw)


def worker(spec_json: str) -> int:
    """One run, in its own process (so a deadline can stop it); writes DIR.worker.json beside the run dir."""
    import torch

    from normlab.train import train

    spec = json.loads(spec_json)
    cfg = run_config(spec)
    t0 = time.perf_counter()
    result = train(cfg, spec["dir"], fresh=True)
    info = {"wall_s": time.perf_counter() - t0, "status": result.status, "outcome": result.outcome,
            "reason": result.reason, "config": cfg.to_dict()}
    if torch.cuda.is_available() and cfg.train.device.startswith("cuda"):
        info["peak_cuda_mem_mb"] = torch.cuda.max_memory_allocated() / 2**20
        info["gpu"] = torch.cuda.get_device_name()
    Path(spec["dir"] + ".worker.json").write_text(json.dumps(info, indent=1))
    return 0


def summarize(spec: dict[str, Any], stopped: bool, plateau_default: float) -> dict[str, Any]:
    """The run's record, from its run directory (metrics.jsonl, status.json) and the worker's note."""
    d = Path(spec["dir"])
    rows = []
    if (d / "metrics.jsonl").is_file():
        for line in (d / "metrics.jsonl").read_text("utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
    status = json.loads((d / "status.json").read_text("utf-8")) if (d / "status.json").is_file() else {}
    note_path = Path(spec["dir"] + ".worker.json")
    note = json.loads(note_path.read_text("utf-8")) if note_path.is_file() else {}
    cfg = note.get("config") or {}
    tokens = spec.get("tokens_per_step") or 8 * 64
    step_s = [tokens / r["tokens_per_s"] for r in rows if r.get("tokens_per_s")]
    curve = [[r["step"], r["val_loss"]] for r in rows if r.get("val_loss") is not None]
    plateau = status.get("unigram_ce", plateau_default)
    margin = cfg.get("train", {}).get("untrained_margin", 0.1)
    final = curve[-1][1] if curve else None
    reached = max((r["step"] for r in rows), default=0)
    diverged = status.get("status") == "diverged"
    finished = status.get("status") == "completed"
    # untrained_margin = "off": never judged, as the trainer does (every finished run counts as having learned)
    learned = bool(finished and final is not None and (margin == "off" or final < plateau - margin))
    return {
        "scheme": spec["scheme"], "depth": spec["depth"], "seed": spec["seed"], "lr": spec["lr"],
        "warmup": spec["warmup"], "steps": spec["steps"], "sets": spec["sets"],
        "status": "stopped at the deadline" if stopped else status.get("status", "no status"),
        "outcome": status.get("outcome"), "reason": status.get("reason") or note.get("reason"),
        "step_reached": reached, "diverged": diverged,
        "first_val_loss": curve[0][1] if curve else None, "final_val_loss": final,
        "min_val_loss": min((v for _, v in curve), default=None),
        "plateau": plateau, "gap_to_plateau": None if final is None else final - plateau, "margin": margin,
        "learned": learned, "val_curve": curve,
        "grad_norm_last": next((r["grad_norm"] for r in reversed(rows) if r.get("grad_norm") is not None), None),
        "s_per_step": statistics.median(step_s) if step_s else None,
        "wall_s": note.get("wall_s"), "peak_cuda_mem_mb": note.get("peak_cuda_mem_mb"), "gpu": note.get("gpu"),
    }


def environment(args) -> dict[str, Any]:
    import torch

    import normlab

    commit = os.environ.get("NORMLAB_COMMIT")
    if not commit:
        try:
            commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                    cwd=Path(__file__).parent, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            commit = None
    return {"torch": torch.__version__, "normlab": getattr(normlab, "__version__", None), "normlab_commit": commit,
            "python": platform.python_version(), "platform": platform.platform(),
            "cuda_device": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
            "jobs": args.jobs, "argv": sys.argv[1:]}


def print_table(records: list[dict[str, Any]]) -> None:
    print(f"{'scheme':9s} {'lr':>7s} {'warmup':>6s} {'steps':>6s} {'reached':>7s} {'first':>7s} {'final':>7s} "
          f"{'min':>7s} {'gap':>7s} {'learned':>7s} {'s/step':>7s}  status")
    for r in records:
        f = lambda v, p=3: "—" if v is None else f"{v:.{p}f}"  # noqa: E731
        print(f"{r['scheme']:9s} {r['lr']:7.0e} {r['warmup']:6d} {r['steps']:6d} {r['step_reached']:7d} "
              f"{f(r['first_val_loss'])} {f(r['final_val_loss'])} {f(r['min_val_loss'])} "
              f"{'—' if r['gap_to_plateau'] is None else format(r['gap_to_plateau'], '+.3f'):>7s} "
              f"{'yes' if r['learned'] else 'no':>7s} {f(r['s_per_step'], 3):>7s}  {r['status']}", flush=True)


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--_worker":
        return worker(sys.argv[2])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lrs", type=float, nargs="+", default=[1e-3])
    ap.add_argument("--steps", type=int, nargs="+", default=[300])
    warm = ap.add_mutually_exclusive_group()
    warm.add_argument("--warmup", type=int, default=None, help="warmup steps (default: the preset's, 50)")
    warm.add_argument("--warmup-frac", type=float, default=None, help="warmup = round(frac · steps)")
    ap.add_argument("--schemes", nargs="+", default=["deepnorm"])
    ap.add_argument("--depth", type=int, default=1000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--preset", default="deep")
    ap.add_argument("--device", default="auto", help="cuda, cpu or auto (train.device)")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--jobs", type=int, default=1, help="runs at a time, each its own process")
    ap.add_argument("--deadline-s", type=float, default=None, help="stop runs still going after this many seconds")
    ap.add_argument("--runs-dir", default="runs/deep_learning_budget")
    ap.add_argument("--plateau", type=float, default=PLATEAU, help="used only where a run's status.json has none")
    ap.add_argument("--out", default=None, help="results JSON (e.g. benchmarks/results/deep_learning_budget.json)")
    ap.add_argument("--append", action="store_true", help="add to the runs already in --out")
    args = ap.parse_args()

    from normlab.study.presets import PRESETS

    preset = PRESETS[args.preset]
    specs = []
    for scheme in args.schemes:
        for steps in args.steps:
            warmup = (args.warmup if args.warmup is not None else
                      round(args.warmup_frac * steps) if args.warmup_frac is not None else preset.warmup)
            for lr in args.lrs:
                for seed in args.seeds:
                    name = f"{scheme}-L{args.depth}-lr{lr:g}-w{warmup}-s{steps}-seed{seed}"
                    specs.append({"preset": args.preset, "scheme": scheme, "depth": args.depth, "lr": lr,
                                  "warmup": warmup, "steps": steps, "seed": seed, "device": args.device,
                                  "sets": args.sets, "dir": str(Path(args.runs_dir, name).resolve())})
    for s in specs:  # fail here, not in a worker, on a bad --set
        cfg = run_config(s)
        s["tokens_per_step"] = cfg.train.batch_size * cfg.model.block_size
    Path(args.runs_dir).mkdir(parents=True, exist_ok=True)

    previous = []
    if args.append and args.out and Path(args.out).is_file():
        previous = json.loads(Path(args.out).read_text("utf-8")).get("runs", [])
    env = environment(args)
    records: list[dict[str, Any]] = []

    def save() -> None:
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps({"environment": env, "runs": previous + records}, indent=1))

    t0, pending, running = time.perf_counter(), list(specs), []
    while pending or running:
        while pending and len(running) < args.jobs:
            s = pending.pop(0)
            log = open(s["dir"] + ".log", "w")
            proc = subprocess.Popen([sys.executable, __file__, "--_worker", json.dumps(s)], stdout=log,
                                    stderr=subprocess.STDOUT)
            running.append((s, proc, log))
            print(f"[{time.perf_counter() - t0:6.0f} s] started {Path(s['dir']).name}", flush=True)
        time.sleep(2)
        late = args.deadline_s is not None and time.perf_counter() - t0 > args.deadline_s
        for item in list(running):
            s, proc, log = item
            if proc.poll() is None and not late:
                continue
            stopped = proc.poll() is None
            if stopped:
                proc.kill()
                proc.wait()
            log.close()
            running.remove(item)
            if proc.returncode not in (0, None) and not stopped:
                print(Path(s["dir"] + ".log").read_text()[-3000:], flush=True)
            records.append(summarize(s, stopped, args.plateau))
            r = records[-1]
            print(f"[{time.perf_counter() - t0:6.0f} s] {Path(s['dir']).name}: {r['status']}, step "
                  f"{r['step_reached']}, final val {r['final_val_loss']}, learned {r['learned']}", flush=True)
            save()
        if late:
            for s in pending:
                print(f"not started (deadline): {Path(s['dir']).name}")
            pending = []
    print()
    print_table(records)
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
