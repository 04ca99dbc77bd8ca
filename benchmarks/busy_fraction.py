"""How much of a study's wall time its workers spent training: the busy fraction, from its ledger.

    python benchmarks/busy_fraction.py normlab-study --workers 2 [--wall-s 2279.4] [--out busy.json]

Each run's start and end are in the ledger. At every instant, min(runs in progress, workers) of the workers are
training (a stack of runs trains in one worker, so more runs than workers still counts as every worker busy). The
busy fraction is that count's integral over the wall time, divided by workers × wall. The wall is the study's own
span (its first start to its last end) unless `--wall-s` gives the whole job's (`make run`'s, validations and
report included, timed outside). What is left is every gap where a worker waited: between passes, for the judging
of a round, for the validation and the report.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def busy_seconds(spans: list[tuple[float, float]], workers: int) -> float:
    """∫ min(runs in progress, workers) dt over the union of the spans, in seconds."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    busy, running, last = 0.0, 0, None
    for t, step in events:
        if last is not None:
            busy += min(running, workers) * (t - last)
        running, last = running + step, t
    return busy


def busy_fraction(spans: list[tuple[float, float]], workers: int, wall_s: float | None = None) -> dict:
    """The busy fraction of `workers` over `wall_s` (default: the spans' own first start to last end)."""
    if not spans:
        return {"runs": 0, "workers": workers, "wall_s": wall_s or 0.0, "busy_s": 0.0, "busy_fraction": None}
    own = max(e for _, e in spans) - min(s for s, _ in spans)
    wall = wall_s if wall_s is not None else own
    busy = busy_seconds(spans, workers)
    return {"runs": len(spans), "workers": workers, "wall_s": round(wall, 1), "study_span_s": round(own, 1),
            "busy_s": round(busy, 1), "busy_fraction": round(busy / (workers * wall), 4) if wall > 0 else None}


def main(argv: list[str] | None = None) -> int:
    from normlab.study.ledger import Ledger

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("study", type=Path)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--wall-s", type=float, default=None, help="the whole job's wall time (default: the study's span)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    rows = [r for r in Ledger(args.study).rows() if r["started"] and r["finished"]]
    result = busy_fraction([(r["started"], r["finished"]) for r in rows], args.workers, args.wall_s)
    text = json.dumps(result, indent=1) + "\n"
    if args.out:
        args.out.write_text(text, "utf-8")
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
