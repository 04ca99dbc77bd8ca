"""The README's verdict table of a finished study, generated from its verdicts.json (nothing typed in by hand).

    python benchmarks/verdict_table.py normlab-study            # the standard preset's table
    python benchmarks/verdict_table.py frontier-study --papers  # with each claim's paper and contradiction

One row per verdict and one per sub-verdict (↳), each with its key number and the interval of its look.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from normlab.report.format import interval_text, key_number, marks
from normlab.study.claims import CLAIMS


def cell(text: str) -> str:
    return str(text).replace("|", "&#124;").replace("\n", " ")


def verdict_word(v: dict) -> str:
    m = marks(v)
    return v["verdict"] + (f" ({', '.join(m)})" if m else "")


def seeds_text(v: dict) -> str:
    n = len(v["seeds"]) if v.get("seeds") else v.get("n_seeds")
    if not n:
        return "—"
    look = v.get("look") or {}
    return f"{n} (look {look['look']} of {look['looks']})" if look else str(n)


def other_text(v: dict) -> str:
    other = v.get("other_init") or {}
    if not v.get("init"):
        return "no training runs"
    return f"{other.get('recipe')}: {other.get('verdict')}" if other else "not run"


def number(statistic, value, reading, interval) -> str:
    text = key_number(statistic, value, reading)
    iv = interval_text(interval)
    return f"{text} {iv}".strip()


def table(verdicts: list[dict], papers: bool) -> str:
    head = ["claim", "verdict", "judged under", "seeds (look)", "the other init recipe", "key number [interval]"]
    if papers:
        head += ["paper", "published contradiction"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for v in verdicts:
        title = CLAIMS.get(v["id"]).title if v["id"] in CLAIMS else ""
        row = [f"{v['id']} {title}", verdict_word(v), v.get("init") or "—", seeds_text(v), other_text(v),
               number(v.get("statistic"), v.get("value"), v.get("reading"), v.get("interval"))]
        if papers:
            settings = v.get("settings") or {}
            row += [settings.get("paper", ""), settings.get("contradiction") or "—"]
        lines.append("| " + " | ".join(cell(c) for c in row) + " |")
        for p in v.get("parts") or []:
            sub = [f"↳ {p['name']}", p["verdict"], "", "", "",
                   number(p.get("statistic"), p.get("value"), None, p.get("interval"))]
            lines.append("| " + " | ".join(cell(c) for c in sub + ([""] * 2 if papers else [])) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("study", type=Path)
    ap.add_argument("--papers", action="store_true", help="add each claim's paper and published contradiction")
    args = ap.parse_args(argv)
    path = args.study / "verdicts.json"
    if not path.is_file():
        print(f"{path} does not exist: run the study first", file=sys.stderr)
        return 2
    data = json.loads(path.read_text("utf-8"))
    if not data.get("final"):
        print(f"{path} is partial ({data.get('done')} of {data.get('total')} runs): a README table needs a final "
              "study", file=sys.stderr)
        return 2
    print(table(data["verdicts"], args.papers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
