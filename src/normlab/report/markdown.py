"""The Markdown summary: study info, the verdict table, one line per claim (for a terminal or a PR)."""
from __future__ import annotations

from typing import Any

from normlab.report.format import fmt_info_value, fmt_value, info_label, key_number, label

VERDICT_MARK = {"holds": "✅", "does not hold": "❌", "inconclusive": "❔"}


def cell(text: Any) -> str:
    """Text safe inside a Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def markdown(title: str, study_info: dict, verdicts: list[dict], claim_info: dict[str, dict]) -> str:
    lines = [f"# {cell(title)}", ""]
    lines += info_lines(study_info)
    lines += ["## Verdicts", "", "| claim | verdict | key number | seeds |", "|---|---|---|---:|"]
    for v in verdicts:
        name = v["id"] + (f" — {(claim_info.get(v['id']) or {}).get('title')}"
                          if (claim_info.get(v["id"]) or {}).get("title") else "")
        mark = VERDICT_MARK.get(v.get("verdict"), "·")
        lines.append(f"| {cell(name)} | {mark} {cell(v.get('verdict'))} | "
                     f"{cell(key_number(v.get('statistic'), v.get('value')))} | {cell(fmt_value(v.get('n_seeds')))} |")
    lines += ["", "## Summaries", ""]
    lines += [f"- **{cell(v['id'])}** ({cell(v.get('verdict'))}): {cell(v.get('summary') or '—')}" for v in verdicts]
    return "\n".join(lines) + "\n"


def info_lines(study_info: dict) -> list[str]:
    scalars = [f"{info_label(k, v)}: {cell(fmt_info_value(k, v))}" for k, v in study_info.items()
               if not isinstance(v, dict)]
    lines = [" · ".join(scalars), ""] if scalars else []
    for key, value in study_info.items():
        if isinstance(value, dict) and value:
            items = ", ".join(f"{k} = {cell(fmt_info_value(str(k), v))}" for k, v in value.items())
            lines += [f"{label(key).capitalize()}: {items}", ""]
    return lines
