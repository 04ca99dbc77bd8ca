"""`normlab diagnose --html FILE`: one self-contained page per model, drawn as the study's report is.

The model's structure (placement, normalizer, QK-norm, final and embedding norms, per stack),
its objective and loss, a small-multiples plot of every per-layer quantity against depth, the
effective depth with what it is relative to, and the per-layer table.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from normlab.diagnostics.skip import depth_sentence
from normlab.diagnostics.streams import describe
from normlab.diagnostics.structure import placement_text
from normlab.report import plots
from normlab.report.html import CSS, esc, figure
from normlab.report.format import fmt_value
from normlab.report.figure import Figure, Series

METRICS = [  # (row key, panel title, y label, log y)
    ("residual_rms", "Residual stream RMS entering the layer", "RMS", True),
    ("contribution_ratio", "Layer contribution ‖out − in‖ / ‖in‖", "ratio", True),
    ("angular_distance", "Angular distance in → out", "arccos(cos) / π", False),
    ("block_influence", "Block influence 1 − cos(in, out)", "1 − cos", False),
    ("grad_norm", "Gradient norm of the layer's weights", "‖∇W‖", True),
    ("skip_delta_loss", "Loss increase when the layer is skipped", "ΔL (nats)", False),
]


def figures(result: dict[str, Any]) -> list[Figure]:
    """One panel per per-layer quantity the result has, x = layer index (ticks at the layers)."""
    rows = result["layers"]
    out = []
    for key, title, ylabel, logy in METRICS:
        ys = [row.get(key) for row in rows]
        if all(y is None for y in ys):
            continue
        positive = all(y is None or y > 0 for y in ys)
        out.append(Figure(title, "layer", ylabel, [Series(result.get("layers_module") or "layers",
                                                          [row["layer"] for row in rows], ys)],
                          logy=logy and positive))
    return out


def structure_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    rows = [("model", f"{result.get('architecture', '')} ({result['kind']})"),
            ("placement", placement_text(result)), ("normalizer", result["normalizer"]),
            ("final norm", fmt_value(result["final_norm"])),
            ("embedding norm", fmt_value(result.get("detected", {}).get("embed_norm"))),
            ("layers", f"{result['n_layer']} ({result['layers_module']})"),
            ("objective", f"{result['objective']} = {result['loss']:.4f}")]
    if "weights" in result:
        rows.append(("weights", result["weights"]))
    for name, stack in (result.get("stacks") or {}).items():
        rows.append((f"stack {name}", f"{placement_text(stack)}, {stack['normalizer']}, "
                                      f"{stack['n_layer']} layers, final norm {fmt_value(stack['final_norm'])}"))
    depth = result.get("effective_depth")
    if depth:
        rows.append(("effective depth", depth_sentence(depth, result["n_layer"])))
    return rows


def residual_section(result: dict[str, Any]) -> str:
    """The residual design's measures (n streams, AttnRes's sources): its lines and a plot of the composite
    gain along depth; nothing for one stream."""
    residual = result.get("residual") or {}
    lines = describe(residual)
    if not lines:
        return ""
    subs = residual.get("sublayers") or []
    specs = [Figure("Composite gain of the stream mixing (Amax)", "sub-layer", "gain",
                    [Series("forward", [s["sublayer"] for s in subs], [s["composite_forward_gain"] for s in subs]),
                     Series("backward", [s["sublayer"] for s in subs], [s["composite_backward_gain"] for s in subs])])
             ] if subs else []
    grid = plots.draw_grid(specs, ncols=1) if specs else None
    items = "".join(f"<li>{esc(line.strip())}</li>" for line in lines)
    plot = figure(grid, "The mixing's composite gain against depth", "composite gain") if grid else ""
    return f'<section id="residual"><h2>Residual stream</h2><ul>{items}</ul>{plot}</section>'


def layer_table(result: dict[str, Any]) -> str:
    keys = ["layer"] + [key for key, *_ in METRICS if any(row.get(key) is not None for row in result["layers"])]
    head = "".join(f"<th>{esc(k.replace('_', ' '))}</th>" for k in keys)
    body = "".join("<tr>" + "".join(f"<td>{esc(fmt_value(row.get(k)))}</td>" for k in keys) + "</tr>"
                   for row in result["layers"])
    return f'<table class="rows"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def render(result: dict[str, Any]) -> str:
    title = f"normlab diagnose: {Path(result['target']).name or result['target']}"
    specs = figures(result)
    grid = plots.draw_grid(specs, ncols=plots.balanced_columns(len(specs), 3)) if specs else None
    kv = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in structure_rows(result))
    body = [f"<header><h1>{esc(title)}</h1><p>{esc(result['target'])}</p></header>",
            f'<section id="structure"><h2>Structure</h2><table class="kv"><tbody>{kv}</tbody></table></section>',
            residual_section(result),
            '<section id="layers"><h2>Per layer</h2>',
            f'<div class="wide">{figure(grid, "Each quantity against depth, one panel each", "per-layer plots")}'
            "</div>" if grid else "",
            layer_table(result), "</section>",
            "<footer>Written by normlab. This page is self-contained: it loads nothing and runs no script.</footer>"]
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n"
            + "\n".join(b for b in body if b) + "\n</main>\n</body>\n</html>\n")


def write(result: dict[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(result), "utf-8")
    return path
