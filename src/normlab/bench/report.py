"""Rich tables of a `run_bench` result."""
from __future__ import annotations

from rich.table import Table


def tables(result: dict) -> list[Table]:
    out = []
    if result["norms"]:
        out.append(norm_table(result["norms"]))
    if result["steps"]:
        out.append(step_table(result["steps"]))
    return out


def norm_table(rows: list[dict]) -> Table:
    """One row per normalizer x implementation, one column per shape and dtype: time (ratio)."""
    columns = list(dict.fromkeys((tuple(r["shape"]), r["dtype"]) for r in rows))
    table = Table(title="norm forward+backward: median time (ratio to torch.nn.LayerNorm)", title_justify="left")
    table.add_column("norm")
    table.add_column("impl")
    for shape, dtype in columns:
        table.add_column(f"{'x'.join(map(str, shape))} {dtype}", justify="right")
    cells = {(r["norm"], r["impl"], tuple(r["shape"]), r["dtype"]): r for r in rows}
    for norm, impl in dict.fromkeys((r["norm"], r["impl"]) for r in rows):
        row = [norm, impl]
        for shape, dtype in columns:
            r = cells.get((norm, impl, shape, dtype))
            row.append("" if r is None else f"{_ms(r['median_s'])} ({_ratio(r['ratio'])})")
        table.add_row(*row)
    return table


def step_table(rows: list[dict]) -> Table:
    table = Table(title="training step: tokens/s and peak tensor memory (ratio to the nanoGPT-style reference)",
                  title_justify="left")
    for col in ("config", "impl", "scheme/norm", "prec"):
        table.add_column(col)
    for col in ("tok/s", "speedup", "peak MiB", "memory"):
        table.add_column(col, justify="right")
    for r in rows:
        mem = "n/a" if r["peak_mem_mb"] is None else f"{r['peak_mem_mb']:,.1f}"
        mem_ratio = "" if r.get("mem_ratio") is None else _ratio(r["mem_ratio"])
        table.add_row(r["config"], r["impl"], f"{r['scheme']}/{r['norm']}", r["precision"],
                      f"{r['tokens_per_s']:,.0f}", _ratio(r["speedup"]), mem, mem_ratio)
    return table


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds < 0.1 else f"{seconds * 1e3:,.0f} ms"


def _ratio(x: float | None) -> str:
    """3 significant figures, so a ratio far from 1 never prints as 0.00×."""
    return "n/a" if x is None else f"{x:.3g}×"


def environment_line(env: dict) -> str:
    """The benchmark's environment as one readable line (torch, threads, CPU, ...)."""
    return "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in env.items() if v not in (None, ""))
