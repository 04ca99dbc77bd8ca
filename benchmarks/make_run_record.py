"""`make run`'s measured record: its five commands timed from outside, the study's runs and how busy its workers were.

    python benchmarks/make_run_record.py --run --out benchmarks/results/standard/make_run_2core_cpu.json
    python benchmarks/make_run_record.py --times times.log --study DIR --out make_run.json

With `--run` it runs `make run`'s five commands itself (the study, the plateau validation, the study again, the
validation again, the report: the Makefile's `run` target, from this checkout with this Python), each start and end
by the wall clock, into `--study` (default `normlab-study`); the times go to `--times` as they happen, so a killed
job keeps the steps it finished. Without `--run` it reads such a file (`name|command|start|end` per line, Unix
seconds). Then it reads the finished study (nothing is re-run) and writes the record docs/cost.md and the README
quote: the two study passes, the validations and the report, the total, the same in the reference runs the study
timed at its start, the runs and their busy fraction (`busy_fraction.py`, the validations' continued runs counted).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import busy_fraction  # noqa: E402  (a sibling benchmark)

ROOT = Path(__file__).resolve().parents[1]


def commands(study: Path) -> list[list[str]]:
    """`make run`'s five commands, read from the Makefile's target `run`, with this interpreter's normlab and
    `study` for its directory."""
    lines = (ROOT / "Makefile").read_text("utf-8").split("\nrun:", 1)[1].split("\n")[1:]
    recipe = [line.split() for line in lines[:next(i for i, line in enumerate(lines) if not line.startswith("\t"))]]
    swap = {"$(BIN)/normlab": [sys.executable, "-m", "normlab"], "$(BIN)/python": [sys.executable],
            "normlab-study": [str(study)], "benchmarks/plateau_validation.py": [str(ROOT / "benchmarks" /
                                                                                  "plateau_validation.py")]}
    return [[part for word in cmd for part in swap.get(word, [word])] for cmd in recipe]


def run_timed(study: Path, times: Path) -> None:
    """Run the five commands in order, appending each one's start and end to `times`; stop at the first failure."""
    for cmd in commands(study):
        start = time.time()
        subprocess.run(cmd, check=True)
        with times.open("a", encoding="utf-8") as f:
            f.write(f"standard|{shlex.join(cmd)}|{start}|{time.time()}\n")


def read_times(times: Path) -> list[tuple[str, float, float]]:
    """(command, start, end) of each timed step, in order."""
    steps = [line.split("|") for line in times.read_text("utf-8").splitlines() if line.count("|") == 3]
    return [(cmd, float(s), float(e)) for _, cmd, s, e in steps]


def record(steps: list[tuple[str, float, float]], study: Path, workers: int = 2) -> dict:
    """The record of a finished `make run` from its five timed steps and its study directory."""
    from normlab.study.load import load_study

    if len(steps) != 5:
        raise SystemExit(f"make run has 5 steps; the times give {len(steps)}: run it to its end first")
    spans = [e - s for _, s, e in steps]
    total = steps[-1][2] - steps[0][1]
    verdicts = json.loads((study / "verdicts.json").read_text("utf-8"))
    if not verdicts.get("final"):
        raise SystemExit(f"{study / 'verdicts.json'} is partial: the record needs a final study")
    validation = json.loads((study / "plateau_validation.json").read_text("utf-8"))
    busy = busy_fraction.study_busy(study, workers, total)
    ref = verdicts["cost"]["reference_run_s"]
    trained = validation["trained"]
    seeds = sorted({s for v in verdicts["verdicts"] for s in v.get("seeds") or []})
    return {
        "command": "make run (its venv already set up): normlab study --preset standard --no-report, "
                   "benchmarks/plateau_validation.py, the study again, the validation again, normlab report",
        "machine": f"{os.cpu_count()}-core {verdicts['cost']['reference_run'].get('cpu')} ({platform.machine()})",
        "date": datetime.date.fromtimestamp(steps[0][1]).isoformat(),
        "seeds": f"{seeds[0]}-{seeds[-1]}" if seeds else "",
        "study_passes_s": [round(spans[0], 1), round(spans[2], 1)],
        "validations_and_report_s": round(spans[1] + spans[3] + spans[4], 1),
        "total_s": round(total, 1),
        "reference_run_s": ref,
        "total_reference_runs": round(total / ref, 1),
        "runs": busy["ledger_only"]["runs"],
        "stopped_runs_continued": validation["continued"],
        "stopped_runs_that_trained": trained if isinstance(trained, int) else len(trained),
        "busy_fraction": busy["busy_fraction"],
        "busy_fraction_ledger_only": busy["ledger_only"]["busy_fraction"],
        "quiet_measuring_fraction": busy["quiet_fraction"],  # the study's timings and checks, alone by design
        "waiting_fraction": busy["waiting_fraction"],  # what is left: judging, planning, process starts, the report
        "longest_idle_s": busy["longest_idle_s"],
        "rules": verdicts["rules"]["fingerprint"],
        "limit": f"at most 100 reference runs of wall: {'met' if total / ref <= 100 else 'not met'} "
                 f"({total / ref:.0f}); at most 30 minutes: {'met' if total <= 1800 else 'not met'} "
                 f"({total / 60:.1f} min)",
        "first_look_runs": len(load_study("standard").runs),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", action="store_true", help="run make run's five commands, timing each")
    ap.add_argument("--study", type=Path, default=Path("normlab-study"))
    ap.add_argument("--times", type=Path, default=None, help="the times file (default: STUDY.times)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    times = args.times or args.study.with_suffix(".times")
    if args.run:
        if times.exists():
            raise SystemExit(f"{times} exists: a new timing starts from no file (move it away, or read it without "
                             "--run)")
        run_timed(args.study, times)
    out = record(read_times(times), args.study, args.workers)
    args.out.write_text(json.dumps(out, indent=1) + "\n", "utf-8")
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
