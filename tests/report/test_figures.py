"""What a reader gets from the report's figures: readable ticks, differences that show, lines that stay
visible, nothing clipped, one colour per scheme. Each test reads the drawn matplotlib figure, not a picture."""
from __future__ import annotations

import dataclasses
import re

import matplotlib
import pytest

from normlab.config import derive
from normlab.report import plots
from normlab.study.claims import Figure, Series


def _drawn(spec, **kwargs):
    """The figure `draw` would render, laid out under the report's style, as `draw` lays it out."""
    with matplotlib.rc_context(plots.STYLE):
        fig = plots.build(spec, **kwargs)
        fig.canvas.draw()
    return fig, fig.axes[0]


def _labels(axis) -> list[str]:
    return [t.get_text() for t in axis.get_ticklabels() if t.get_text() and t.get_visible()]


@pytest.mark.parametrize("lo, hi", [(0.035, 0.16), (0.09, 0.45), (0.02, 5.0), (0.03, 30.0), (0.031, 0.036),
                                    (0.8, 1.25)])
def test_a_log_axis_labels_at_least_four_plain_values(lo, hi):
    spec = Figure("g", "layer", "‖∇W‖", [Series("pre", [0, 1, 2, 3], [lo, lo * 1.5, hi / 1.5, hi])], logy=True)
    fig, ax = _drawn(spec)
    low, high = ax.get_ylim()
    shown = [label for label, tick in zip(_labels(ax.yaxis), ax.get_yticks()) if low <= tick <= high]
    assert len(shown) >= (4 if hi / lo > 2 else 3), shown  # a sliver of a decade gets evenly spaced ticks
    assert all(re.fullmatch(r"[0-9.]+", text) for text in shown), shown  # 0.05, not 5×10⁻²


def test_a_loss_comparison_is_drawn_on_an_axis_fitted_to_it_with_its_values_written():
    """0.07 nats between two schemes would vanish in bars from 0 (2.47 vs 2.54 on a 0–2.6 axis)."""
    spec = Figure("C7", "", "final val loss (nats)", kind="dot",
                  series=[Series("pre", ["pretrained", "fine-tuned"], [2.545, 2.503], [0.016, 0.009]),
                          Series("post", ["pretrained", "fine-tuned"], [2.472, None], [0.015, None])])
    fig, ax = _drawn(spec)
    low, high = ax.get_ylim()
    assert low > 2.3 and high < 2.7  # the axis spans the data, not 0
    texts = [t.get_text() for t in ax.texts]
    assert {"2.545", "2.503", "2.472"} <= set(texts) and "no value" in texts  # a missing point says so


def test_lines_on_top_of_each_other_stay_visible():
    """Post-LN's residual RMS is 1 at every depth: three identical lines. Each has its own marker, and the
    ones covered are drawn wider beneath, so all three show."""
    same = [0.03, 1.0, 1.0, 1.0]
    spec = Figure("rms", "layer", "RMS", [Series(f"post, L={d}", [0, 1, 2, 3], same) for d in (2, 4, 8)]
                  + [Series("pre, L=8", [0, 1, 2, 3], [0.03, 0.6, 1.1, 1.4])], logy=True)
    fig, ax = _drawn(spec)
    lines = {line.get_label(): line for line in ax.get_lines()}
    widths = [lines[f"post, L={d}"].get_linewidth() for d in (2, 4, 8)]
    assert widths[0] > widths[1] > widths[2]
    assert lines["pre, L=8"].get_linewidth() == widths[2]  # not covered: the usual width
    assert len({line.get_marker() for line in lines.values()}) == 4


def test_one_colour_per_scheme_shaded_by_its_series():
    colors = plots.colors_for(Figure("x", "", "", [Series(s, [0], [1]) for s in
                                                   ("pre, L=2", "pre, L=16", "post, L=2", "post, L=16")]))
    assert colors["pre, L=16"] == plots.SCHEME_COLORS["pre"] and colors["post, L=16"] == plots.SCHEME_COLORS["post"]
    assert colors["pre, L=2"] != colors["pre, L=16"]
    r, g, b = plots.to_rgb(colors["post, L=2"])
    assert r > g and r > b  # a lighter red, still red


@pytest.mark.parametrize("size", [None, plots.WIDE_SIZE])
def test_no_title_or_y_label_is_clipped(size):
    spec = Figure("DeepNorm α of built models by architecture and depth vs the source article's fixed values",
                  "layers", "final val loss (runs that did not train omitted, nats)",
                  [Series(f"series with a long legend label {i}", [1, 2, 3], [1.0 + i, 2.0, 3.0]) for i in range(6)])
    fig, ax = _drawn(spec, size=size)
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    for text in (ax.title, ax.yaxis.label):
        extent = text.get_window_extent(renderer)
        assert box.x0 - 1 <= extent.x0 and extent.x1 <= box.x1 + 1 and extent.y1 <= box.y1 + 1, text.get_text()
    legend = fig.legends[0] if fig.legends else ax.get_legend()  # long labels go below, not beside the plot
    assert legend.get_window_extent(renderer).x1 <= box.x1 + 1


def test_a_single_depth_is_not_drawn_on_a_log_axis_of_empty_decades():
    spec = Figure("depth", "layers", "loss", [Series("pre", [100], [3.17]), Series("post: no run trained", [100],
                                                                                    [None])], logx=True)
    fig, ax = _drawn(spec)
    assert ax.get_xscale() == "linear" and _labels(ax.xaxis) == ["100"]


def test_loss_curve_panels_are_titled_by_what_differs_and_the_legend_says_what_the_caption_says():
    """A setting only the deep panel changes (its steps) is in that panel's title alone; runs that did not
    train end in ○ and are named so in the legend, as the caption explains."""
    from tests.report.synthetic import records

    runs = records()
    deep = dataclasses.replace(runs[0], id="deep", config=derive(runs[0].config, {"model.n_layer": 100,
                                                                                 "train.steps": 200}))
    deep.status, deep.val_curve = "failed_to_train", [(0, 4.2), (100, 3.35), (200, 3.34)]
    section, drawn = _loss_curves_drawn(runs + [deep])
    caption = section.plots[0].caption
    assert "did not train" in caption and "diverged" in caption and "dashed: rmsnorm" in caption
    assert "Unless a panel's title says otherwise: steps=300" in caption
    titles = [spec.title for spec in drawn["specs"]]
    legend = list(dict.fromkeys(s.label for spec in drawn["specs"] for s in spec.series))
    assert titles[-1] == "L=100 · lr=0.001 · warmup=0 · steps=200"  # d is the same everywhere: not named
    assert all("steps" not in t for t in titles[:-1])
    assert "post (did not train)" in legend and "post (diverged)" in legend and "pre · rmsnorm" in legend


def _loss_curves_drawn(runs) -> tuple:
    """`loss_curves`' section, and what it asks the report to draw (the panels' specs and `draw_grid`'s style
    arguments); drawing them is the other tests' business."""
    from normlab.study import sections

    section = sections.loss_curves(runs)
    (plot,) = section.plots
    return section, {**plot.grid, "specs": plot.figures}


def test_a_config_error_reads_as_its_message():
    from normlab.study.claims.static import plain_reason

    raw = ("1 validation error for ModelConfig\n  Value error, scheme 'deepnorm' cannot be used with normalizer "
           "'none': α > 1 multiplies the residual [type=value_error, input_value={'vocab_size': 31}, "
           "input_type=dict]\n    For further information visit https://errors.pydantic.dev/2.14/v/value_error")
    assert plain_reason(raw) == "scheme 'deepnorm' cannot be used with normalizer 'none': α > 1 multiplies the residual"
    assert plain_reason(ValueError("plain message")) == "plain message"


def test_a_config_error_from_pydantic_itself_reads_as_its_message():
    from pydantic import BaseModel, ValidationError
    from normlab.study.claims.static import plain_reason

    class M(BaseModel):
        n: int

    with pytest.raises(ValidationError) as caught:
        M(n="x")
    reason = plain_reason(caught.value)
    assert "pydantic.dev" not in reason and "validation error" not in reason and "integer" in reason
    stored = str(caught.value)  # as a ledger keeps it: the text only
    assert "pydantic.dev" not in plain_reason(stored) and "integer" in plain_reason(stored)


def test_panels_that_differ_only_in_an_unusual_setting_are_named_by_it_and_styles_follow_the_norm():
    """Two panels apart only in `steps` are titled by it (never "all runs"); a RMSNorm run that did not train
    stays dashed, as the caption says RMSNorm is, and ends in ○."""
    from tests.report.synthetic import records

    base = [r for r in records() if r.get("model.scheme") == "pre" and r.get("model.n_layer") == 4
            and r.get("train.lr") == 1e-3 and r.get("train.warmup_steps") == 20]
    short = dataclasses.replace(base[0], id="short", config=derive(base[0].config, {"train.steps": 200}))
    runs = base + [short]
    rms = next(r for r in runs if r.get("model.norm") == "rmsnorm")
    rms.status = "failed_to_train"
    section, seen = _loss_curves_drawn(runs)
    titles = [spec.title for spec in seen["specs"]]
    assert "all runs" not in titles and sorted(titles) == ["steps=200", "steps=300"]
    assert seen["linestyles"]["pre · rmsnorm (did not train)"] == "--"
    assert seen["markers"]["pre · rmsnorm (did not train)"] == "o" and seen["markers"]["pre"] is None
    caption = section.plots[0].caption
    assert "○ did not train" in caption and "×" not in caption  # no run diverged: no × to explain


def test_a_heatmap_spanning_decades_is_coloured_on_a_log_scale_and_one_with_zeros_or_a_fixed_range_is_not():
    """C16's changes at t run from 1.7e-4 to 0.4: on a linear scale every cell but one is the same colour."""
    from matplotlib.colors import LogNorm

    def heatmap(matrix, **style):
        spec = Figure("at t", "normalizer", "scheme", kind="heatmap", matrix=matrix, rows=["post", "pre"],
                      cols=["layernorm", "rmsnorm"])
        fig, ax = _drawn(spec, **style)
        return ax.images[0], fig.axes[1]  # the cells, and the colour bar's axes

    cells, bar = heatmap([[1.7e-4, 2e-3], [0.05, 0.4]])
    assert isinstance(cells.norm, LogNorm) and (cells.norm.vmin, cells.norm.vmax) == (1.7e-4, 0.4)
    colours = {tuple(cells.cmap(cells.norm(v))) for v in (1.7e-4, 2e-3, 0.05)}
    assert len(colours) == 3  # distinguishable, where a linear scale paints all three near its bottom
    labels = _labels(bar.yaxis)
    assert len(labels) >= 3 and all(re.fullmatch(r"[0-9.e+-]+", text) for text in labels), labels
    for matrix, style in (([[0.0, 2e-3], [0.05, 0.4]], {}), ([[1.7e-4, 2e-3], [0.05, 0.4]], {"vmin": 0.0, "vmax": 1.0}),
                          ([[0.1, 0.2], [0.3, 0.4]], {}), ([[None, 2e-3], [0.05, None]], {})):
        cells, _ = heatmap(matrix, **style)
        assert not isinstance(cells.norm, LogNorm), (matrix, style)


def test_the_caption_names_every_normalizers_line_style_as_drawn():
    """A normalizer's own dash pattern (Derf's, SeeDNorm's) is named by its lengths, never called "solid" as
    LayerNorm's line is; every style a normalizer declares reads differently from the others but l2's."""
    from normlab.report.plots import NORM_STYLES
    from normlab.study.sections import style_name

    assert style_name(NORM_STYLES["derf"]) == "dashes 5-1-1-1" and style_name(NORM_STYLES["rmsnorm"]) == "dashed"
    names = {n: style_name(s) for n, s in NORM_STYLES.items()}
    drawn_solid = {n for n, s in NORM_STYLES.items() if s == "-"}
    assert {n for n, name in names.items() if name == "solid"} == drawn_solid
