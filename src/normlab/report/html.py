"""The HTML page: one self-contained file (inline CSS, plots as base64 PNG data URIs, no script).

Every piece of text that comes from a claim, a config or a record goes through
`esc` (html.escape), attributes included.
"""
from __future__ import annotations

import base64
import html
import logging
from typing import Any, Iterable

from normlab.report import plots
from normlab.report.outcome import DEPENDS, WHERE_JUDGED, outcome_counts, outcome_of, replicated
from normlab.report.format import (failure_groups, failure_text, init_text, interval_text, marks, robustness_text,
                                   seeds_used, first_line, fmt_info_value, fmt_settings, fmt_value, info_label,
                                   key_label,
                                   key_number, label, partial_note)
from normlab.report.figure import Plot, Section, Table
from normlab.report.plots import Png

log = logging.getLogger(__name__)

VERDICT_CLASS = {"holds": "holds", "does not hold": "fails", "inconclusive": "inconclusive"}
MAX_NESTING = 2  # deeper dicts in settings/details are written inline


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def verdict_class(verdict: dict | str | None) -> str:
    """The badge class of a verdict: a verdicts.json row by its typed outcome (`depends on init, width` is one
    outcome, `depends`), a part's or a total's word by itself."""
    kind = outcome_of(verdict).kind if isinstance(verdict, dict) else verdict
    if kind == DEPENDS:
        return "depends"
    return VERDICT_CLASS.get(str(kind), "unknown")


def badge(verdict: dict | str | None, small: bool = False) -> str:
    """A verdict's badge: a row (its outcome's text, classed by its kind) or a part's word."""
    size = " small" if small else ""
    text = outcome_of(verdict).text if isinstance(verdict, dict) and verdict.get("verdict") else \
        (verdict if isinstance(verdict, str) else None)
    return f'<span class="badge{size} {verdict_class(verdict)}">{esc(text or "not evaluated")}</span>'


# -- the page -----------------------------------------------------------------------------
def page(title: str, study_info: dict, verdicts: list[dict], claims: list[str], claim_info: dict[str, dict],
         claim_figures: dict[str, list], sections: list[Section], status: dict | None = None,
         failed_runs: list[dict] | None = None) -> str:
    by_id = {v["id"]: v for v in verdicts}
    note = partial_note(status or {})
    body = [
        f'<p class="partial" id="partial" role="alert">{esc(note)}</p>' if note else "",
        header(title, study_info),
        toc(claims, by_id, sections, bool(failed_runs)),
        verdict_section(verdicts, claim_info),  # above the fold: what a reader came for
        study_section(study_info),
        failed_section(failed_runs or []),
        '<section id="claims"><h2>Claims</h2>',
        *(claim_article(cid, by_id.get(cid), claim_info.get(cid) or {}, claim_figures.get(cid) or [])
          for cid in claims),
        "</section>",
        *(general_section(s) for s in sections),
        '<footer>Written by normlab. This page is self-contained: it loads nothing and runs no script.</footer>',
    ]
    head_title = f"[partial] {title}" if note else title
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{esc(head_title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n"
            + "\n".join(b for b in body if b) + "\n</main>\n</body>\n</html>\n")


def header(title: str, study_info: dict) -> str:
    """The title and one line (preset, runs, seeds): the verdict table follows at once, the study's settings
    come after it (`study_section`)."""
    facts = [f"{label(k)} {fmt_info_value(k, study_info[k])}" for k in ("preset", "n_runs", "seeds", "train_wall_s")
             if study_info.get(k) is not None]
    line = f'<p class="facts">{esc(" · ".join(facts))}</p>' if facts else ""
    return f'<header class="page-head"><p class="kicker">normlab study report</p><h1>{esc(title)}</h1>{line}</header>'


def study_section(study_info: dict) -> str:
    """The study's settings: preset, description, base config, counts, environment, thresholds."""
    scalars = {k: v for k, v in study_info.items() if not isinstance(v, dict)}
    tables = [kv_table(scalars, "Study", info=True)] if scalars else []
    tables += [kv_table(v, label(k).capitalize(), info=True) for k, v in study_info.items()
               if isinstance(v, dict) and v]
    if not tables:
        return ""
    return f'<section id="study"><h2>Study</h2><div class="info-grid">{"".join(tables)}</div></section>'



def toc(claims: list[str], by_id: dict[str, dict], sections: list[Section], failed: bool = False) -> str:
    chips = "".join(f'<a class="chip {verdict_class(by_id.get(c) or {})}" href="#{esc(c)}">'
                    f"{esc(c)}</a>" for c in claims)
    links = "".join(f'<a href="#{esc(s.id)}">{esc(s.title)}</a>' for s in sections)
    failed_link = '<a href="#failed-runs">Failed runs</a>' if failed else ""
    return (f'<nav class="toc"><a href="#verdicts">Verdicts</a>{failed_link}<span class="chips">{chips}</span>'
            f"{links}</nav>")


# -- verdicts -----------------------------------------------------------------------------
def verdict_section(verdicts: list[dict], claim_info: dict[str, dict]) -> str:
    counts = outcome_counts(verdicts)
    tally = " ".join(f'<span class="badge {verdict_class(name.replace(" " + WHERE_JUDGED, ""))}">{n} {esc(name)}'
                     '</span>' for name, n in counts.items() if n)
    design = any(v.get("design") for v in verdicts)
    rows = "".join(verdict_row(v, claim_info.get(v["id"]) or {}, design) for v in verdicts)
    extra = "<th>design seeds</th>" if design else ""
    return (f'<section id="verdicts"><h2>Verdicts</h2><p class="tally">{tally}</p>'
            '<div class="scroll"><table class="verdicts"><thead><tr><th>claim</th><th>title</th><th>verdict</th>'
            f'<th>key number</th><th class="num">seeds</th><th>init</th>{extra}</tr></thead><tbody>{rows}</tbody>'
            '</table></div></section>')


def design_cell(verdict: dict) -> str:
    """The design seeds' verdict of the same claim, and whether this one replicates it."""
    seen = verdict.get("design") or {}
    if not seen:
        return "<td>—</td>"
    return (f'<td>{esc(seen.get("verdict"))}'
            f'{" replicated" if replicated(verdict) else " not replicated"}</td>')


def verdict_row(verdict: dict, info: dict, design: bool = False) -> str:
    cid = esc(verdict["id"])
    parts = "".join(f'<li>{badge(p.get("verdict"), small=True)} {esc(p.get("name"))}</li>'
                    for p in verdict.get("parts") or [])
    return (f'<tr class="verdict {verdict_class(verdict)}" data-claim="{cid}" '
            f'data-verdict="{esc(outcome_of(verdict).text)}">'
            f'<td class="cid"><a href="#{cid}">{cid}</a></td><td>{esc(info.get("title", ""))}'
            f'{f"<ul class=parts>{parts}</ul>" if parts else ""}</td>'
            f'<td>{badge(verdict)}{fragile_mark(verdict)}{init_mark(verdict)}</td>'
            f'<td class="key">{esc(key_number(verdict.get("statistic"), verdict.get("value"), verdict.get("reading")))}'
            f'{interval_span(verdict.get("interval"))}</td>'
            f'<td class="num">{esc(fmt_value(seeds_used(verdict)))}</td>'
            f'<td class="init">{esc(verdict.get("init") or "—")}</td>{design_cell(verdict) if design else ""}</tr>')


def interval_span(interval) -> str:
    text = interval_text(interval)
    return f' <span class="interval">{esc(text)}</span>' if text else ""


def fragile_mark(verdict: dict) -> str:
    """A `fragile` badge, with what the robustness rerun gave, where the rerun changed the verdict."""
    if not verdict.get("fragile"):
        return ""
    again = (verdict.get("robustness") or {})
    note = f'at {fmt_settings(again.get("changed"))}: {again.get("verdict")}'
    return f' <span class="badge fragile" title="{esc(note)}">fragile</span>'


def init_mark(verdict: dict) -> str:
    """An `init-dependent` badge, with what the other init recipe gave, where it changed the verdict."""
    if "init-dependent" not in marks(verdict):
        return ""
    return f' <span class="badge fragile" title="{esc(init_text(verdict))}">init-dependent</span>'


def parts_table(verdict: dict) -> str:
    """A bundled claim's sub-verdicts: each with its number, interval and test."""
    rows = "".join(f'<tr><td>{esc(p.get("name"))}</td><td>{badge(p.get("verdict"), small=True)}</td>'
                   f'<td>{esc(p.get("summary") or fmt_value(p.get("value")))}</td><td>{esc(p.get("test"))}</td></tr>'
                   for p in verdict.get("parts") or [])
    if not rows:
        return ""
    return ('<div class="scroll block"><table class="data parts"><thead><tr><th>sub-verdict</th><th>verdict</th>'
            f'<th>number</th><th>test</th></tr></thead><tbody>{rows}</tbody></table></div>')


def failed_section(failed_runs: list[dict]) -> str:
    """Each run that failed: which one, how often it was tried, and why (the exception line)."""
    if not failed_runs:
        return ""
    rows = "".join(f'<tr class="status-failed"><td>{esc(r.get("id"))}</td><td>{esc(fmt_settings(r.get("settings")))}'
                   f'</td><td class="num">{esc(fmt_value(r.get("attempts")))}</td>'
                   f'<td>{esc(first_line(r.get("reason")))}</td></tr>' for r in failed_runs)
    return ('<section id="failed-runs"><h2>Failed runs</h2><div class="scroll"><table class="data failed">'
            '<thead><tr><th>run</th><th>settings</th><th>attempts</th><th>reason</th></tr></thead>'
            f"<tbody>{rows}</tbody></table></div></section>")


# -- one claim ----------------------------------------------------------------------------
def claim_article(cid: str, verdict: dict | None, info: dict, figures: list) -> str:
    verdict = verdict or {}
    parts = [f'<article class="claim {verdict_class(verdict)}" id="{esc(cid)}">',
             f'<div class="claim-head"><h3><span class="cid">{esc(cid)}</span> {esc(info.get("title", ""))}</h3>'
             f'{badge(verdict)}</div>']
    if info.get("statement"):
        parts.append(f'<blockquote class="statement">{esc(info["statement"])}</blockquote>')
    if verdict.get("summary"):
        parts.append(f'<p class="summary">{esc(verdict["summary"])}</p>')
    if verdict:
        parts.append(key_block(verdict))
        parts.append(parts_table(verdict))
        parts.append(evidence_block(verdict))
    tables = [_scroll(kv_table(verdict.get(k) or {}, k.capitalize()), "block")
              for k in ("settings", "details") if verdict.get(k)]
    if tables:
        parts.append(f'<div class="kv-grid">{"".join(tables)}</div>')
    parts.append(figure_grid(figures))
    parts.append('<p class="back"><a href="#verdicts">↑ back to the verdicts</a></p></article>')
    return "\n".join(p for p in parts if p)


def evidence_block(verdict: dict) -> str:
    """The paper the setting follows, the runs that did not train (rates, intervals) and the robustness rerun."""
    items = []
    paper = (verdict.get("settings") or {}).get("paper")
    if paper:
        items.append(f"<li><b>Paper:</b> {esc(paper)}</li>")
    groups = failure_groups(verdict.get("details") or {})
    failing = [(n, g) for n, g in groups if (g.get("n_diverged") or 0) + (g.get("n_failed_to_train") or 0)]
    if groups:
        rows = "".join(f"<li>{esc(n)}: {esc(failure_text(g))}</li>" for n, g in failing)
        items.append(f"<li><b>Did not train:</b> {len(failing)} of {len(groups)} configurations had runs that did "
                     f"not train{f'<ul>{rows}</ul>' if rows else ''}</li>")
    if verdict.get("test"):
        seeds = ", ".join(map(str, verdict.get("seeds") or []))
        items.append(f"<li><b>Test:</b> {esc(verdict['test'])}{f' (seeds {esc(seeds)})' if seeds else ''}</li>")
    if init_text(verdict):
        items.append(f"<li><b>Init:</b> {esc(init_text(verdict))}</li>")
    items.append(f"<li><b>Robustness:</b> {esc(robustness_text(verdict))}</li>")
    return f'<ul class="evidence">{"".join(items)}</ul>'


def key_block(verdict: dict) -> str:
    """The claim's reading of its number, with the statistic it comes from; or the statistic and its value."""
    value, reading = verdict.get("value"), verdict.get("reading")
    if reading:
        source = f'<span class="source">{esc(key_number(verdict.get("statistic"), value))}</span>'
        return (f'<p class="keynum"><span class="stat reading">{esc(reading)}</span>'
                f'{interval_span(verdict.get("interval"))}{source}'
                f'<span class="seeds">{esc(seeds_text(verdict.get("n_seeds")))}</span></p>')
    number = f'<span class="value">{esc(fmt_value(value))}</span>' if value is not None else '<span class="value">n/a</span>'
    return (f'<p class="keynum"><span class="stat">{esc(verdict.get("statistic") or "")}</span>{number}'
            f'{interval_span(verdict.get("interval"))}'
            f'<span class="seeds">{esc(seeds_text(verdict.get("n_seeds")))}</span></p>')


def seeds_text(n: Any) -> str:
    return "" if n is None else f"{fmt_value(n)} seed{'' if n == 1 else 's'}"


def figure_grid(figures: list) -> str:
    """A claim's figures at the card's width: one alone spans it, more share it two to a row."""
    size = plots.WIDE_SIZE if len(figures) == 1 else None
    items = [claim_figure(f, size) for f in figures]
    return f'<div class="figs">{"".join(items)}</div>' if items else ""


def claim_figure(spec: Any, size: tuple[float, float] | None = None) -> str:
    title = getattr(spec, "title", "") or "figure"
    if not (getattr(spec, "series", None) or getattr(spec, "matrix", None)):
        return f'<p class="fig-note">{esc(title)}: no data.</p>'
    try:
        png = plots.draw(spec, size=None if getattr(spec, "kind", "") == "heatmap" else size)
    except Exception as error:  # noqa: BLE001 - one bad figure must not lose the report
        log.exception("could not draw figure %r", title)
        return f'<p class="fig-error">Could not draw “{esc(title)}”: {esc(repr(error))}</p>'
    return figure(png, getattr(spec, "caption", ""), title)


def figure(png: Png, caption: str, alt: str) -> str:
    data = base64.b64encode(png.data).decode("ascii")
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return (f'<figure><img src="data:image/png;base64,{data}" width="{png.width}" height="{png.height}" '
            f'alt="{esc(alt)}">{cap}</figure>')


# -- key/value tables ---------------------------------------------------------------------
def kv_table(data: dict, caption: str, depth: int = 0, info: bool = False) -> str:
    rows = "".join(f'<tr><th>{esc(info_label(str(k), v) if info else key_label(str(k)))}</th>'
                   f"<td>{kv_cell(k, v, depth, info)}</td></tr>" for k, v in data.items())
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return f'<table class="kv">{cap}<tbody>{rows}</tbody></table>'


def kv_cell(key: Any, value: Any, depth: int, info: bool) -> str:
    if is_comparison(value):
        return _scroll(comparison_table([("", value)]))
    if isinstance(value, dict) and value and all(is_comparison(v) for v in value.values()):
        return _scroll(comparison_table(list(value.items())))
    if _is_keyed_rows(value):
        return _scroll(keyed_table(value))
    if isinstance(value, dict) and value and depth < MAX_NESTING:
        return kv_table(value, "", depth + 1, info)
    if _is_records(value):
        return _scroll(records_table(value))
    text = fmt_info_value(str(key), value) if info else fmt_value(value)
    return f'<span class="v">{esc(text)}</span>'


def _scroll(table: str, kind: str = "") -> str:
    """A wide table scrolls inside the card instead of running past its edge. A table nested in another's
    cell cannot be held by its own wrapper (the cell grows to it), so a claim's whole Settings and Details
    blocks scroll too (`block`)."""
    classes = f"scroll {kind}".strip()
    return f'<div class="{classes}">{table}</div>'


def is_comparison(value: Any) -> bool:
    """A `compare` result: two means, their difference, its 95 % interval."""
    return isinstance(value, dict) and {"diff", "mean_a", "mean_b", "ci95"} <= set(value)


def comparison_table(rows: list[tuple[str, dict]]) -> str:
    """One row per comparison, the sides named (`compare(..., sides=...)`): no "mean a / mean b" to decode."""
    body = []
    for name, c in rows:
        a, b = (c.get("sides") or ["first", "second"])[:2]
        lo, hi = c["ci95"]
        cells = [f"{fmt_value(c['mean_a'])} ({a})", f"{fmt_value(c['mean_b'])} ({b})",
                 f"{fmt_value(c['diff'])}", f"{fmt_value(lo)} to {fmt_value(hi)}", fmt_value(c["bar"])]
        label_cell = f"<th>{esc(key_label(str(name)))}</th>" if name else ""
        body.append("<tr>" + label_cell + "".join(f"<td>{esc(x)}</td>" for x in cells) + "</tr>")
    head = ("<th></th>" if any(n for n, _ in rows) else "") + "".join(
        f"<th>{esc(h)}</th>" for h in ("mean val loss, first", "mean val loss, second", "first − second (nats)",
                                       "95 % CI of the difference", "needed to call it (nats)"))
    return f'<table class="rows"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _is_keyed_rows(value: Any) -> bool:
    """A dict of flat dicts (per scheme, per depth, ...): a table with a row per key, a column per inner key."""
    return (isinstance(value, dict) and 1 < len(value) <= 40 and all(isinstance(v, dict) and v for v in value.values())
            and all(not isinstance(x, dict) for v in value.values() for x in v.values()))


ROW_NAMED = {"setting"}  # a group's own setting: in a keyed table its row's label already names it


def keyed_table(value: dict) -> str:
    columns = [k for k in dict.fromkeys(k for row in value.values() for k in row) if k not in ROW_NAMED]
    head = "<th></th>" + "".join(f"<th>{esc(key_label(str(c)))}</th>" for c in columns)
    body = "".join(f"<tr><th>{esc(key_label(str(k)))}</th>"
                   + "".join(f"<td>{esc(fmt_value(row.get(c)))}</td>" for c in columns) + "</tr>"
                   for k, row in value.items())
    return f'<table class="rows"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


LONG_CELL = 60  # characters: a longer cell (a reason, a path) wraps rather than widening its table


def _td(text: str) -> str:
    return f'<td class="long">{esc(text)}</td>' if len(text) > LONG_CELL else f"<td>{esc(text)}</td>"


def _is_records(value: Any) -> bool:
    """A short list of flat dicts: drawn as a table with a column per key."""
    return (isinstance(value, list) and 0 < len(value) <= 40 and all(isinstance(v, dict) for v in value)
            and all(not isinstance(x, (dict, list)) for v in value for x in v.values()))


def records_table(rows: list[dict]) -> str:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(_td(fmt_value(row.get(c))) for c in columns) + "</tr>" for row in rows)
    return f'<table class="rows"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


# -- general sections ---------------------------------------------------------------------
def general_section(section: Section) -> str:
    parts = [f'<section class="general" id="{esc(section.id)}"><h2>{esc(section.title)}</h2>']
    if section.intro:
        parts.append(f'<p class="intro">{esc(section.intro)}</p>')
    parts += [general_plot(p) for p in section.plots]
    if section.table is not None:
        table = data_table(section.table)
        parts.append(f"<details><summary>Show the table</summary>{table}</details>" if section.collapsed else table)
    parts.append("</section>")
    return "\n".join(parts)


def general_plot(plot: Plot) -> str:
    """A section's plot, drawn here (small multiples, or one figure); a failure leaves a note, not a lost report."""
    error = plot.error or ("" if plot.figures else "no data")
    if not error:
        try:
            png = (plots.draw(plot.figures[0], **plot.single) if plot.single is not None else
                   plots.draw_grid(plot.figures, **(plot.grid or {})))
        except Exception as e:  # noqa: BLE001 - one bad plot must not lose the report
            log.exception("could not draw a plot of the report's general sections")
            error = repr(e)
    if error:
        return f'<p class="fig-error">Could not draw this section: {esc(error)}</p>'
    return f'<div class="wide">{figure(png, plot.caption, plot.caption or "plot")}</div>'


def data_table(table: Table) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in table.headers)
    classes: Iterable[str] = table.classes or [""] * len(table.rows)
    body = "".join(f'<tr class="{esc(c)}">' + "".join(f"<td>{esc(x)}</td>" for x in row) + "</tr>"
                   for row, c in zip(table.rows, classes))
    return f'<div class="scroll"><table class="data"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


CSS = """
:root { --ink: #1f2328; --muted: #59636e; --line: #d8dee4; --bg: #f5f6f8; --card: #ffffff;
  --accent: #0b5cad; --holds: #1a7f37; --holds-bg: #dafbe1; --fails: #b42318; --fails-bg: #fee4e2;
  --inc: #8a5a00; --inc-bg: #fff1c2; --unk: #4b5563; --unk-bg: #e5e7eb; }
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { margin: 0; background: var(--bg); color: var(--ink); line-height: 1.5; font-size: 15px;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 28px 24px 48px; }
h1 { font-size: 30px; line-height: 1.2; margin: 2px 0 16px; }
h2 { font-size: 22px; margin: 40px 0 12px; padding-bottom: 6px; border-bottom: 2px solid var(--line); }
h3 { font-size: 18px; margin: 0; line-height: 1.3; }
a { color: var(--accent); text-decoration: none; }
a:hover { text-decoration: underline; }
code, .key, .value, .num, .v, table.data td, table.rows td { font-variant-numeric: tabular-nums; }
.kicker { margin: 0; color: var(--muted); text-transform: uppercase; letter-spacing: .08em; font-size: 12px;
  font-weight: 600; }
.page-head { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 20px 24px; }
.info-grid { display: flex; flex-wrap: wrap; gap: 12px 40px; align-items: flex-start; }
.toc { position: sticky; top: 0; z-index: 5; display: flex; flex-wrap: wrap; gap: 6px 14px; align-items: center;
  background: rgba(245, 246, 248, .96); border-bottom: 1px solid var(--line); padding: 10px 2px;
  margin: 16px 0 0; font-size: 13.5px; }
.chips { display: inline-flex; flex-wrap: wrap; gap: 4px; }
.chip { display: inline-block; min-width: 34px; text-align: center; padding: 1px 6px; border-radius: 999px;
  font-size: 12px; font-weight: 600; border: 1px solid transparent; }
.badge { display: inline-block; white-space: nowrap; padding: 2px 10px; border-radius: 999px; font-size: 13px;
  font-weight: 600; border: 1px solid transparent; }
.holds.badge, .holds.chip { color: var(--holds); background: var(--holds-bg); border-color: #aceebb; }
.fails.badge, .fails.chip { color: var(--fails); background: var(--fails-bg); border-color: #fbc4bd; }
.inconclusive.badge, .inconclusive.chip { color: var(--inc); background: var(--inc-bg); border-color: #f2d67e; }
.unknown.badge, .unknown.chip { color: var(--unk); background: var(--unk-bg); border-color: #d1d5db; }
.tally { display: flex; gap: 8px; flex-wrap: wrap; margin: 0 0 12px; }
table { border-collapse: collapse; }
table.verdicts { width: 100%; background: var(--card); border: 1px solid var(--line); border-radius: 10px;
  overflow: hidden; }
table.verdicts th { text-align: left; font-size: 12.5px; text-transform: uppercase; letter-spacing: .04em;
  color: var(--muted); background: #eef1f4; padding: 8px 12px; }
table.verdicts td { padding: 9px 12px; border-top: 1px solid var(--line); vertical-align: top; }
table.verdicts tr.verdict:hover td { background: #f8fafc; }
table.verdicts td.cid { font-weight: 700; white-space: nowrap; }
table.verdicts td.key { color: #333d47; font-size: 14px; }
.num { text-align: right; }
article.claim { background: var(--card); border: 1px solid var(--line); border-left: 5px solid var(--unk);
  border-radius: 10px; padding: 18px 22px 10px; margin: 0 0 22px; scroll-margin-top: 96px; }
article.claim.holds { border-left-color: var(--holds); }
article.claim.fails { border-left-color: var(--fails); }
article.claim.inconclusive { border-left-color: #d4a017; }
.claim-head { display: flex; justify-content: space-between; gap: 16px; align-items: flex-start; }
.claim-head .cid { color: var(--muted); margin-right: 6px; }
.statement { margin: 12px 0 8px; padding: 8px 14px; border-left: 3px solid var(--line); color: #333d47;
  background: #fafbfc; font-style: italic; }
.sources { margin: 0 0 8px; color: var(--muted); font-size: 13px; }
.summary { margin: 8px 0; font-size: 15.5px; }
.keynum { display: flex; flex-wrap: wrap; gap: 6px 14px; align-items: baseline; margin: 8px 0 12px;
  padding: 8px 12px; background: #f3f6fa; border-radius: 8px; }
.keynum .stat { color: #333d47; }
.keynum .reading { font-size: 17px; font-weight: 650; color: #1d2530; }
.keynum .source { color: var(--muted); font-size: 13px; }
/* a heading jumped to lands below the sticky contents bar; on a narrow screen the bar does not stick */
[id] { scroll-margin-top: 110px; }
@media (max-width: 900px) { .toc { position: static; } [id] { scroll-margin-top: 8px; } }
.keynum .value { font-size: 20px; font-weight: 700; }
.keynum .seeds { color: var(--muted); font-size: 13px; margin-left: auto; }
.kv-grid { display: flex; flex-wrap: wrap; gap: 12px 28px; align-items: flex-start; margin: 4px 0 8px; }
table.kv { font-size: 13px; margin: 6px 0; }
table.kv caption { text-align: left; font-weight: 700; font-size: 12px; text-transform: uppercase;
  letter-spacing: .05em; color: var(--muted); padding-bottom: 4px; }
table.kv th { text-align: left; font-weight: 500; color: var(--muted); padding: 2px 14px 2px 0;
  vertical-align: top; white-space: nowrap; }
table.kv td { padding: 2px 0; vertical-align: top; }
table.kv table.kv { margin: 0; }
table.rows, table.data { font-size: 12.5px; }
table.rows th, table.data th { text-align: left; background: #eef1f4; padding: 3px 8px; font-weight: 600; }
table.rows td, table.data td { padding: 2px 8px; border-top: 1px solid #edf0f2; white-space: nowrap; }
table.rows td.long { white-space: normal; min-width: 36ch; }
table.data tr.status-diverged td, table.data tr.status-failed_to_train td { color: var(--fails); }
.badge.fragile { background: #f3e8ff; color: #6b21a8; }
.badge.depends { background: #e0f2fe; color: #075985; }
.page-head .facts { color: var(--muted); margin: 4px 0 0; }
.badge.small { padding: 0 7px; font-size: 11.5px; }
ul.parts { list-style: none; margin: 4px 0 0; padding: 0; font-size: 12.5px; color: #333d47; }
ul.parts li { margin: 2px 0; }
.interval { color: var(--muted); font-size: 12.5px; white-space: nowrap; }
table.verdicts td.init { font-size: 12.5px; color: var(--muted); }
table.data tr.status-failed td { color: var(--unk); font-style: italic; }
.figs { display: grid; grid-template-columns: repeat(auto-fit, minmax(440px, 1fr)); gap: 10px 18px;
  margin: 12px 0 4px; }
figure { margin: 0; text-align: center; }
.figs figure img { width: 100%; }
figure img { max-width: 100%; height: auto; border: 1px solid #eceff2; border-radius: 6px; background: #fff; }
figcaption { text-align: left; font-size: 13px; color: var(--muted); margin: 4px 2px 0; }
.back { text-align: right; font-size: 12.5px; margin: 6px 0 0; }
section.general { scroll-margin-top: 96px; }
.intro { color: #333d47; margin: 0 0 10px; }
.wide { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 14px;
  margin: 0 0 14px; }
.wide img { border: 0; }
.scroll { display: inline-block; max-width: 100%; overflow-x: auto; background: var(--card);
  border: 1px solid var(--line); border-radius: 8px; }
.scroll.block { border: 0; border-radius: 0; min-width: 0; }
details { margin: 8px 0; }
summary { cursor: pointer; color: var(--accent); font-weight: 600; }
.fig-note { color: var(--muted); font-style: italic; }
.fig-error { color: var(--fails); background: var(--fails-bg); padding: 6px 10px; border-radius: 6px; }
.partial { margin: 0 0 16px; padding: 12px 18px; border: 2px solid #d4a017; border-radius: 10px;
  background: var(--inc-bg); color: var(--inc); font-size: 18px; font-weight: 700; }
table.data.failed td { white-space: normal; font-style: normal; }
footer { margin-top: 48px; color: var(--muted); font-size: 12.5px; text-align: center; }
@media (max-width: 720px) { .figs { grid-template-columns: 1fr; } main { padding: 16px 10px; }
  .claim-head { flex-direction: column; } }
"""
