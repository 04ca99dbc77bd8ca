"""The README's verdict table of a finished study, generated from its verdicts.json (nothing typed in by hand).

    python benchmarks/verdict_table.py normlab-study            # the standard preset's table
    python benchmarks/verdict_table.py frontier-study --papers  # with each claim's paper and contradiction
    python benchmarks/verdict_table.py benchmarks/results/standard \
        --design benchmarks/results/standard-design              # held-out seeds beside the design seeds

One row per verdict and one per sub-verdict (↳), each with its key number and the interval of its look; a line
above it counts the four outcomes. tests/test_results.py regenerates the README's tables from the committed
files under benchmarks/results/ with `table()` and fails on drift.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from normlab.report.format import interval_text, key_number, marks
from normlab.report.outcome import Totals, outcome_of, replicated
from normlab.study.claims import CLAIMS


def cell(text: str) -> str:
    return str(text).replace("|", "&#124;").replace("\n", " ")


def verdict_word(v: dict) -> str:
    """The outcome, where judged or which kind of inconclusive, and the marks (fragile, init-dependent)."""
    outcome = outcome_of(v)
    m = marks(v)
    extra = outcome.why_text or (outcome.scope_text if outcome.open_levels else "")
    return outcome.text + (f": {extra}" if extra else "") + (f" ({', '.join(m)})" if m else "")


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


def scope_text(v: dict) -> str:
    """Where the verdict was measured beyond its own level: `init: holds under xiong, holds under gpt2`."""
    scope = v.get("scope") or {}
    if not scope:
        return other_text(v)
    return "; ".join(f"{factor}: " + ", ".join(f"{verdict} under {level}" for level, verdict in levels.items())
                     for factor, levels in scope.items())


def design_text(v: dict, design: dict[str, dict] | None) -> str:
    seen = (design or {}).get(v["id"])
    if not seen:
        return "—"
    return f"{outcome_of(seen).text}" + (" (replicated)" if replicated(v, seen) else "")


def counts_line(verdicts: list[dict], design: dict[str, dict] | None = None) -> str:
    """`4 holds (1 of them only where judged), 4 does not hold, 1 depends on, 6 inconclusive; 9 of 15 decisive; 5
    replicated …`: the totals, one definition each (report/outcome.py)."""
    totals = Totals.of([{**v, "design": (design or {}).get(v["id"]) or {}} for v in verdicts])
    return totals.text() if design else Totals(totals.counts, 0, totals.decisive, totals.claims).text()


def table(verdicts: list[dict], papers: bool, design: dict[str, dict] | None = None) -> str:
    """The verdict table; `design`: {claim: design-seed verdict dict} adds its column (the held-out table)."""
    head = ["claim", "verdict"] + (["design seeds"] if design else []) + [
        "judged under", "seeds (look)", "where it holds (other levels)", "key number [interval]"]
    if papers:
        head += ["paper", "published contradiction"]
    lines = [counts_line(verdicts, design), "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for v in verdicts:
        title = CLAIMS.get(v["id"]).title if v["id"] in CLAIMS else ""
        row = [f"{v['id']} {title}", verdict_word(v)] + ([design_text(v, design)] if design else []) + [
            v.get("init") or "—", seeds_text(v), scope_text(v),
            number(v.get("statistic"), v.get("value"), v.get("reading"), v.get("interval"))]
        if papers:
            settings = v.get("settings") or {}
            row += [settings.get("paper", ""), settings.get("contradiction") or "—"]
        lines.append("| " + " | ".join(cell(c) for c in row) + " |")
        for p in v.get("parts") or []:
            sub = [f"↳ {p['name']}", p["verdict"]] + ([""] if design else []) + ["", "", "",
                   number(p.get("statistic"), p.get("value"), None, p.get("interval"))]
            lines.append("| " + " | ".join(cell(c) for c in sub + ([""] * 2 if papers else [])) + " |")
    return "\n".join(lines)


def load(path: Path) -> dict:
    """A study directory's (or a results folder's) verdicts.json, or a verdicts.json itself."""
    path = path / "verdicts.json" if path.is_dir() else path
    return json.loads(path.read_text("utf-8"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("study", type=Path)
    ap.add_argument("--papers", action="store_true", help="add each claim's paper and published contradiction")
    ap.add_argument("--design", type=Path, help="the design seeds' study (or verdicts.json): a column beside")
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
    design = {v["id"]: v for v in load(args.design)["verdicts"]} if args.design else None
    print(table(data["verdicts"], args.papers, design))
    return 0


if __name__ == "__main__":
    sys.exit(main())
