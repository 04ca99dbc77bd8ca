"""A plot as plain data: what a claim (or `normlab diagnose --html`) hands the report to draw. It lives with the
report, which draws it (report/plots.py), so that the study and the diagnostics depend on the report's types,
never the other way round."""
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
