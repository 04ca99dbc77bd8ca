"""How much of a study's wall time its workers spent training: the busy fraction, from its ledger.

    python benchmarks/busy_fraction.py normlab-study --workers 2 [--wall-s 2279.4] [--out busy.json]

Each run's start and end are in the ledger. At every instant, min(runs in progress, workers) of the workers are
training (a stack of runs trains in one worker, so more runs than workers still counts as every worker busy). The
busy fraction is that count's integral over the wall time, divided by workers × wall. The wall is the study's own
span (its first start to its last end) unless `--wall-s` gives the whole job's (`make run`'s, validations and
report included, timed outside). `make run`'s plateau validations train too, outside the ledger: each run they
continue (`STUDY/plateau_validation/<id>/`) counts from its resumed step to its end, read from the run itself (its
status's end time, less the time its metrics say the continuation took). The figure is given with them
(`busy_fraction`) and from the ledger alone (`ledger_only`). What is left is the study's own measuring on a quiet
machine, when by design nothing trains (the reference run, the claims' timings and checks: the ledger's
`quiet_spans`, `quiet_fraction`), and every gap where a worker waited (`waiting_fraction`: between passes, for the
judging of a round, for the report).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _sweep(spans: list[tuple[float, float]], workers: int) -> tuple[float, float]:
    """(∫ min(runs in progress, workers) dt, the longest stretch with no run in progress) over the spans' union."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    busy, idle, running, last = 0.0, 0.0, 0, None
    for t, step in events:
        if last is not None:
            busy += min(running, workers) * (t - last)
            idle = max(idle, t - last) if running == 0 else idle
        running, last = running + step, t
    return busy, idle


def busy_fraction(spans: list[tuple[float, float]], workers: int, wall_s: float | None = None) -> dict:
    """The busy fraction of `workers` over `wall_s` (default: the spans' own first start to last end)."""
    if not spans:
        return {"runs": 0, "workers": workers, "wall_s": wall_s or 0.0, "busy_s": 0.0, "busy_fraction": None,
                "longest_idle_s": 0.0}
    own = max(e for _, e in spans) - min(s for s, _ in spans)
    wall = wall_s if wall_s is not None else own
    busy, idle = _sweep(spans, workers)
    return {"runs": len(spans), "workers": workers, "wall_s": round(wall, 1), "study_span_s": round(own, 1),
            "busy_s": round(busy, 1), "busy_fraction": round(busy / (workers * wall), 4) if wall > 0 else None,
            "longest_idle_s": round(idle, 1)}


def continued_span(run_dir: Path) -> tuple[float, float] | None:
    """When a validation's continued run trained: from its resumed step to its end. The end is its status's last
    update; the length is its metrics' elapsed time at the end less that at the step it resumed from (the
    metrics carry the run's whole curve, the steps before the resume included). None for a run that did not end."""
    try:
        status = json.loads((run_dir / "status.json").read_text("utf-8"))
        resumed = json.loads((run_dir / "run.json").read_text("utf-8")).get("resumed_from_step")
        lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text("utf-8").splitlines() if line]
    except (OSError, ValueError):
        return None
    if status.get("status") not in ("completed", "diverged") or resumed is None or not lines:
        return None
    at = {m["step"]: m["elapsed_s"] for m in lines if "elapsed_s" in m}
    before = max((s for s in at if s <= resumed), default=None)
    if before is None:
        return None
    took = lines[-1]["elapsed_s"] - at[before]
    return status["updated"] - took, status["updated"]


def validation_spans(folder: Path) -> list[tuple[float, float]]:
    """The spans of every run a plateau validation continued under `folder` (none when there is no folder)."""
    if not folder.is_dir():
        return []
    return [s for d in sorted(folder.iterdir()) if d.is_dir() and (s := continued_span(d)) is not None]


def study_busy(study: Path, workers: int, wall_s: float | None = None) -> dict:
    """A study's busy fraction, its plateau validations' continued runs counted, with the ledger's alone beside
    (`ledger_only`), and the rest of its wall split into measuring on a quiet machine and waiting."""
    from normlab.study.ledger import QUIET_SPANS, Ledger

    ledger = Ledger(study)
    spans = [(r["started"], r["finished"]) for r in ledger.rows() if r["started"] and r["finished"]]
    continued = validation_spans(study / "plateau_validation")
    result = busy_fraction(spans + continued, workers, wall_s)
    quiet_spans = [(start, end) for _, start, end in ledger.meta().get(QUIET_SPANS, [])]
    if wall_s is None and spans:  # the wall is the study's own span: only what the study measured inside it
        first, last = min(s for s, _ in spans + continued), max(e for _, e in spans + continued)
        quiet_spans = [(max(start, first), min(end, last)) for start, end in quiet_spans if end > first and start < last]
    quiet = sum(end - start for start, end in quiet_spans)
    wall = result["wall_s"]
    shares = {"quiet_s": round(quiet, 1), "quiet_fraction": round(quiet / wall, 4) if wall else None,
              "waiting_fraction": round(1 - result["busy_fraction"] - quiet / wall, 4)
              if wall and result["busy_fraction"] is not None else None}
    return {**result, **shares, "validation_runs": len(continued),
            "ledger_only": busy_fraction(spans, workers, wall_s)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("study", type=Path)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--wall-s", type=float, default=None, help="the whole job's wall time (default: the study's span)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    result = study_busy(args.study, args.workers, args.wall_s)
    text = json.dumps(result, indent=1) + "\n"
    if args.out:
        args.out.write_text(text, "utf-8")
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
