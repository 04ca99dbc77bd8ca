"""The README's quick start, timed as a new user meets it: its command verbatim, in a fresh directory with the
repository's configs/ beside them, on a quiet machine.

    python benchmarks/quick_start.py --out benchmarks/results/quick_start_2core_cpu.json

Records the wall time of each command (the study includes its reference run and its report), the verdict, its key
number and where it holds, and the machine. `tests/test_readme.py` runs the same commands and checks the verdict
decides; the README quotes the time from this file.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from normlab.jsonsafe import write_json

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ["normlab study --study configs/study_example.toml --out example-study"]  # it writes its report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="write the JSON here")
    args = ap.parse_args(argv)
    readme = (ROOT / "README.md").read_text("utf-8")
    missing = [c for c in COMMANDS if c not in readme]
    if missing:
        raise SystemExit(f"the README no longer says {missing[0]!r}: update COMMANDS")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(ROOT / "configs", Path(tmp) / "configs")
        times = {}
        for command in COMMANDS:
            start = time.perf_counter()
            done = subprocess.run(command, shell=True, cwd=tmp, env=env, capture_output=True, text=True)
            times[command] = time.perf_counter() - start
            if done.returncode != 0:
                raise SystemExit(f"{command} failed:\n{done.stdout}\n{done.stderr}")
        (c13,) = json.loads((Path(tmp) / "example-study" / "verdicts.json").read_text())["verdicts"]
    out = {"commands": times, "wall_s": sum(times.values()), "verdict": c13["verdict"], "value": c13["value"],
           "reading": c13.get("reading"), "scope": c13.get("scope"), "cpu": platform.processor() or platform.machine(),
           "cores": os.cpu_count(), "quiet": "run alone, nothing else on the machine"}
    text = write_json(out, args.out)
    if not args.out:
        sys.stdout.write(text)
    print(f"quick start: {out['wall_s']:.1f} s, C13 {out['verdict']} ({out['reading']})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
