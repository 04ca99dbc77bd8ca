"""How much did a loaded machine slow a study's pass? Retrain a sample of its runs on a quiet one and compare.

    python benchmarks/quiet_rerun.py STUDY --factor width [--workers 2] [--json OUT]

A study's training times are measured while it runs; when other jobs share the cores they are upper bounds.
This takes one run of each cell (scheme, depth, width, steps) of a `--vary` pass, retrains each from scratch
into a temporary directory, as many at a time as the study's workers (each on the one thread it pins), and
divides the quiet times by the times the ledger recorded for the same runs. The pass's quiet cost is estimated
as its recorded training time × that ratio. Run it with nothing else on the machine: that is the point of it.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def retrain(config: dict, out: str) -> float:
    """Train the run of `config` into `out` from scratch; its training time, read as the ledger reads it."""
    import torch

    from normlab.config import validate_config
    from normlab.study.records import record_from_run_dir
    from normlab.train.loop import train

    torch.set_num_threads(1)  # as the study trained it (train.threads = 1)
    train(validate_config(config), out)
    return record_from_run_dir(Path(out).name, out).elapsed_s


def main(argv: list[str] | None = None) -> int:
    from normlab.study.ledger import Ledger
    from normlab.study.plan import factor_overrides, plan_from_meta

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("study", type=Path)
    ap.add_argument("--factor", required=True, help="the pass to sample: context or width")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    ledger = Ledger(args.study)
    spec = plan_from_meta(ledger.meta())
    other = factor_overrides(args.factor, spec.preset.config)
    sample: dict[tuple, object] = {}
    for record in sorted(ledger.records(), key=lambda r: r.id):
        if record.elapsed_s and all(record.get(k) == v for k, v in other.items()) \
                and not record.get("train.init_from"):
            cell = tuple(record.get(k) for k in ("model.scheme", "model.n_layer", "model.d_model", "train.steps"))
            sample.setdefault(cell, record)
    with tempfile.TemporaryDirectory() as tmp, ProcessPoolExecutor(args.workers) as pool:
        quiet = dict(zip(sample, pool.map(retrain, [r.config for r in sample.values()],
                                          [str(Path(tmp) / r.id) for r in sample.values()])))
    loaded = {cell: r.elapsed_s for cell, r in sample.items()}
    ratio = sum(quiet.values()) / sum(loaded.values())
    for cell in sample:
        print(f"{'-'.join(map(str, cell)):<28} loaded {loaded[cell]:7.1f} s  quiet {quiet[cell]:7.1f} s")
    print(f"{args.factor} pass: quiet / loaded training time over {len(sample)} runs = {ratio:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"study": str(args.study), "factor": args.factor, "workers": args.workers,
                                         "ratio": ratio, "runs": [{"cell": list(c), "id": sample[c].id,
                                                                   "loaded_s": loaded[c], "quiet_s": quiet[c]}
                                                                  for c in sample]}, indent=2) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
