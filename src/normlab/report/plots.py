"""Draw `Figure` specs (line, bar, heatmap) to PNG bytes with matplotlib's Agg canvas.

pyplot is never imported: each plot is a `matplotlib.figure.Figure` on its own Agg
canvas, so the report neither switches the caller's backend nor keeps figures alive.
A spec is read by attribute only (title, xlabel, ylabel, series, kind, logx, logy,
matrix, rows, cols), so any object of that shape can be drawn. Kinds: `line`, `bar` (bars
from 0, for quantities whose ratio matters: times), `dot` (a point and its error bar per
category on an axis fitted to the data, for differences of a few hundredths of a nat that
a bar from 0 would hide) and `heatmap`.

Lines that lie on top of each other stay visible: every series has its own marker, and a
series that a later one covers is drawn wider underneath it.
"""
from __future__ import annotations

import io
import math
import re
import textwrap
from dataclasses import dataclass
from typing import Any, Sequence

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LogNorm, Normalize, to_rgb
from matplotlib.figure import Figure as MplFigure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, MaxNLocator, NullFormatter, NullLocator

from normlab.nn.norms import NORMS
from normlab.nn.schemes import SCHEMES
from normlab.report.format import fmt_value

DPI = 144  # PNG resolution; shown at 96 CSS px per inch, so sharp on high-density screens
CSS_DPI = 96
SINGLE_SIZE = (5.4, 3.3)  # inches: a claim figure (two side by side on a wide page)
WIDE_SIZE = (10.8, 3.7)  # inches: a claim's only figure, the card's width (1,180 px page less its padding)
PANEL_SIZE = (3.7, 2.75)  # inches: one panel of a small-multiples grid
MAX_ANNOTATED_CELLS = 400
LOG_COLOR_SPREAD = 100  # a heatmap whose positive values span more than this ratio is coloured on a log scale

# one colour per placement scheme everywhere in the report, so "post" is always red
SCHEME_COLORS = {name: scheme.facts.color for name, scheme in SCHEMES.items()}  # each scheme's own (nn/schemes/)
CYCLE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
         "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173"]
NORM_STYLES = {name: norm.linestyle for name, norm in NORMS.items()}  # each normalizer's own (nn/norms.py)
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "*", "p"]  # one per series: overlaps stay visible
WIDER = 0.55  # a covered series is drawn this much wider (and its markers larger) per series on top of it
OVERLAP = 0.015  # two series closer than this fraction of the axis's range at every shared x count as on top
TEXT_EM = 0.58  # DejaVu Sans' mean character width in ems: how many characters a title's width holds

STYLE = {
    "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 9.5,
    "xtick.labelsize": 9, "ytick.labelsize": 9, "axes.spines.top": False, "axes.spines.right": False,
    "axes.grid": True, "grid.color": "#e6e6e6", "grid.linewidth": 0.6, "axes.axisbelow": True,
    "axes.edgecolor": "#888888", "lines.linewidth": 1.5, "lines.markersize": 3.5,
    "font.family": "DejaVu Sans",  # ships with matplotlib: no system font needed
}


@dataclass
class Png:
    """PNG bytes and the size, in CSS pixels, they are meant to be shown at."""

    data: bytes
    width: int
    height: int


def draw(spec: Any, *, size: tuple[float, float] | None = None, **style: Any) -> Png:
    """One spec as one plot; a heatmap is sized to its rows and columns unless `size` is given."""
    with matplotlib.rc_context(STYLE):
        return _to_png(build(spec, size=size, **style))


def build(spec: Any, *, size: tuple[float, float] | None = None, **style: Any) -> MplFigure:
    """The matplotlib figure `draw` renders (on its own Agg canvas, laid out when drawn)."""
    size = size or (heatmap_size(spec) if getattr(spec, "kind", "") == "heatmap" else SINGLE_SIZE)
    with matplotlib.rc_context(STYLE):
        fig = MplFigure(figsize=size, layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        _draw_on(ax, spec, colors_for(spec), wrap=_chars(size[0] - 0.4, STYLE["axes.titlesize"]),
                 ywrap=_chars(size[1] - 1.0, STYLE["axes.labelsize"]), **style)
        _legend(ax, fig, [ax], shared=False, order=_labels(spec))
        return fig


def heatmap_size(spec: Any) -> tuple[float, float]:
    """Inches for a heatmap: room for its row labels, its columns and a readable number in each cell."""
    rows, cols = len(getattr(spec, "rows", None) or [0]), len(getattr(spec, "cols", None) or [0])
    label = max((len(str(r)) for r in getattr(spec, "rows", None) or [""]), default=0)
    return (min(WIDE_SIZE[0], 1.6 + 0.075 * label + 0.8 * cols), min(9.0, 1.5 + 0.3 * rows))


def _chars(width_in: float, fontsize: float) -> int:
    """Characters of text at `fontsize` that fit in `width_in` inches."""
    return max(16, int(width_in * 72 / (fontsize * TEXT_EM)))


def draw_grid(specs: Sequence[Any], *, ncols: int = 3, panel_size: tuple[float, float] = PANEL_SIZE,
              title: str | None = None, colors: dict[str, str] | None = None, **style: Any) -> Png:
    """Small multiples: one panel per spec, one legend for all (series with equal labels share a colour)."""
    ncols = max(1, min(ncols, len(specs)))
    nrows = math.ceil(len(specs) / ncols)
    with matplotlib.rc_context(STYLE):
        fig = MplFigure(figsize=(panel_size[0] * ncols, panel_size[1] * nrows + 0.4), layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        colors = colors or colors_for(*specs)
        for ax, spec in zip(axes, specs):
            _draw_on(ax, spec, colors, wrap=_chars(panel_size[0] - 0.5, STYLE["axes.titlesize"]),
                     ywrap=_chars(panel_size[1] - 0.9, STYLE["axes.labelsize"]), **style)
        for ax in axes[len(specs):]:
            ax.set_visible(False)
        if title:
            fig.suptitle(title, fontsize=10.5, fontweight="bold")
        _legend(axes[0], fig, axes[:len(specs)], shared=True, order=_labels(*specs))
        return _to_png(fig)


def balanced_columns(n: int, most: int) -> int:
    """Columns for n panels, at most `most`, with the last row as full as possible (5 -> 3 + 2, not 4 + 1)."""
    rows = math.ceil(n / most) if n else 1
    return max(1, math.ceil(n / rows))


def colors_for(*specs: Any) -> dict[str, str]:
    """Series label -> colour. When every label starts with a scheme name, the scheme's colour ("post" is
    always red), in shades from light to full when one scheme has several series ("pre, L=2" … "pre, L=16")."""
    labels = _labels(*specs)
    heads = [_head(label) for label in labels]
    if not (labels and all(h in SCHEME_COLORS for h in heads)):
        return {label: CYCLE[i % len(CYCLE)] for i, label in enumerate(labels)}
    out = {}
    for head in dict.fromkeys(heads):
        mine = [label for label, h in zip(labels, heads) if h == head]
        for k, label in enumerate(mine):
            out[label] = _shade(SCHEME_COLORS[head], 0.6 * (len(mine) - 1 - k) / max(1, len(mine) - 1))
    return out


def _shade(color: str, toward_white: float) -> str:
    """`color` mixed with white: 0 keeps it, 1 is white."""
    r, g, b = (c + (1 - c) * toward_white for c in to_rgb(color))
    return f"#{round(255 * r):02x}{round(255 * g):02x}{round(255 * b):02x}"


def _labels(*specs: Any) -> list[str]:
    return list(dict.fromkeys(s.label for spec in specs for s in (getattr(spec, "series", None) or [])))


def _head(label: str) -> str:
    """The first word of a label, lower case: "Post-LN (warmup 0)" -> "post"."""
    words = re.split(r"[^0-9a-zA-Z]+", str(label).strip())
    return words[0].lower() if words else ""


# -- one axes ----------------------------------------------------------------------------
def _draw_on(ax, spec: Any, colors: dict[str, str], *, wrap: int, ywrap: int = 40, **style: Any) -> None:
    """Titles and y labels wrap to the room they have, so none is clipped at the figure's edge."""
    kind = getattr(spec, "kind", "line") or "line"
    {"line": _line, "bar": _bar, "dot": _dot, "heatmap": _heatmap}.get(kind, _line)(ax, spec, colors, **style)
    ax.set_title(_wrap(spec.title, wrap))
    ax.set_xlabel(spec.xlabel or "")
    ax.set_ylabel(_wrap(spec.ylabel, ywrap))


def _wrap(text: str | None, width: int) -> str:
    return "\n".join(textwrap.wrap(text or "", width, break_on_hyphens=False))


def _line(ax, spec: Any, colors: dict[str, str], *, linestyles: dict[str, Any] | None = None,
          markers: dict[str, str | None] | None = None, ylim: tuple[float, float] | None = None,
          alpha: float = 1.0, mark_last: bool = False, widen: bool = True, **_: Any) -> None:
    """mark_last: a series' marker at its last point only (how a run ended), not at every point. widen: draw a
    covered series wider (off where overlaps are expected, as seeds of one configuration)."""
    series = list(spec.series or [])
    numeric = all(_is_number(x) for s in series for x in s.x)
    categories = [] if numeric else list(dict.fromkeys(str(x) for s in series for x in s.x))
    order = list(colors)
    covered = _covered(series, log=bool(getattr(spec, "logy", False))) if widen else [0] * len(series)
    for s, under in zip(series, covered):
        positions = s.x if numeric else [categories.index(str(v)) for v in s.x]
        x = np.array([_num(v) for v in positions], float)
        y = np.array([_num(v) for v in s.y], float)
        rank = order.index(s.label) if s.label in order else len(order)
        style = {"color": colors.get(s.label), "label": s.label, "linestyle": (linestyles or {}).get(s.label, "-"),
                 "marker": (markers or {}).get(s.label, MARKERS[rank % len(MARKERS)] if len(x) <= 24 else None),
                 "alpha": alpha, "linewidth": STYLE["lines.linewidth"] * (1 + WIDER * min(under, 3)),
                 "markersize": STYLE["lines.markersize"] * (1 + WIDER * min(under, 3))}
        if mark_last and style["marker"] and len(x):
            style.update(markevery=[len(x) - 1], markersize=7, markerfacecolor="none", markeredgewidth=1.5)
        if s.yerr is not None and any(e is not None for e in s.yerr):
            ax.errorbar(x, y, yerr=np.array([_num(e) for e in s.yerr], float), capsize=2, elinewidth=0.8, **style)
        else:
            ax.plot(x, y, **style)
    if not numeric:
        _category_ticks(ax, categories)
    elif series and all(isinstance(x, int) for s in series for x in s.x):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 5, 10]))
    _scales(ax, spec, numeric)
    if numeric:
        _swept_ticks(ax, sorted({_num(x) for s in series for x in s.x if _num(x) == _num(x)}))
    if ylim:
        ax.set_ylim(*ylim)


def _covered(series: list, *, log: bool) -> list[int]:
    """For each series, how many later series lie on top of it (at every x they share, within OVERLAP of the
    axis's range): it is drawn that much wider, so a line hidden under another shows as its outline."""
    points = []
    for s in series:
        pts = {}
        for x, y in zip(s.x, s.y):
            v = _num(y)
            if math.isfinite(v) and (not log or v > 0):
                pts[_num(x) if _is_number(x) else str(x)] = math.log10(v) if log else v
        points.append(pts)
    values = [v for pts in points for v in pts.values()]
    span = (max(values) - min(values)) if values else 0.0
    if not span:
        return [0] * len(series)
    out = []
    for i, mine in enumerate(points):
        def on_top(other: dict) -> bool:  # along most of its length, not where two lines merely cross
            shared = mine.keys() & other.keys()
            return (len(shared) >= min(2, len(mine)) and 2 * len(shared) >= len(mine)
                    and all(abs(mine[k] - other[k]) <= OVERLAP * span for k in shared))
        out.append(sum(on_top(other) for other in points[i + 1:]))
    return out


def _dot(ax, spec: Any, colors: dict[str, str], **_: Any) -> None:
    """Categories on x; per series a point with its error bar, side by side, and its value written beside it.
    The y axis fits the data rather than starting at 0: the differences are the point."""
    categories, placed = _categorical(spec, spread=0.5)
    missing = []
    for i, s, pos, y, err in placed:
        ax.errorbar(pos, y, yerr=err, fmt=MARKERS[i % len(MARKERS)], color=colors.get(s.label), label=s.label,
                    capsize=3, markersize=6.5, elinewidth=1.0, linestyle="none")
        for p, v in zip(pos, y):
            if v == v:
                ax.annotate(fmt_value(float(v)), (p, v), xytext=(7, 0), textcoords="offset points", va="center",
                            fontsize=8.5, color="#333333")
            else:
                missing.append(p)
    _category_ticks(ax, categories)
    ax.set_xlim(-0.6, len(categories) - 0.4)
    ax.grid(axis="x", visible=False)
    bottom = ax.get_ylim()[0]
    for p in missing:  # a category with no value says so rather than leaving a hole
        ax.annotate("no value", (p, bottom), xytext=(0, 4), textcoords="offset points", ha="center",
                    fontsize=8.5, color="#888888")
    _scales(ax, spec, numeric=False)


def _categorical(spec: Any, spread: float) -> tuple[list[str], list[tuple]]:
    """The categories on x, and per series (index, series, x positions side by side within `spread`, values,
    error bars or None), a value missing from a category as NaN."""
    series = list(spec.series or [])
    categories = list(dict.fromkeys(str(x) for s in series for x in s.x))
    step = spread / max(1, len(series))
    placed = []
    for i, s in enumerate(series):
        values = dict(zip((str(x) for x in s.x), s.y))
        errors = dict(zip((str(x) for x in s.x), s.yerr)) if s.yerr is not None else {}
        pos = np.arange(len(categories)) + (i - (len(series) - 1) / 2) * step
        y = np.array([_num(values.get(c)) for c in categories], float)
        err = np.array([_num(errors.get(c)) for c in categories], float) if errors else None
        placed.append((i, s, pos, y, err))
    return categories, placed


MAX_SWEPT_TICKS = 8


def _swept_ticks(ax, values: list[float]) -> None:
    """A sweep's x values (learning rates, depths) as the axis's ticks, labelled plainly, when there are few:
    a reader reads off 3e-4 … 3e-2 or 2, 4, 8, 16 rather than the powers of ten between them."""
    if not 0 < len(values) <= MAX_SWEPT_TICKS:
        return
    ax.xaxis.set_major_locator(FixedLocator(values))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt_value(float(v))))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_minor_locator(NullLocator())


def _bar(ax, spec: Any, colors: dict[str, str], **_: Any) -> None:
    categories, placed = _categorical(spec, spread=0.8)
    width = 0.8 / max(1, len(placed))
    for _i, s, pos, y, err in placed:
        ax.bar(pos, y, width * 0.92, yerr=err, capsize=2, label=s.label, color=colors.get(s.label),
               error_kw={"elinewidth": 0.8})
    _category_ticks(ax, categories)
    ax.grid(axis="x", visible=False)
    _scales(ax, spec, numeric=False)


def _heatmap(ax, spec: Any, colors: dict[str, str], *, cmap: str = "viridis", vmin: float | None = None,
             vmax: float | None = None, **_: Any) -> None:
    """A matrix with its values written in the cells (or the spec's own `cell_text`, if it has one). Its colour
    scale is logarithmic where every value is positive and they span more than LOG_COLOR_SPREAD (unless the
    caller fixes the range)."""
    matrix = np.array([[_num(v) for v in row] for row in (spec.matrix or [])], float)
    if matrix.size == 0:
        matrix = np.full((1, 1), np.nan)
    colormap = matplotlib.colormaps[cmap].with_extremes(bad="#eeeeee")
    values = matrix[np.isfinite(matrix)]
    spread = (vmin is None and vmax is None and values.size > 0 and values.min() > 0
              and values.max() / values.min() > LOG_COLOR_SPREAD)  # a caller's fixed range stays linear
    norm = LogNorm(values.min(), values.max()) if spread else Normalize(vmin, vmax)
    image = ax.imshow(np.ma.masked_invalid(matrix), cmap=colormap, norm=norm, aspect="auto")
    bar = ax.figure.colorbar(image, ax=ax, shrink=0.9, pad=0.02)
    if spread:  # 1.7e-4 and 0.4 both readable, not all but one cell at the bottom of a linear scale
        _plain_log_ticks(bar.ax.yaxis, (norm.vmin, norm.vmax))
    ax.set_xticks(range(matrix.shape[1]), (spec.cols or [str(i) for i in range(matrix.shape[1])]))
    ax.set_yticks(range(matrix.shape[0]), (spec.rows or [str(i) for i in range(matrix.shape[0])]))
    ax.grid(False)
    ax.spines[:].set_visible(False)
    if matrix.size <= MAX_ANNOTATED_CELLS:
        _annotate(ax, image, matrix, getattr(spec, "cell_text", None))


def _annotate(ax, image, matrix: np.ndarray, cell_text: list[list[str]] | None) -> None:
    for (i, j), value in np.ndenumerate(matrix):
        text = cell_text[i][j] if cell_text else ("" if math.isnan(value) else fmt_value(float(value)))
        if not text:
            continue
        r, g, b = to_rgb(image.cmap(image.norm(value))) if not math.isnan(value) else (0.93, 0.93, 0.93)
        dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.55
        ax.text(j, i, text, ha="center", va="center", fontsize=9, color="white" if dark else "#222222")


def _category_ticks(ax, categories: list[str]) -> None:
    long = sum(len(c) for c in categories) > 48
    ax.set_xticks(range(len(categories)), categories, rotation=30 if long else 0, ha="right" if long else "center")


def _scales(ax, spec: Any, numeric: bool) -> None:
    """Log axes only where the data allow them (positive values)."""
    lines = [line.get_xydata() for line in ax.get_lines()]
    xs = {float(x) for d in lines if len(d) for x in d[:, 0] if x > 0}
    if getattr(spec, "logx", False) and numeric and len(xs) > 1:
        ax.set_xscale("log")
        _plain_log_ticks(ax.xaxis, ax.get_xlim())
    ys = [np.asarray(p.get_height()) for p in ax.patches] + [d[:, 1] for d in lines if len(d)]
    if getattr(spec, "logy", False) and any((np.nan_to_num(y) > 0).any() for y in ys):
        ax.set_yscale("log")
        _plain_log_ticks(ax.yaxis, ax.get_ylim())


LOG_MANTISSAS = ((1,), (1, 3), (1, 2, 5), (1, 2, 3, 5), (1, 1.5, 2, 3, 4, 5, 7))
MIN_LOG_TICKS = 4


def _plain_log_ticks(axis, limits: tuple[float, float]) -> None:
    """Labelled ticks at 0.05, 0.1, 0.2 rather than 5×10⁻²: the sparsest of 1 | 1, 3 | 1, 2, 5 | … per decade
    that labels at least MIN_LOG_TICKS values in view, so a range of less than a decade is still readable."""
    plain = FuncFormatter(lambda v, _: fmt_value(float(v)))
    lo, hi = sorted(limits)
    if not (lo > 0 and math.isfinite(hi)):
        axis.set_major_formatter(plain)
        return
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    for mantissas in LOG_MANTISSAS:
        ticks = [float(f"{m}e{e}") for e in decades for m in mantissas if lo <= float(f"{m}e{e}") <= hi]
        if len(ticks) >= MIN_LOG_TICKS:
            break
    if len(ticks) > 2 * MAX_SWEPT_TICKS:  # many decades: every other power of ten
        ticks = ticks[::math.ceil(len(ticks) / MAX_SWEPT_TICKS)]
    if len(ticks) < MIN_LOG_TICKS - 1:  # a sliver of a decade (0.031–0.036): evenly spaced plain ticks instead
        axis.set_major_locator(MaxNLocator(nbins=5))
    else:
        axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(plain)
    axis.set_minor_locator(LogLocator(subs="auto"))
    axis.set_minor_formatter(NullFormatter())


def _legend(ax, fig, axes, *, shared: bool, order: list[str]) -> None:
    """One entry per label, in the order the series were given."""
    entries: dict[str, Any] = {}
    for a in axes:
        for handle, text in zip(*a.get_legend_handles_labels()):
            if not text.startswith("_"):
                entries.setdefault(text, handle)
    rank = {text: i for i, text in enumerate(order)}
    entries = dict(sorted(entries.items(), key=lambda kv: rank.get(kv[0], len(rank))))
    if len(entries) < 2 and not (shared and entries):
        return
    longest = max(len(text) for text in entries)
    if shared or longest > 24:  # long labels beside a plot would squeeze it: they go below, in columns
        room = fig.get_size_inches()[0] * 72 / (STYLE["legend.fontsize"] * TEXT_EM)  # characters across
        per_row = max(1, min(len(entries), 6, int(room // (longest + 5))))
        legend = fig.legend(entries.values(), entries.keys(), loc="outside lower center", ncols=per_row,
                            frameon=False)
    elif len(entries) <= 4:
        legend = ax.legend(entries.values(), entries.keys(), frameon=False)
    else:
        legend = ax.legend(entries.values(), entries.keys(), loc="upper left", bbox_to_anchor=(1.01, 1.0),
                           frameon=False)
    for line in legend.get_lines():  # a covered series' width is for the plot, not for its legend entry
        line.set_linewidth(min(line.get_linewidth(), STYLE["lines.linewidth"]))
        line.set_markersize(min(line.get_markersize(), 7))


def _to_png(fig: MplFigure) -> Png:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, facecolor="white", metadata={"Software": None})
    width, height = fig.get_size_inches()
    return Png(buffer.getvalue(), round(width * CSS_DPI), round(height * CSS_DPI))


def _is_number(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float, np.number)) and not isinstance(value, bool))


def _num(value: Any) -> float:
    """None and anything non-numeric become NaN (a gap in a line, a missing bar)."""
    try:
        return float(value) if value is not None else math.nan
    except (TypeError, ValueError):
        return math.nan
