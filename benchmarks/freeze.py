"""Freeze the rules before a held-out run: write benchmarks/results/freeze.json with today's fingerprint.

    python benchmarks/freeze.py && git add benchmarks/results/freeze.json && git commit -m "Freeze the rules"

Commit it before the held-out studies start: tests/test_results.py checks that every run in a held-out result's
manifest.json started after the commit that first named its fingerprint in this file, under those rules.
"""
from __future__ import annotations

import json
from pathlib import Path

from normlab.study.rules import fingerprint, rules_record

FREEZE = Path(__file__).resolve().parent / "results" / "freeze.json"


def main() -> None:
    record = rules_record()
    FREEZE.write_text(json.dumps({"fingerprint": fingerprint(), "modules": record["modules"],
                                  "what": "the rules frozen before the held-out studies ran (tests/test_results.py "
                                          "checks every run started after the commit that first named it here)"},
                                 indent=1) + "\n", "utf-8")
    print(f"froze {fingerprint()} in {FREEZE}: commit it before the held-out runs start")


if __name__ == "__main__":
    main()
