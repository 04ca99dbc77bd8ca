"""What stands between a finished study and a wall-time limit in reference runs, measured from its own ledger.

    python benchmarks/cost_floor.py normlab-study --make-run benchmarks/results/standard/make_run_2core_cpu.json \\
        --step-limit benchmarks/results/step_limit_2core_cpu.json [--json out.json]
    python benchmarks/cost_floor.py frontier-study --step-limit benchmarks/results/step_limit_2core_cpu.json

Without `--make-run` (a study that is its own whole job, as the frontier's), the study's wall time is its ledger's
first start to last finish, and nothing runs after it.

Nothing is re-run. From the study's ledger: each run's training seconds (its worker's start to finish), its seed
and its cell. The unit is the reference run the study timed at its start (`study/reference.py`), so every figure
is machine-free. It answers four questions:

1. How much training did the study do, in reference runs, on the preset's seeds and on the seeds its rounds
   added?
2. What is the least wall time that training can take on the study's workers, packed perfectly, in reference
   runs and in minutes on the machine that ran it, and what did scheduling, judging and the plateau validations add
   on top (from `make run`'s measured total)?
3. What would the fastest stacked step measured (`benchmarks/step_limit.py`: one run's step alone against the
   same step in a stack of K) take off? A stack is the one speed-up the reference run does not share: a step
   made faster for every run also makes the reference run faster, and leaves a cost in reference runs as it was.
4. So how much of the study's training does a limit of N reference runs leave room for?
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

# The step's share of the reference run: 300 steps of the step benchmark's "alone" row against the reference run
STEPS_PER_REFERENCE_RUN = 300


def run_rows(study: Path) -> tuple[list[dict], dict]:
    """One row per run of the study (id, seed, cell, training seconds, whether it trained) and its meta."""
    from normlab.config import upgrade_stored
    from normlab.study.jobs import group_of, run_config
    from normlab.study.ledger import Ledger
    from normlab.study.state import study_ids
    from normlab.study.plan import plan_from_meta

    ledger = Ledger(study)
    meta = ledger.meta()
    spec = plan_from_meta(meta)
    ids = set(study_ids(spec, ledger, meta["study"]["run_ids"]))
    records = {r.id: r for r in ledger.records(ids)}
    raw = {rid: c for rid, c in ledger.configs() if rid in records}
    configs = {rid: r.flat for rid, r in records.items()}  # an older ledger's rows in today's spelling
    preset_seeds = set(spec.preset.seeds)
    rows = []
    for rid in sorted(records):
        flat = configs[rid]
        rows.append({"id": rid, "seed": flat["train.seed"], "seeds": "preset" if flat["train.seed"] in preset_seeds else "rounds",
                     "cell": (f"{flat['model.scheme']} L{flat['model.n_layer']} d{flat['model.d_model']} "
                              f"{flat['train.steps']} steps"),
                     "s": round(records[rid].elapsed_s or 0.0, 3), "did_not_train": bool(records[rid].did_not_train),
                     "stackable": group_of(run_config(upgrade_stored(raw[rid], ledger.schema))) is not None})
    finished = [r["finished"] for r in ledger.rows() if r["id"] in ids and r["finished"]]
    started = [r["started"] for r in ledger.rows() if r["id"] in ids and r["started"]]
    meta["wall_s"] = max(finished) - min(started) if finished and started else 0.0
    return rows, meta


def floor(rows: list[dict], reference_s: float, workers: int, make_run: dict, step_limit: dict,
          limit: float) -> dict:
    """Every figure of the answer, from the per-run rows and the two measured files (see the module's doc).
    `make_run`: the job's measured wall (`study_passes_s`, `validations_and_report_s`, `total_s`). The stack's gain
    applies to the runs that can train in a stack (a row's `stackable`; RoPE runs cannot: `ModelConfig.stackable`)."""
    def ref(seconds: float) -> float:
        return round(seconds / reference_s, 1)

    by_seeds: dict[str, dict] = defaultdict(lambda: {"runs": 0, "s": 0.0})
    cells: dict[str, dict] = defaultdict(lambda: {"runs": 0, "s": 0.0})
    for r in rows:
        for bucket in (by_seeds[r["seeds"]], cells[r["cell"]]):
            bucket["runs"] += 1
            bucket["s"] += r["s"]
    train_s = sum(r["s"] for r in rows)
    passes_s = sum(make_run["study_passes_s"])
    packed_s = train_s / workers
    steps = {str(row["K"]): row["step_ms_per_run"] for row in step_limit["rows"]}
    best_k = min((k for k in steps if k != "alone"), key=lambda k: steps[k])
    stack_gain = steps["alone"] / steps[best_k]
    stackable_s = sum(r["s"] for r in rows if r["stackable"])
    stacked_s = stackable_s / stack_gain + (train_s - stackable_s)  # every run that can stack, stacked at best_K
    # what the limit leaves for training, once the measured validations, report and scheduling are paid
    overhead_s = make_run["validations_and_report_s"] + (passes_s - packed_s)
    room_s = max(0.0, limit * reference_s - overhead_s) * workers
    return {
        "reference_run_s": reference_s, "workers": workers, "limit_reference_runs": limit,
        "runs": len(rows), "did_not_train": sum(r["did_not_train"] for r in rows),
        "training": {"s": round(train_s, 1), "reference_runs": ref(train_s)},
        "seeds": {k: {"runs": v["runs"], "s": round(v["s"], 1), "reference_runs": ref(v["s"])}
                  for k, v in sorted(by_seeds.items())},
        "cells": {k: {"runs": v["runs"], "s": round(v["s"], 1), "reference_runs": ref(v["s"]),
                      "per_run_reference_runs": round(v["s"] / v["runs"] / reference_s, 2)}
                  for k, v in sorted(cells.items(), key=lambda kv: -kv[1]["s"])},
        "wall": {"training_packed_on_workers_min": round(packed_s / 60, 1),
                 "make_run_min": round(make_run["total_s"] / 60, 1),
                 "make_run_reference_runs": ref(make_run["total_s"]),
                 "study_passes_reference_runs": ref(passes_s),
                 "training_packed_on_workers_reference_runs": ref(packed_s),
                 "scheduling_and_judging_reference_runs": ref(passes_s - packed_s),
                 "validations_and_report_reference_runs": ref(make_run["validations_and_report_s"])},
        "stacking": {"stackable_share": round(stackable_s / train_s, 2), "best_K": int(best_k), "step_ms_alone": round(steps["alone"], 2),
                     "step_ms_per_run_stacked": round(steps[best_k], 2), "gain": round(stack_gain, 2),
                     "training_packed_and_stacked_reference_runs": ref(stacked_s / workers),
                     "make_run_if_every_run_stacked_reference_runs": ref(stacked_s / workers + overhead_s)},
        "step_share_of_reference_run": round(STEPS_PER_REFERENCE_RUN * steps["alone"] / 1000 / reference_s, 2),
        "room": {"training_s_within_limit": round(room_s, 1),
                 "training_reference_runs_within_limit": ref(room_s),
                 "share_of_todays_training": round(room_s / train_s, 2),
                 "share_with_stacking": round(min(1.0, room_s / stacked_s), 2),
                 "preset_seeds_share": round(by_seeds["preset"]["s"] / train_s, 2),
                 "preset_seeds_packed_reference_runs": ref(by_seeds["preset"]["s"] / workers)},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("study", type=Path)
    ap.add_argument("--make-run", type=Path, default=None, help="make run's measured total (make_run_*.json); "
                    "without it, the study's own wall time and nothing after it")
    ap.add_argument("--step-limit", type=Path, required=True, help="benchmarks/step_limit.py's output")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--limit", type=float, default=100.0, help="the limit, in reference runs (default 100)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    rows, meta = run_rows(args.study)
    reference = (meta.get("reference_run") or {}).get("s")
    if not reference:
        sys.exit(f"{args.study} timed no reference run (NORMLAB_REFERENCE_RUN=off?): nothing to count in")
    if args.make_run:
        make_run = json.loads(args.make_run.read_text("utf-8"))
    else:
        make_run = {"study_passes_s": [round(meta["wall_s"], 1)], "validations_and_report_s": 0.0,
                    "total_s": round(meta["wall_s"], 1)}
    step_limit = json.loads(args.step_limit.read_text("utf-8"))
    out = floor(rows, reference, args.workers, make_run, step_limit, args.limit)
    out = {"what": "the study's measured training, wall and what a limit in reference runs leaves room for "
                   "(benchmarks/cost_floor.py; nothing re-run)",
           "study": meta["study"].get("preset"), "make_run": str(args.make_run) if args.make_run else None,
           "job": make_run, "step_limit": str(args.step_limit), **out, "per_run": rows}
    w, s = out["wall"], out["stacking"]
    print(f"training: {out['training']['reference_runs']} reference runs over {out['runs']} runs "
          f"({out['seeds']['preset']['reference_runs']} on the preset's seeds); packed on {args.workers} workers "
          f"{w['training_packed_on_workers_reference_runs']}, the study passes took {w['study_passes_reference_runs']}, "
          f"make run {w['make_run_reference_runs']}")
    print(f"every run stacked at K = {s['best_K']} ({s['gain']}x per step): make run about "
          f"{s['make_run_if_every_run_stacked_reference_runs']} reference runs; {args.limit:g} leave room for "
          f"{out['room']['share_of_todays_training']:.0%} of today's training "
          f"({out['room']['share_with_stacking']:.0%} stacked)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
