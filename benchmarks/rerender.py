"""Re-render finished studies from their ledgers and compare with what was committed of them: the check a change to
the study's code must pass where it means to leave every verdict and report as it was.

    python benchmarks/rerender.py STUDY:RESULTS [STUDY:RESULTS ...]
    python benchmarks/rerender.py normlab-study:benchmarks/results/standard ../runs/design:benchmarks/results/standard-design
    python benchmarks/rerender.py --write benchmarks/results/standard-design:benchmarks/results/standard-design

STUDY is a study directory (its study.sqlite and runs/), RESULTS the folder its outputs were committed to. STUDY is
copied to a temporary directory, its checkpoints left out (the report reads none), and rendered there as `normlab
report` renders it; nothing is written into STUDY. verdicts.json and report.md are compared byte for byte, and
report.html with its plots' PNG bytes left out (matplotlib's PNG bytes are not stable between two renders of one
figure; the figures' data are in the page around them). Prints one line per file; exits 1 on any difference.
"""
from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

COMPARED = ("verdicts.json", "report.md", "report.html")
PNG = re.compile(r"data:image/png;base64,[A-Za-z0-9+/=]+")


def comparable(name: str, text: str) -> str:
    """A rendered file as compared: report.html with its PNG bytes masked, the others as they are."""
    return PNG.sub("data:image/png;base64,<PNG>", text) if name == "report.html" else text


def rerender(study: Path, results: Path, write: bool = False) -> dict[str, bool | None]:
    """Each compared file: True where the re-render equals the committed file, False where it differs, None where
    RESULTS has no such file (nothing to compare). `write`: the re-rendered verdicts.json and report.md replace the
    committed ones (a design study judged again under new rules, from its committed ledger)."""
    from normlab.study.publish import publish

    if not (study / "study.sqlite").is_file():
        raise SystemExit(f"{str(study)!r} has no study.sqlite: not a normlab study directory")
    with tempfile.TemporaryDirectory(prefix="normlab-rerender-") as tmp:
        copy = Path(tmp) / "study"
        shutil.copytree(study, copy, ignore=shutil.ignore_patterns("checkpoint*.pt", "*.lock", ".measuring.lock"))
        publish(copy)
        out = {}
        for name in COMPARED:
            committed = results / name
            if not committed.is_file():
                out[name] = None
                continue
            out[name] = comparable(name, (copy / name).read_text("utf-8")) == \
                comparable(name, committed.read_text("utf-8"))
            if write and name != "report.html":
                shutil.copyfile(copy / name, committed)
        return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pairs", nargs="+", metavar="STUDY:RESULTS",
                    help="a study directory and the folder its outputs were committed to")
    ap.add_argument("--write", action="store_true",
                    help="replace RESULTS' verdicts.json and report.md with the re-render (a design study judged again "
                         "under new rules; RESULTS may be the study itself: its committed study.sqlite)")
    args = ap.parse_args(argv)
    differ = False
    for pair in args.pairs:
        study, sep, results = pair.partition(":")
        if not sep or not study or not results:
            ap.error(f"{pair!r} is not STUDY:RESULTS (a study directory, a colon, the committed results folder)")
        for name, same in rerender(Path(study), Path(results), args.write).items():
            word = "not committed" if same is None else "same" if same else "DIFFERS"
            print(f"{study} -> {results}/{name}: {word}")
            differ |= same is False
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
