"""Would stopping a run that is still on the unigram plateau part-way through lose runs that go on to train?
Read from a finished study's ledger (nothing is re-run): for each fraction of the budget, the runs whose first
val eval at or after it was still within `train.untrained_margin` of the plateau, and how many of those ended
trained.

    python benchmarks/plateau_recovery.py normlab-study [--plateau 3.3473] [--margin 0.1]

3.3473 nats is tiny Shakespeare's unigram cross-entropy at char level (the default corpus). Runs that
`train.plateau_stop` finished early cannot show whether they would have recovered: they are counted apart, and
only runs trained to the end are read (run a study with --set train.plateau_stop=off to measure the cut-off).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from normlab.study.ledger import Ledger

FRACTIONS = (1 / 3, 1 / 2, 2 / 3)


def on_plateau_at(record, fraction: float, plateau: float, margin: float) -> tuple[int, float] | None:
    """(step, val loss) of the run's first eval at or after `fraction` of its steps, if still on the plateau."""
    steps = record.get("train.steps")
    later = [(s, v) for s, v in record.val_curve if v is not None and s > 0 and s >= fraction * steps - 1e-9]
    if not later or later[0][1] <= plateau - margin:
        return None
    return later[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("study", type=Path)
    ap.add_argument("--plateau", type=float, default=3.3473)
    ap.add_argument("--margin", type=float, default=0.1)
    args = ap.parse_args(argv)
    records = [r for r in Ledger(args.study).records() if r.status in ("completed", "failed_to_train")]
    stopped = [r for r in records if r.val_curve and r.val_curve[-1][0] < r.get("train.steps")]
    records = [r for r in records if r not in stopped]
    print(f"{args.study}: {len(records)} runs trained to the end, {sum(r.failed_to_train for r in records)} of them "
          f"failed to train; {len(stopped)} stopped on the plateau early (train.plateau_stop), not read")
    on_plateau = [r for r in stopped if r.status == "failed_to_train"]
    if on_plateau:  # their time as spent, and at their full budget (elapsed scaled by steps / the step they stopped at)
        spent = sum(r.elapsed_s or 0 for r in on_plateau)
        full = sum((r.elapsed_s or 0) * r.get("train.steps") / r.val_curve[-1][0] for r in on_plateau)
        print(f"the plateau stop: {len(on_plateau)} runs, {spent:.0f} s of training instead of about {full:.0f} s "
              "at their full budgets")
    for fraction in FRACTIONS:
        stuck = [(r, at) for r in records if (at := on_plateau_at(r, fraction, args.plateau, args.margin))]
        recovered = [(r, at) for r, at in stuck if r.status == "completed"]
        print(f"at {fraction:.2f} of the budget: {len(stuck)} runs on the plateau, {len(recovered)} of them went on "
              "to train")
        for r, (step, val) in recovered[:5]:
            print(f"  {r.get('model.scheme')} L{r.get('model.n_layer')} lr {r.get('train.lr'):g} seed {r.seed}: "
                  f"{val:.3f} at step {step}, {r.val_loss:.3f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
