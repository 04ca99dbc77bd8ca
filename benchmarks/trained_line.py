"""Where "trained" is drawn: the final val losses of a study's runs in their two modes, the line between them, and
how many runs lie near it.

    python benchmarks/trained_line.py /work/runs/design --out benchmarks/results/trained_line.json

A run has trained when it ends below the line halfway from its corpus's unigram cross-entropy (token frequencies,
nothing more) to its bigram cross-entropy (each token from the one before): `normlab.data.corpus.trained_line`.
This reads every run of a study that reached its budget (a run the plateau stop ended and nobody continued is
censored: its loss is from half its budget, so it is left out and counted apart), histograms their final val
losses in 0.05-nat bins, and counts the runs within 0.05 nats of the line and of the old one (0.1 nats under the
unigram loss). A line that separates two modes has few runs near it; the old one had a mode's edge on it.
Diverged runs have no final loss and are counted apart.
"""
from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from pathlib import Path

from normlab.data.corpus import TRAINED_SHARE, trained_line
from normlab.study.ledger import Ledger
from normlab.jsonsafe import write_json
from normlab.study.trained import corpus_ends, corpus_key

NEAR = 0.05  # nats: "near the line"
BIN = 0.05
OLD_MARGIN = 0.1  # the old line: this far under the unigram loss (train.untrained_margin's default)


def losses(study: Path) -> tuple[list[float], dict[str, int], tuple[float, float]]:
    """(final val losses of the runs at their budget, counts of the others, (unigram, bigram) of their corpus)."""
    records = Ledger(study).records()
    key, _ = Counter(corpus_key(r.config) for r in records).most_common(1)[0]  # the study's own corpus
    ends = corpus_ends(key, records[0].config["model"]["block_size"])
    out, other = [], Counter()
    for r in records:
        if corpus_key(r.config) != key:
            other["on another corpus (C7's fine-tunes)"] += 1
        elif r.censored:
            other["censored by the plateau stop (not continued)"] += 1
        elif r.diverged:
            other["diverged"] += 1
        elif r.val_loss is None or not math.isfinite(r.val_loss):
            other["no finite val loss"] += 1
        else:
            out.append(r.val_loss)
    return out, dict(other), ends


def summary(values: list[float], unigram: float, bigram: float) -> dict:
    line, old = trained_line(unigram, bigram), unigram - OLD_MARGIN
    bins = Counter(math.floor(v / BIN) * BIN for v in values)
    below, above = [v for v in values if v <= line], [v for v in values if v > line]
    return {
        "runs": len(values), "unigram_ce": unigram, "bigram_ce": bigram, "share": TRAINED_SHARE, "line": line,
        "old_line": old, "near": NEAR,
        "trained": len(below), "did_not_train": len(above),
        "near_line": sum(abs(v - line) <= NEAR for v in values),
        "near_old_line": sum(abs(v - old) <= NEAR for v in values),
        "trained_by_old_line_only": sum(line < v <= old for v in values),
        "trained_mode": {"min": min(below, default=None), "max": max(below, default=None)},
        "untrained_mode": {"min": min(above, default=None), "max": max(above, default=None)},
        "widest_gap_below_unigram": widest_gap([v for v in values if bigram <= v <= unigram]),
        "histogram": {f"{b:.2f}": n for b, n in sorted(bins.items())},
    }


def widest_gap(values: list[float]) -> dict | None:
    """The widest stretch of loss with no run in it (of `values`: those between the bigram and unigram ends, where
    the modes part)."""
    xs = sorted(values)
    gaps = [(b - a, a, b) for a, b in zip(xs, xs[1:])]
    if not gaps:
        return None
    width, low, high = max(gaps)
    return {"from": low, "to": high, "nats": width}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("studies", type=Path, nargs="+", help="study directories on one corpus (design seeds)")
    ap.add_argument("--out", type=Path, help="write the summary as JSON here")
    args = ap.parse_args(argv)
    values, other, ends = [], Counter(), None
    for study in args.studies:
        v, o, e = losses(study)
        values += v
        other.update(o)
        ends = ends or e
    if not values:
        print("no run reached its budget", file=sys.stderr)
        return 2
    result = {"studies": [str(s) for s in args.studies], **summary(values, *ends), "left_out": dict(other)}
    print(write_json(result, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
