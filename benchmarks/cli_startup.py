"""How long the command line takes to answer before it does any work: `normlab --help`, a command's `--help`,
and a refused flag, each as a fresh process, beside `python -c "import torch"` (what every call would pay if
the command line imported its registries at start) and a bare `python -c pass`, interleaved, on a quiet machine.

    python benchmarks/cli_startup.py --out benchmarks/results/cli_startup_2core_cpu.json [--repeats 11]

Records each command's wall times (min, median, max over the repeats) and the median's ratio to `import
torch`'s. `tests/test_results.py` holds `normlab --help`'s median to 1 s.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

from normlab.jsonsafe import write_json

PY = sys.executable
COMMANDS = {
    "python -c pass": [PY, "-c", "pass"],
    "python -c 'import torch'": [PY, "-c", "import torch"],
    "normlab --help": [PY, "-m", "normlab", "--help"],
    "normlab train --help": [PY, "-m", "normlab", "train", "--help"],
    "normlab study --help": [PY, "-m", "normlab", "study", "--help"],
    "normlab export --help": [PY, "-m", "normlab", "export", "--help"],
    "normlab import-hf --help": [PY, "-m", "normlab", "import-hf", "--help"],
    "normlab bench --help": [PY, "-m", "normlab", "bench", "--help"],
    "normlab study --preset nope (refused)": [PY, "-m", "normlab", "study", "--preset", "nope"],
}
BASELINE = "python -c 'import torch'"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="write the JSON here")
    ap.add_argument("--repeats", type=int, default=11)
    args = ap.parse_args(argv)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeats):  # interleaved: a slow spell of the machine falls on every command alike
        for name, cmd in COMMANDS.items():
            start = time.perf_counter()
            subprocess.run(cmd, capture_output=True, check=False)
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times[BASELINE])
    rows = {name: {"min_s": min(t), "median_s": statistics.median(t), "max_s": max(t),
                   "median_vs_import_torch": statistics.median(t) / base} for name, t in times.items()}
    out = {"what": __doc__.split("\n\n")[0].replace("\n", " "), "repeats": args.repeats, "commands": rows,
           "python": platform.python_version(), "cpu": platform.processor() or platform.machine(),
           "cores": os.cpu_count(), "quiet": "run alone, nothing else on the machine"}
    text = write_json(out, args.out)
    if not args.out:
        sys.stdout.write(text)
    for name, row in rows.items():
        print(f"{name}: median {row['median_s']:.2f} s ({row['median_vs_import_torch']:.2f}× import torch)",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
