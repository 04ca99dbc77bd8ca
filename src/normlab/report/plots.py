"""Draw `Figure` specs (line, bar, heatmap) to PNG bytes with matplotlib's Agg canvas.

pyplot is never imported: each plot is a `matplotlib.figure.Figure` on its own Agg
canvas, so the report neither switches the caller's backend nor keeps figures alive.
A spec is read by attribute only (title, xlabel, ylabel, series, kind, logx, logy,
matrix, rows, cols), so any object of that shape can be drawn.
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
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure as MplFigure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, MaxNLocator, NullFormatter, NullLocator

from normlab.report.format import fmt_value

DPI = 144  # PNG resolution; shown at 96 CSS px per inch, so sharp on high-density screens
CSS_DPI = 96
SINGLE_SIZE = (5.4, 3.3)  # inches: a claim figure (two side by side on a wide page)
PANEL_SIZE = (3.7, 2.75)  # inches: one panel of a small-multiples grid
MAX_ANNOTATED_CELLS = 400

# one colour per placement scheme everywhere in the report, so "post" is always red
SCHEME_COLORS = {
    "post": "#d62728", "pre": "#1f77b4", "peri": "#2ca02c", "deepnorm": "#ff7f0e", "sandwich": "#9467bd",
    "mix": "#8c564b", "lns": "#e377c2", "subln": "#17becf", "admin": "#bcbd22",
}
CYCLE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
         "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173"]
NORM_STYLES = {"layernorm": "-", "rmsnorm": "--", "scalenorm": ":", "dyt": "-.", "none": (0, (1, 1))}

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


def draw(spec: Any, *, size: tuple[float, float] = SINGLE_SIZE, **style: Any) -> Png:
    """One spec as one plot."""
    with matplotlib.rc_context(STYLE):
        fig = MplFigure(figsize=size, layout="constrained")
        ax = fig.add_subplot()
        _draw_on(ax, spec, colors_for(spec), wrap=62, **style)
        _legend(ax, fig, [ax], shared=False, order=_labels(spec))
        return _to_png(fig)


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
            _draw_on(ax, spec, colors, wrap=44, **style)
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
    """Series label -> colour. Scheme colours when each label starts with a distinct scheme name."""
    labels = _labels(*specs)
    heads = [_head(label) for label in labels]
    if labels and all(h in SCHEME_COLORS for h in heads) and len(set(heads)) == len(heads):
        return {label: SCHEME_COLORS[h] for label, h in zip(labels, heads)}
    return {label: CYCLE[i % len(CYCLE)] for i, label in enumerate(labels)}


def _labels(*specs: Any) -> list[str]:
    return list(dict.fromkeys(s.label for spec in specs for s in (getattr(spec, "series", None) or [])))


def _head(label: str) -> str:
    """The first word of a label, lower case: "Post-LN (warmup 0)" -> "post"."""
    words = re.split(r"[^0-9a-zA-Z]+", str(label).strip())
    return words[0].lower() if words else ""


# -- one axes ----------------------------------------------------------------------------
def _draw_on(ax, spec: Any, colors: dict[str, str], *, wrap: int, **style: Any) -> None:
    kind = getattr(spec, "kind", "line") or "line"
    {"line": _line, "bar": _bar, "heatmap": _heatmap}.get(kind, _line)(ax, spec, colors, **style)
    ax.set_title("\n".join(textwrap.wrap(spec.title or "", wrap)))
    ax.set_xlabel(spec.xlabel or "")
    ax.set_ylabel(spec.ylabel or "")


def _line(ax, spec: Any, colors: dict[str, str], *, linestyles: dict[str, Any] | None = None,
          markers: dict[str, str | None] | None = None, ylim: tuple[float, float] | None = None,
          alpha: float = 1.0, **_: Any) -> None:
    series = list(spec.series or [])
    numeric = all(_is_number(x) for s in series for x in s.x)
    categories = [] if numeric else list(dict.fromkeys(str(x) for s in series for x in s.x))
    for s in series:
        positions = s.x if numeric else [categories.index(str(v)) for v in s.x]
        x = np.array([_num(v) for v in positions], float)
        y = np.array([_num(v) for v in s.y], float)
        style = {"color": colors.get(s.label), "label": s.label, "linestyle": (linestyles or {}).get(s.label, "-"),
                 "marker": (markers or {}).get(s.label, "o" if len(x) <= 24 else None), "alpha": alpha}
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


MAX_SWEPT_TICKS = 8


def _swept_ticks(ax, values: list[float]) -> None:
    """A sweep's x values (learning rates, depths) as the axis's ticks, labelled plainly, when there are few:
    a reader reads off 3e-4 … 3e-2 or 2, 4, 8, 16 rather than the powers of ten between them."""
    if not 1 < len(values) <= MAX_SWEPT_TICKS:
        return
    ax.xaxis.set_major_locator(FixedLocator(values))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt_value(float(v))))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_minor_locator(NullLocator())


def _bar(ax, spec: Any, colors: dict[str, str], **_: Any) -> None:
    series = list(spec.series or [])
    categories = list(dict.fromkeys(str(x) for s in series for x in s.x))
    width = 0.8 / max(1, len(series))
    for i, s in enumerate(series):
        values = dict(zip((str(x) for x in s.x), s.y))
        errors = dict(zip((str(x) for x in s.x), s.yerr)) if s.yerr is not None else {}
        pos = np.arange(len(categories)) + (i - (len(series) - 1) / 2) * width
        y = np.array([_num(values.get(c)) for c in categories], float)
        err = np.array([_num(errors.get(c)) for c in categories], float) if errors else None
        ax.bar(pos, y, width * 0.92, yerr=err, capsize=2, label=s.label, color=colors.get(s.label),
               error_kw={"elinewidth": 0.8})
    _category_ticks(ax, categories)
    ax.grid(axis="x", visible=False)
    _scales(ax, spec, numeric=False)


def _heatmap(ax, spec: Any, colors: dict[str, str], *, cmap: str = "viridis", vmin: float | None = None,
             vmax: float | None = None, **_: Any) -> None:
    """A matrix with its values written in the cells (or the spec's own `cell_text`, if it has one)."""
    matrix = np.array([[_num(v) for v in row] for row in (spec.matrix or [])], float)
    if matrix.size == 0:
        matrix = np.full((1, 1), np.nan)
    colormap = matplotlib.colormaps[cmap].with_extremes(bad="#eeeeee")
    image = ax.imshow(np.ma.masked_invalid(matrix), cmap=colormap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.figure.colorbar(image, ax=ax, shrink=0.9, pad=0.02)
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
    if getattr(spec, "logx", False) and numeric and any((d[:, 0] > 0).any() for d in lines if len(d)):
        ax.set_xscale("log")
        _plain_log_ticks(ax.xaxis, ax.get_xlim())
    ys = [np.asarray(p.get_height()) for p in ax.patches] + [d[:, 1] for d in lines if len(d)]
    if getattr(spec, "logy", False) and any((np.nan_to_num(y) > 0).any() for y in ys):
        ax.set_yscale("log")
        _plain_log_ticks(ax.yaxis, ax.get_ylim())


def _plain_log_ticks(axis, limits: tuple[float, float]) -> None:
    """0.2 rather than 2×10⁻¹; within a narrow range also label 2 and 5 between the powers of ten."""
    plain = FuncFormatter(lambda v, _: fmt_value(float(v)))
    axis.set_major_formatter(plain)
    lo, hi = sorted(limits)
    if lo > 0 and hi / lo < 30:
        subs = (1.5, 2.0, 3.0, 4.0, 5.0, 7.0) if hi / lo < 4 else (2.0, 5.0)
        axis.set_minor_locator(LogLocator(subs=subs))
        axis.set_minor_formatter(plain)
    else:
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
    if shared:
        fig.legend(entries.values(), entries.keys(), loc="outside lower center", ncols=min(len(entries), 6),
                   frameon=False)
    elif len(entries) <= 4:
        ax.legend(entries.values(), entries.keys(), frameon=False)
    else:
        ax.legend(entries.values(), entries.keys(), loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


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
