"""The Markdown summary: study info, the verdict table, one line per claim (for a terminal or a PR).

Every piece of text goes through `cell`, which escapes &, < and > as report.html's `esc`
does: a Markdown viewer renders inline HTML, so a `<script>` in an axis value or a title
must arrive as text.
"""
from __future__ import annotations

import html
from typing import Any

from normlab.report.outcome import outcome_of, replicated
from normlab.report.format import (failure_groups, failure_text, first_line, fmt_info_value, fmt_settings,
                                   fmt_value, info_label, init_text, interval_text, key_number, label, marks,
                                   partial_note, robustness_text, seeds_used)

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
    design = any(v.get("design") for v in verdicts)
    lines += ["## Verdicts", "", "| claim | verdict | key number | seeds | init | robustness |"
              + (" design seeds |" if design else ""), "|---|---|---|---:|---|---|" + ("---|" if design else "")]
    for v in verdicts:
        name = v["id"] + (f" — {(claim_info.get(v['id']) or {}).get('title')}"
                          if (claim_info.get(v["id"]) or {}).get("title") else "")
        mark = VERDICT_MARK.get(v.get("verdict"), "·")
        flags = "".join(f" ({m})" for m in marks(v))
        lines.append(f"| {cell(name)} | {mark} {cell(verdict_words(v))}{flags} | {cell(_key(v))} | "
                     f"{cell(fmt_value(seeds_used(v)))} | {cell(_init_cell(v))} | {cell(_robust_cell(v))} |"
                     + (f" {cell(_design_cell(v))} |" if design else ""))
        for part in v.get("parts") or []:
            lines.append(f"| ↳ {cell(part.get('name'))} | {VERDICT_MARK.get(part.get('verdict'), '·')} "
                         f"{cell(part.get('verdict'))} | {cell(_key(part))} | "
                         f"{cell(len(part.get('seeds') or []) or '—')} | | |" + (" |" if design else ""))
    lines += failed_lines(failed_runs or [])
    lines += ["", "## Claims", ""]
    for v in verdicts:
        lines += claim_lines(v)
    return "\n".join(lines) + "\n"


def verdict_words(v: dict) -> str:
    """The verdict as the table gives it: its outcome, `where judged` when some level left it open, and an
    inconclusive verdict's kind (`effect seen, not past the family-wise level at 10 seeds: about 14 needed`)."""
    outcome = outcome_of(v)
    extra = outcome.why_text or (outcome.scope_text if outcome.open_levels else "")
    return outcome.text + (f" ({extra})" if extra else "")


def _key(v: dict) -> str:
    """The key number with its interval: `dropping warmup costs Post-LN 0.257 nats [0.081, 0.434]`."""
    interval = interval_text(v.get("interval"))
    text = key_number(v.get("statistic"), v.get("value"), v.get("reading"))
    return f"{text} {interval}" if interval else text


def _init_cell(v: dict) -> str:
    other = v.get("other_init") or {}
    if not v.get("init"):
        return "—"
    return v["init"] + (f"; {other['recipe']}: {other.get('verdict') or 'error'}" if other else "")


def _design_cell(v: dict) -> str:
    seen = v.get("design") or {}
    if not seen:
        return "—"
    return f"{seen['verdict']} ({'replicated' if replicated(v) else 'not replicated'})"


def _robust_cell(v: dict) -> str:
    return {None: "not checked", True: "fragile", False: "robust"}[v.get("fragile")]


def claim_lines(v: dict) -> list[str]:
    """One claim: its summary, the paper its setting follows, the settings, the runs that did not train
    (per configuration, as rates with intervals) and the robustness rerun."""
    settings = dict(v.get("settings") or {})
    paper = settings.pop("paper", None)
    lines = [f"### {cell(v['id'])}: {cell(v.get('verdict'))}{''.join(f' ({m})' for m in marks(v))}", "",
             cell(v.get("summary") or "—"), ""]
    for part in v.get("parts") or []:
        mark = VERDICT_MARK.get(part.get("verdict"), "·")
        lines += [f"- {mark} {cell(part.get('name'))}: {cell(part.get('verdict'))}"
                  f" — {cell(part.get('summary') or _key(part))} ({cell(part.get('test'))})"]
    if v.get("test"):
        lines += [f"- test: {cell(v['test'])}" + (f"; seeds {cell(', '.join(map(str, v['seeds'])))}"
                                                   if v.get("seeds") else "")]
    if paper:
        lines += [f"- paper: {cell(paper)}"]
    if settings:
        lines += [f"- settings: {cell(fmt_settings({k: s for k, s in settings.items()}))}"]
    groups = failure_groups(v.get("details") or {})
    failing = [(name, g) for name, g in groups if (g.get("n_diverged") or 0) + (g.get("n_failed_to_train") or 0)]
    if groups:
        lines += [f"- did not train: {len(failing)} of {len(groups)} configurations had runs that did not train"]
        lines += [f"  - {cell(name)}: {cell(failure_text(g))}" for name, g in failing]
    if init_text(v):
        lines += [f"- init: {cell(init_text(v))}"]
    lines += [f"- robustness: {cell(robustness_text(v))}", ""]
    return lines


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
