"""The report's general sections, built from the run records rather than from one claim, as plain data.

Loss curves, per-layer profiles (gradient norm at init, residual RMS, contribution
ratio, angular distance, layer-skip ΔL), divergence heatmaps and norm timings. Each
builder returns a `Section` (report/figure.py), or None when the records hold none of its
data; the report draws and writes it, knowing nothing of records or claims.
"""
from __future__ import annotations

import logging
import math
import statistics
from collections import defaultdict
from typing import Any, Callable, Iterable

from normlab.nn.schemes import SCHEMES
from normlab.report import plots
from normlab.report.figure import Figure, Plot, Section, Series, Table
from normlab.report.format import fmt_duration, fmt_value, natural_key
from normlab.report.plots import NORM_STYLES, SCHEME_COLORS

log = logging.getLogger(__name__)

MAX_PANELS = 12  # small multiples per plot; more groups are left out (and the caption says so)
LOG_SPAN = 20.0  # per-layer values spanning more than this ratio get a log axis
SCHEME_ORDER = list(SCHEMES)  # the schemes' registration order (nn/schemes/)
TITLE_KEYS = ("model.n_layer", "model.d_model", "train.lr", "train.warmup_steps")  # always in a panel's title
SHORT_KEYS = {"model.n_layer": "L", "model.d_model": "d", "train.lr": "lr", "train.warmup_steps": "warmup",
              "model.norm": "norm", "model.scheme": "scheme", "train.steps": "steps"}


def main_records(records: list, rerun: dict[str, Any] | None) -> list:
    """The study's own runs, without the robustness pass's reruns (`rerun`: the settings it changed, the plan's
    `robust_changed`), which the report does not plot twice."""
    if not rerun:
        return records
    return [r for r in records if any(r.get(k) != v for k, v in rerun.items())]


def general_sections(records: list, measurements: dict[str, dict]) -> list[Section]:
    """Every general section that has data, in reading order; a builder that fails leaves a note."""
    builders: list[tuple[str, Callable[[], Section | None]]] = [
        ("loss-curves", lambda: loss_curves(records)),
        ("grad-norm", lambda: grad_norm_section(records)),
        ("residual-rms", lambda: residual_section(records)),
        ("contribution", lambda: contribution_section(records)),
        ("layer-skip", lambda: layer_skip_section(records)),
        ("divergence", lambda: divergence_section(records)),
        ("norm-timings", lambda: norm_timings_section(measurements)),
        ("runs", lambda: runs_section(records)),
    ]
    sections = []
    for name, build in builders:
        try:
            section = build()
        except Exception as error:  # noqa: BLE001 - the report is the last step of a long study: keep going
            log.exception("report section %s failed", name)
            section = Section(name, name.replace("-", " ").capitalize(), "", [Plot(error=repr(error))])
        if section is not None:
            sections.append(section)
    return sections


# -- loss curves --------------------------------------------------------------------------
def loss_curves(records: list) -> Section | None:
    runs = [r for r in records if _finite_points(r.val_curve)]
    if not runs:
        return None
    keys = varying_keys(runs, exclude={"train.seed", "model.scheme", "model.norm"})  # norm: a line style
    groups = _group(runs, lambda r: tuple(_flat(r.config.to_dict()).get(k) for k in keys))
    shown = _richest(groups)
    # a panel's title names what tells it from the other panels shown: the usual settings (L, d, lr, warmup) that
    # vary among them, and any other setting only where the panel departs from its usual value (the one most
    # runs shown have, given in the caption)
    varies = [i for i, k in enumerate(keys) if len({repr(key[i]) for key, _ in shown}) > 1]
    usual = {i: statistics.mode(key[i] for key, members in shown for _ in members) for i in range(len(keys))}
    ylim = _loss_ylim(runs)
    specs, ends = [], {}
    for key, members in shown:
        series = [_curve_series(r, ends, ylim) for r in sorted(members, key=_scheme_rank)]
        titled = [i for i in varies if keys[i] in TITLE_KEYS or repr(key[i]) != repr(usual[i])] or varies
        title = setting_label([keys[i] for i in titled], tuple(key[i] for i in titled)) or "all runs"
        specs.append(Figure(title, "step", "val loss (nats)", series))
    styles = {label: NORM_STYLES.get(norm, "-") for label, (_, norm) in ends.items()}
    markers = {label: END_MARKERS.get(end) for label, (end, _) in ends.items()}
    grid = dict(ncols=plots.balanced_columns(len(specs), 3), colors=scheme_colors(ends), linestyles=styles,
                markers=markers, ylim=ylim, alpha=0.85, mark_last=True, widen=False)
    rest = [i for i in range(len(keys)) if usual[i] is not None and (keys[i] not in TITLE_KEYS or i not in varies)]
    common = setting_label([keys[i] for i in rest], tuple(usual[i] for i in rest))
    endings = {end for end, _ in ends.values()}
    caption = (f"Validation loss of every run ({len(runs)} run{'' if len(runs) == 1 else 's'}), one line per run "
               "and seed, coloured by scheme" + _norm_style_note(runs) + ". "
               + ("A line ending in ○ did not train (it stayed at the unigram plateau). "
                  if "did not train" in endings else "")
               + ("A line ending in × diverged (it leaves the top of the plot). " if "diverged" in endings else "")
               + (f"Unless a panel's title says otherwise: {common}. " if common else "") + _omitted(len(groups))
               + _panel_note([keys[i] for i in varies]))
    return Section("loss-curves", "Loss curves", "", [Plot(specs, caption, grid=grid)])


STYLE_NAMES = {"--": "dashed", ":": "dotted", "-.": "dash-dot", (0, (1, 1)): "densely dotted"}
END_MARKERS = {"diverged": "x", "did not train": "o"}  # at a curve's last point: how the run ended


def style_name(style: str | tuple) -> str:
    """A matplotlib linestyle in words; a dash pattern of its own (Derf's, SeeDNorm's) by its on/off lengths."""
    if style in STYLE_NAMES:
        return STYLE_NAMES[style]
    if isinstance(style, tuple):
        return "dashes " + "-".join(f"{n:g}" for n in style[1])
    return "solid"


def _norm_style_note(runs: list) -> str:
    """` (dashed: rmsnorm)`: what the line styles of the normalizers other than LayerNorm mean."""
    norms = sorted({str(r.get("model.norm")) for r in runs} - {"layernorm", "None"})
    parts = [f"{style_name(NORM_STYLES.get(n, '-'))}: {n}" for n in norms]
    return f" ({'; '.join(parts)})" if parts else ""


def _curve_series(record, ends: dict[str, tuple[str | None, str]], ylim: tuple[float, float] | None) -> Series:
    """One run's curve, labelled by scheme (and norm) and by how it ended: diverged, did not train, or neither
    (`ends` gathers each label's ending and normalizer, for its marker and line style)."""
    end = "diverged" if record.diverged else "did not train" if record.status == "failed_to_train" else None
    label = _line_label(record) + (f" ({end})" if end else "")
    ends[label] = (end, str(record.get("model.norm")))
    points = _finite_points(record.val_curve, keep_inf=True)
    if ylim is None:  # no completed run to scale by: leave the infinite points out
        points = [p for p in points if math.isfinite(p[1])]
    top = ylim[1] if ylim else math.inf
    return Series(label, [p[0] for p in points], [min(p[1], top) for p in points])  # × stays on the plot


def _richest(groups: dict[Any, list]) -> list[tuple[Any, list]]:
    """The MAX_PANELS groups that compare the most schemes, in their natural order."""
    ranked = sorted(groups.items(), key=lambda kv: -len({r.get("model.scheme") for r in kv[1]}))
    keep = {id(members) for _, members in ranked[:MAX_PANELS]}
    return [(key, members) for key, members in groups.items() if id(members) in keep]


def _loss_ylim(runs: list) -> tuple[float, float] | None:
    """The range of the completed runs' curves, so a diverging curve does not flatten the others."""
    values = [y for r in runs if not r.diverged for _, y in _finite_points(r.val_curve)]
    if not values:
        return None
    lo, hi = min(values), max(values)
    pad = 0.05 * (hi - lo or abs(hi) or 1.0)
    return lo - pad, hi + pad


def _finite_points(curve: Iterable, keep_inf: bool = False) -> list[tuple[float, float]]:
    """(step, loss) pairs with a loss; with keep_inf, a non-finite loss (a diverged step) becomes +inf."""
    out = []
    for step, loss in curve or []:
        if loss is None:
            continue
        if math.isfinite(loss):
            out.append((step, loss))
        elif keep_inf:
            out.append((step, math.inf))  # clipped to the top of the axis by the caller
    return out


# -- per-layer profiles -------------------------------------------------------------------
def grad_norm_section(records: list) -> Section | None:
    plot = layer_profile(records, lambda r: r.layers_init.get("grad_norm/block"), "gradient norm", logy=None)
    if plot is None:
        return None
    plot.caption = "Gradient norm of each block's weights at step 0. " + plot.caption
    intro = "C2/C3: Post-LN's gradients grow toward the output; Pre-LN's are nearly uniform and shrink with depth."
    return Section("grad-norm", "Gradient norm at initialization", intro, [plot])


def residual_section(records: list) -> Section | None:
    profiles = [("residual_rms/block", stage, "residual RMS", "RMS of the residual stream entering each layer", None)
                for stage in ("init", "final")]
    intro = "C5: in Pre-LN the residual stream grows with depth (‖x_l‖ ~ O(l))."
    return _profiles_section(records, "residual-rms", "Residual stream RMS", intro, profiles)


def contribution_section(records: list) -> Section | None:
    profiles = [(metric, "final" if any(r.layers_final.get(metric) for r in records) else "init", ylabel,
                 f"{what} per layer", False)
                for metric, ylabel, what in (
                    ("contribution_ratio/block", "contribution ratio", "Contribution ratio ‖F_l‖/‖x_l‖"),
                    ("angular_distance/block", "angular distance", "Angular distance between x_l and x_{l+1}"))]
    intro = "C6: in Pre-LN deep layers contribute little and consecutive layers' inputs become nearly parallel."
    return _profiles_section(records, "contribution", "Layer contribution and angular distance", intro, profiles)


def _profiles_section(records: list, sid: str, title: str, intro: str, profiles: list[tuple]) -> Section | None:
    """A section of per-layer profiles: (metric, stage init|final, y label, caption start, logy) each; a profile
    with no data is left out, a section with none is None."""
    found = []
    for metric, stage, ylabel, what, logy in profiles:
        getter = _final(metric) if stage == "final" else _init(metric)
        plot = layer_profile(records, getter, ylabel, logy=logy, completed_only=stage == "final")
        if plot is not None:
            plot.caption = f"{what}, {_stage(stage)}. " + plot.caption
            found.append(plot)
    return Section(sid, title, intro, found) if found else None


def layer_skip_section(records: list) -> Section | None:
    plot = layer_profile(records, lambda r: (r.layer_skip or {}).get("delta_loss"), "ΔL when skipped (nats)",
                         completed_only=True)
    if plot is None:
        return None
    plot.caption = ("Increase of the val loss when layer l is skipped, trained models (completed runs). "
                    + plot.caption)
    table = _effective_depth_table(records)
    intro = ("C6: a layer whose removal barely changes the loss does not count toward the effective depth. "
             "The table gives the mean effective depth per scheme and depth (in brackets: its fraction of L).")
    return Section("layer-skip", "Layer-skip ablation", intro, [plot], table)


def _effective_depth_table(records: list) -> Table | None:
    """Mean effective depth (and its fraction of L) per scheme (rows) and depth (columns)."""
    runs = [r for r in records if r.layer_skip and r.status == "completed"
            and r.layer_skip.get("effective_depth") is not None]
    if not runs:
        return None
    depths = sorted({r.get("model.n_layer") for r in runs}, key=_sort_key)
    rows = []
    for label, members in _group(sorted(runs, key=_scheme_rank), _line_label, sort=False).items():
        cells = [_effective_depth_cell([m for m in members if m.get("model.n_layer") == d]) for d in depths]
        rows.append([label, *cells])
    return Table(["scheme", *(f"L={fmt_value(d)}" for d in depths)], rows)


def _effective_depth_cell(runs: list) -> str:
    if not runs:
        return ""
    depth = _mean_text([r.layer_skip.get("effective_depth") for r in runs])
    fraction = _mean_text([r.layer_skip.get("effective_depth_fraction") for r in runs])
    return f"{depth} ({fraction})"


def layer_profile(records: list, getter: Callable[[Any], list | None], ylabel: str, *, logy: bool | None = False,
                  completed_only: bool = False) -> Plot | None:
    """Per-layer values averaged over seeds: one panel per depth, one line per scheme (and norm).

    logy=None: a log axis when the values span more than LOG_SPAN.
    """
    chosen = [r for r in records if getter(r) and (r.status == "completed" or not completed_only)]
    if not chosen:
        return None
    if logy is None:
        logy = _spans_decades([v for r in chosen for v in getter(r)])
    panel_keys = [k for k in ("model.n_layer", "model.d_model") if k == "model.n_layer" or
                  len({r.get(k) for r in chosen}) > 1]
    panels = _group(chosen, lambda r: tuple(r.get(k) for k in panel_keys))
    specs, labels = [], set()
    for key, members in list(panels.items())[:MAX_PANELS]:
        lines = _group(sorted(members, key=_scheme_rank), _line_label, sort=False)
        series = [_mean_series(label, [getter(m) for m in group]) for label, group in lines.items()]
        labels.update(lines)
        specs.append(Figure(setting_label(panel_keys, key), "layer", ylabel, series, logy=logy))
    grid = dict(ncols=plots.balanced_columns(len(specs), 4), colors=scheme_colors(labels),
                linestyles=norm_styles(chosen))
    caption = "Mean over seeds and training settings; one panel per depth. " + _omitted(len(panels))
    return Plot(specs, caption, grid=grid)


def _mean_series(label: str, profiles: list[list]) -> Series:
    """Elementwise mean over profiles of the most common length (None where any profile lacks a value)."""
    length = statistics.mode(len(p) for p in profiles)
    same = [p for p in profiles if len(p) == length]
    means = [None if any(v is None or not math.isfinite(v) for v in col) else statistics.fmean(col)
             for col in zip(*same)]
    return Series(f"{label}", list(range(length)), means)


def _spans_decades(values: list) -> bool:
    positive = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v) and v > 0]
    return bool(positive) and len(positive) == len(values) and max(positive) / min(positive) > LOG_SPAN


def _init(metric: str) -> Callable[[Any], list | None]:
    return lambda r: r.layers_init.get(metric)


def _final(metric: str) -> Callable[[Any], list | None]:
    return lambda r: r.layers_final.get(metric)


def _stage(stage: str) -> str:
    return "at initialization" if stage == "init" else "after training (completed runs)"


# -- divergence -------------------------------------------------------------------------
def divergence_section(records: list) -> Section | None:
    runs = [r for r in records if r.status in ("completed", "failed_to_train", "diverged")
            and r.get("train.lr") is not None]
    if not runs:
        return None
    warmups = sorted({r.get("train.warmup_steps") or 0 for r in runs})
    schemes = sorted({r.get("model.scheme") for r in runs}, key=_scheme_key)
    lrs = sorted({r.get("train.lr") for r in runs})
    specs = []
    for warmup in warmups:
        matrix, text = _divergence_matrix([r for r in runs if (r.get("train.warmup_steps") or 0) == warmup],
                                          schemes, lrs)
        specs.append(Figure(f"warmup = {warmup} steps", "learning rate", "", kind="heatmap", matrix=matrix,
                            rows=schemes, cols=[fmt_value(lr) for lr in lrs], cell_text=text))  # "k/n", not k/n
    size = (2.2 + 0.85 * len(lrs), 1.5 + 0.42 * len(schemes))
    grid = dict(ncols=max(1, min(len(specs), int(11 // size[0]))), panel_size=size, cmap="Reds", vmin=0.0, vmax=1.0)
    caption = ("Fraction of runs that did not train: diverged, or failed to train (ended within the margin of "
               "the unigram cross-entropy). Cells: (diverged + failed to train)/total, pooled over depths, norms "
               "and seeds; grey: no run.")
    intro = "C1, C4, C11, C14: which schemes survive large learning rates and no warmup."
    return Section("divergence", "Divergence and failure to train", intro, [Plot(specs, caption, grid=grid)])


def _divergence_matrix(runs: list, schemes: list[str], lrs: list[float]) -> tuple[list, list]:
    matrix, text = [], []
    for scheme in schemes:
        row, row_text = [], []
        for lr in lrs:
            cell = [r for r in runs if r.get("model.scheme") == scheme and r.get("train.lr") == lr]
            failed = sum(r.did_not_train for r in cell)
            row.append(failed / len(cell) if cell else None)
            row_text.append(f"{failed}/{len(cell)}" if cell else "")
        matrix.append(row)
        text.append(row_text)
    return matrix, text


# -- norm timings -----------------------------------------------------------------------
def norm_timings_section(measurements: dict[str, dict]) -> Section | None:
    timings = [t for t in ((measurements or {}).get("C10") or {}).get("norm_timings") or []
               if isinstance(t, dict) and t.get("median_s") is not None]
    if not timings:
        return None
    several_impls = len({(t.get("norm"), t.get("impl")) for t in timings}) > len({t.get("norm") for t in timings})
    series: dict[str, dict[str, float]] = defaultdict(dict)
    for t in timings:
        name = f"{t.get('norm')} ({t.get('impl')})" if several_impls else str(t.get("norm"))
        series[name][_shape_label(t)] = t["median_s"] * 1e3
    values = [v for s in series.values() for v in s.values() if v > 0]
    spec = Figure("Normalizer forward + backward", "input shape, dtype", "median time (ms)",
                  [Series(name, list(points), list(points.values())) for name, points in series.items()],
                  kind="bar", logy=bool(values) and max(values) / min(values) > 30)
    width = min(11.0, 4.0 + 0.5 * len(timings))
    caption = "Median wall time of one normalizer forward and backward pass (C10), per input shape."
    return Section("norm-timings", "Norm timings", "C10: RMSNorm should cost less than LayerNorm.",
                   [Plot([spec], caption, single={"size": (width, 3.4)})])


def _shape_label(timing: dict) -> str:
    shape = timing.get("shape")
    text = "×".join(str(s) for s in shape) if isinstance(shape, (list, tuple)) else str(shape)
    return f"{text} {timing.get('dtype')}" if timing.get("dtype") else text


# -- all runs ---------------------------------------------------------------------------
SETTING_COLUMNS = [("scheme", "model.scheme"), ("norm", "model.norm"), ("L", "model.n_layer"), ("d", "model.d_model"),
                   ("lr", "train.lr"), ("warmup", "train.warmup_steps"), ("seed", "train.seed")]
OUTCOME_COLUMNS = [("status", lambda r: r.status), ("step", lambda r: r.step), ("val loss", lambda r: r.val_loss),
                   ("tokens/s", lambda r: None if r.tokens_per_s is None else round(r.tokens_per_s)),
                   ("time", lambda r: fmt_duration(r.elapsed_s))]


def runs_section(records: list) -> Section | None:
    if not records:
        return None
    ordered = sorted(records, key=lambda r: (_scheme_rank(r), natural_key(str(r.get("model.norm"))),
                                             r.get("model.n_layer") or 0, r.get("train.lr") or 0,
                                             r.get("train.warmup_steps") or 0, r.seed or 0))
    # the run, its usual settings, every other setting that tells two runs apart, then the outcome
    columns = ([("run", lambda r: r.id)] + [(name, _getter(key)) for name, key in SETTING_COLUMNS]
               + [(key.split(".", 1)[1], _getter(key)) for key in differing_keys(records)] + OUTCOME_COLUMNS)
    rows = [[fmt_value(get(r)) for _, get in columns] for r in ordered]
    counts = defaultdict(int)
    for r in records:
        counts[r.status] += 1
    intro = ("; ".join(f"{n} {status}" for status, n in sorted(counts.items()))
             + ". Runs that diverged or failed to train are in red.")
    table = Table([name for name, _ in columns], rows, [f"status-{r.status}" for r in ordered])
    return Section("runs", f"All runs ({len(records)})", intro, table=table, collapsed=True)


SHOWN = {key for _, key in SETTING_COLUMNS} | {"model.vocab_size"}  # the table's own columns; the data's vocabulary


def differing_keys(records: list) -> list[str]:
    """Config keys with more than one value among the runs, beyond the run table's own columns."""
    flats = [_flat(r.config.to_dict()) for r in records]
    keys = set().union(*flats) - SHOWN if flats else set()
    return sorted(k for k in keys if len({repr(f.get(k)) for f in flats}) > 1)


def _getter(key: str) -> Callable[[Any], Any]:
    def get(record) -> Any:
        value = record.get(key)
        if key == "train.init_from" and value:  # a source run's directory: its name tells it apart
            return str(value).rstrip("/").rsplit("/", 1)[-1]
        return value
    return get


# -- helpers ----------------------------------------------------------------------------
def varying_keys(records: list, exclude: set[str]) -> list[str]:
    """Config keys that take more than one value among the runs of some scheme.

    Keys fixed by the scheme alone (a scheme's own options) would only split each scheme
    into its own panel, so they are left out.
    """
    by_scheme = _group(records, lambda r: r.get("model.scheme"))
    keys: set[str] = set()
    for members in by_scheme.values():
        flats = [_flat(r.config.to_dict()) for r in members]
        for key in set().union(*flats) - exclude:
            if len({repr(f.get(key)) for f in flats}) > 1:
                keys.add(key)
    return sorted(keys, key=lambda k: (list(SHORT_KEYS).index(k) if k in SHORT_KEYS else len(SHORT_KEYS), k))


def setting_label(keys: list[str], values: tuple) -> str:
    """`L=4 · lr=0.003 · warmup=0 · rmsnorm`: a panel's settings, names alone where the value says it."""
    parts = [str(v) if k in ("model.norm", "model.scheme") else f"{SHORT_KEYS.get(k, k.split('.')[-1])}={fmt_value(v)}"
             for k, v in zip(keys, values)]
    return " · ".join(parts)


def scheme_colors(labels: Iterable[str]) -> dict[str, str]:
    """Colour by the scheme a label starts with; labels of unknown schemes take the next free colour."""
    out, spare = {}, iter(plots.CYCLE[7:] + plots.CYCLE[:7])
    for label in labels:
        head = plots._head(label)
        out[label] = SCHEME_COLORS.get(head) or next(spare)
    return out


def norm_styles(records: list) -> dict[str, Any]:
    return {_line_label(r): NORM_STYLES.get(str(r.get("model.norm")), "-") for r in records}


def _line_label(record) -> str:
    """The scheme, with the norm when it is not the default LayerNorm."""
    scheme, norm = record.get("model.scheme"), record.get("model.norm")
    return f"{scheme} · {norm}" if norm and norm != "layernorm" else str(scheme)


def _group(items: Iterable, key: Callable[[Any], Any], sort: bool = True) -> dict[Any, list]:
    """Items by key; keys in natural order (numbers by value, schemes in SCHEME_ORDER) unless sort=False."""
    groups: dict[Any, list] = defaultdict(list)
    for item in items:
        groups[key(item)].append(item)
    return dict(sorted(groups.items(), key=lambda kv: _sort_key(kv[0]))) if sort else dict(groups)


def _sort_key(value: Any) -> tuple:
    if isinstance(value, tuple):
        return (3, tuple(_sort_key(v) for v in value))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value)
    if value in SCHEME_ORDER:
        return (1, SCHEME_ORDER.index(value))
    return (2, natural_key(str(value)))


def _flat(config: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for key, value in (config or {}).items():
        if isinstance(value, dict) and value:
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value if not isinstance(value, (list, dict)) else repr(value)
    return out


def _scheme_key(scheme: Any) -> tuple:
    scheme = str(scheme)
    return (SCHEME_ORDER.index(scheme) if scheme in SCHEME_ORDER else len(SCHEME_ORDER), scheme)


def _scheme_rank(record) -> tuple:
    return _scheme_key(record.get("model.scheme")) + (str(record.get("model.norm")),)


def _mean_text(values: list) -> str:
    values = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return fmt_value(statistics.fmean(values)) if values else "—"


def _omitted(n_groups: int) -> str:
    return f"Showing {MAX_PANELS} of {n_groups} groups. " if n_groups > MAX_PANELS else ""


def _panel_note(keys: list[str]) -> str:
    return f"Panels differ in: {', '.join(SHORT_KEYS.get(k, k.split('.')[-1]) for k in keys)}." if keys else ""
