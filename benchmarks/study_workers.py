"""How many study workers on this machine: N single-thread processes vs fewer, multi-thread ones.

Trains the same set of quick-preset runs (C13's: 2 configs × 2 seeds, 300 steps) into fresh
study directories with each worker layout, one after the other in this process's children,
and prints the wall time of each. Run it on an otherwise idle machine.

    python benchmarks/study_workers.py [--claims C13] [--layouts 1x2,2x1]
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from normlab.study import local_executor
from normlab.study.jobs import run_cost
from normlab.study.ledger import Ledger
from normlab.study.load import load_study


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", default="C13")
    parser.add_argument("--layouts", default="1x2,2x1", help="WORKERSxTHREADS, comma-separated")
    args = parser.parse_args()
    results = {}
    for layout in args.layouts.split(","):
        workers, threads = (int(v) for v in layout.split("x"))
        spec = load_study("quick", claims=args.claims.split(","))
        with tempfile.TemporaryDirectory() as tmp:
            ledger = Ledger(tmp)
            runs = spec.runs
            ledger.add_runs([(r.id, r.config.to_dict()) for r in runs])
            costs = {r.id: run_cost(r.config.to_dict()) for r in runs}
            start = time.perf_counter()
            local_executor.train_all(ledger, [r.id for r in runs], costs, workers, threads, None)
            results[layout] = time.perf_counter() - start
    base = results[args.layouts.split(",")[0]]
    print(json.dumps({"cpu_count": os.cpu_count(), "wall_s": results,
                      "ratio_to_first": {k: v / base for k, v in results.items()}}, indent=2))


if __name__ == "__main__":
    main()
