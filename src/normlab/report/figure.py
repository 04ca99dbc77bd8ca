"""What the report renders, as plain data: a plot (`Figure`, its `Series`), a drawn block of plots (`Plot`), a
table, and a section of them. The study (and `normlab diagnose --html`) build these from run records; the report
draws and writes them without knowing claims or records. They live with the report so that the study and the
diagnostics depend on the report's types, never the other way round."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Series:
    label: str
    x: list[Any]
    y: list[float | None]
    yerr: list[float | None] | None = None


@dataclass
class Figure:
    """A plot as data; `normlab.report` draws it. kind: line | bar | dot | heatmap (see report/plots.py)."""

    title: str
    xlabel: str
    ylabel: str
    series: list[Series] = field(default_factory=list)
    kind: str = "line"
    logx: bool = False
    logy: bool = False
    matrix: list[list[float | None]] | None = None  # heatmap values, rows × cols
    rows: list[str] | None = None
    cols: list[str] | None = None
    caption: str = ""
    cell_text: list[list[str]] | None = None  # a heatmap's cell labels, where its numbers alone would mislead

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Plot:
    """Figures drawn as one image: small multiples (`grid`: report.plots.draw_grid's options) or one figure
    (`single`: report.plots.draw's options); the renderer draws it. `error`: why there is nothing to draw."""

    figures: list[Figure] = field(default_factory=list)
    caption: str = ""
    grid: dict[str, Any] | None = None
    single: dict[str, Any] | None = None
    error: str | None = None


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    classes: list[str] = field(default_factory=list)  # one CSS class per row


@dataclass
class Section:
    """One section of the report after the claims: an intro, plots, a table (collapsed: inside <details>)."""

    id: str
    title: str
    intro: str
    plots: list[Plot] = field(default_factory=list)
    table: Table | None = None
    collapsed: bool = False
