"""Record a preset's design-seed verdicts, which every held-out study of the preset shows beside its own.

    python benchmarks/design_verdicts.py benchmarks/results/standard-design [--preset standard]

reads that folder's verdicts.json (a final study of the preset on design seeds, `normlab study --seeds 0,1,2,3,4`,
copied there with its cost record) and writes the preset's entry of src/normlab/study/design_verdicts.json: the
seeds and each claim's verdict and key number. tests/test_results.py checks the entry against the folder.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from normlab.study.design import DESIGN_FILE
from normlab.study.presets import DESIGN_SEEDS


def entry(data: dict) -> dict:
    """The design record of one final study's verdicts.json: its seeds and each claim's verdict and reading."""
    seeds = sorted({s for v in data["verdicts"] for s in v.get("seeds") or []})
    return {"seeds": seeds, "verdicts": {v["id"]: {"verdict": v["verdict"], "reading": v.get("reading") or "",
                                                   **({"outcome": v["outcome"]} if v.get("outcome") else {})}
                                         for v in data["verdicts"]}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path, help="a folder holding the design-seed study's verdicts.json")
    ap.add_argument("--preset", help="the preset it records (default: the one report.md names)")
    args = ap.parse_args(argv)
    data = json.loads((args.results / "verdicts.json").read_text("utf-8"))
    if args.preset is None:  # the study's own preset, as its report states it ("preset: standard · ...")
        found = re.search(r"^preset: ([\w-]+)", (args.results / "report.md").read_text("utf-8"), re.M)
        if found is None:
            print(f"{args.results}/report.md names no preset: give --preset", file=sys.stderr)
            return 2
        args.preset = found.group(1)
    if not data.get("final"):
        print(f"{args.results}/verdicts.json is partial: record a final study", file=sys.stderr)
        return 2
    record = entry(data)
    if not all(s in DESIGN_SEEDS for s in record["seeds"]):
        print(f"seeds {record['seeds']} are not design seeds ({DESIGN_SEEDS.start}–{DESIGN_SEEDS.stop - 1})",
              file=sys.stderr)
        return 2
    known = json.loads(DESIGN_FILE.read_text("utf-8")) if DESIGN_FILE.is_file() else {}
    known[args.preset] = record
    DESIGN_FILE.write_text(json.dumps(known, indent=2, ensure_ascii=False, sort_keys=True) + "\n", "utf-8")
    print(f"recorded {len(record['verdicts'])} design verdicts of {args.preset} in {DESIGN_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
