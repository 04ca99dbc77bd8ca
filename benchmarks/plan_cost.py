"""What a preset's seed rounds can add, in runs and in `run_cost` units (the compute of a run's steps by depth,
width, context and batch: study/jobs.py), before anything trains.

    python benchmarks/plan_cost.py --out benchmarks/results/standard_plan_cost.json

For the preset as it is and, beside it, for the schedule it had before the power plan (rounds for C1, C10, C13 and
C15 only): the first look's runs, and the runs when every claim on the schedule takes its last round (the most
the study can train). A ratio of run_cost units is a ratio of compute on one machine, not a measured time.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from normlab.jsonsafe import write_json
from normlab.study.jobs import run_cost
from normlab.study.load import load_study

BEFORE_PLAN = ("C1", "C10", "C13", "C15")  # the claims on the standard preset's schedule before issue 42


def cost(spec, claims) -> dict:
    for cid in claims:
        while (more := spec.next_seeds(cid)) is not None:
            spec = spec.with_seeds({cid: more})
    runs = spec.runs
    return {"runs": len(runs), "run_cost": sum(run_cost(r.data) for r in runs)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="standard")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    spec = load_study(args.preset)
    rounds = spec.on_schedule()
    first = cost(load_study(args.preset), [])
    now = cost(load_study(args.preset), rounds)
    before = cost(load_study(args.preset), [c for c in BEFORE_PLAN if c in rounds])
    out = {"preset": args.preset, "round_claims": rounds, "first_look": first, "every_round": now,
           "every_round_before_the_plan": before,
           "every_round_over_before": now["run_cost"] / before["run_cost"],
           "what": "run_cost units (study/jobs.py), not a measured time"}
    print(write_json(out, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
