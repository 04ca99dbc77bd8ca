"""The Markdown summary: study info, the verdict table, one line per claim (for a terminal or a PR).

Every piece of text goes through `cell`, which escapes &, < and > as report.html's `esc`
does: a Markdown viewer renders inline HTML, so a `<script>` in an axis value or a title
must arrive as text.
"""
from __future__ import annotations

import html
from typing import Any

from normlab.report.format import (first_line, fmt_info_value, fmt_settings, fmt_value, info_label, key_number,
                                   label, partial_note)

VERDICT_MARK = {"holds": "✅", "does not hold": "❌", "inconclusive": "❔"}


def cell(text: Any) -> str:
    """Text safe inside a Markdown table cell: one line, HTML escaped, pipes escaped."""
    return html.escape(" ".join(str(text).split()), quote=False).replace("|", "\\|")


def markdown(title: str, study_info: dict, verdicts: list[dict], claim_info: dict[str, dict],
             status: dict | None = None, failed_runs: list[dict] | None = None) -> str:
    note = partial_note(status or {})
    lines = [f"**{cell(note)}**", ""] if note else []  # first line: nobody mistakes it for the final report
    lines += [f"# {cell(title)}", ""]
    lines += info_lines(study_info)
    lines += ["## Verdicts", "", "| claim | verdict | key number | seeds |", "|---|---|---|---:|"]
    for v in verdicts:
        name = v["id"] + (f" — {(claim_info.get(v['id']) or {}).get('title')}"
                          if (claim_info.get(v["id"]) or {}).get("title") else "")
        mark = VERDICT_MARK.get(v.get("verdict"), "·")
        fragile = " (fragile)" if v.get("fragile") else ""
        lines.append(f"| {cell(name)} | {mark} {cell(v.get('verdict'))}{fragile} | "
                     f"{cell(key_number(v.get('statistic'), v.get('value')))} | {cell(fmt_value(v.get('n_seeds')))} |")
    lines += failed_lines(failed_runs or [])
    lines += ["", "## Summaries", ""]
    lines += [f"- **{cell(v['id'])}** ({cell(v.get('verdict'))}): {cell(v.get('summary') or '—')}" for v in verdicts]
    return "\n".join(lines) + "\n"


def failed_lines(failed_runs: list[dict]) -> list[str]:
    if not failed_runs:
        return []
    lines = ["", "## Failed runs", "", "| run | settings | attempts | reason |", "|---|---|---:|---|"]
    lines += [f"| {cell(r.get('id'))} | {cell(fmt_settings(r.get('settings')))} | {cell(fmt_value(r.get('attempts')))} "
              f"| {cell(first_line(r.get('reason')))} |" for r in failed_runs]
    return lines


def info_lines(study_info: dict) -> list[str]:
    scalars = [f"{cell(info_label(k, v))}: {cell(fmt_info_value(k, v))}" for k, v in study_info.items()
               if not isinstance(v, dict)]
    lines = [" · ".join(scalars), ""] if scalars else []
    for key, value in study_info.items():
        if isinstance(value, dict) and value:
            items = ", ".join(f"{cell(k)} = {cell(fmt_info_value(str(k), v))}" for k, v in value.items())
            lines += [f"{cell(label(key).capitalize())}: {items}", ""]
    return lines
