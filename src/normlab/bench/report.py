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
    table = Table(title="norm forward+backward: median time (ratio to torch.nn.LayerNorm) [min–max over rounds]; "
                        "! a spread past 1.5×: noise, not a finding", title_justify="left")
    table.add_column("norm", overflow="fold")
    table.add_column("impl", overflow="fold")
    for shape, dtype in columns:
        table.add_column(f"{'x'.join(map(str, shape))} {dtype}", justify="right", overflow="fold")
    cells = {(r["norm"], r["impl"], tuple(r["shape"]), r["dtype"]): r for r in rows}
    for norm, impl in dict.fromkeys((r["norm"], r["impl"]) for r in rows):
        row = [norm, impl]
        for shape, dtype in columns:
            r = cells.get((norm, impl, shape, dtype))
            row.append("" if r is None else f"{_ms(r['median_s'])} ({_ratio(r['ratio'])}) "
                       f"[{_ms(r['time_s_min'])}–{_ms(r['time_s_max'])}]{' !' if r['time_s_wide'] else ''}")
        table.add_row(*row)
    return table


def step_table(rows: list[dict]) -> Table:
    table = Table(title="training step: tokens/s [min–max over rounds] and peak tensor memory (ratio to the "
                        "nanoGPT-style reference); ! a spread past 1.5×: noise, not a finding", title_justify="left")
    for col in ("config", "impl", "scheme/norm", "prec"):
        table.add_column(col, overflow="fold")
    for col in ("tok/s", "speedup", "peak MiB", "memory"):
        table.add_column(col, justify="right", overflow="fold")
    for r in rows:
        mem = "n/a" if r["peak_mem_mb"] is None else f"{r['peak_mem_mb']:,.1f}"
        mem_ratio = "" if r.get("mem_ratio") is None else _ratio(r["mem_ratio"])
        table.add_row(r["config"], r["impl"], f"{r['scheme']}/{r['norm']}", r["precision"],
                      f"{r['tokens_per_s']:,.0f} [{r['tokens_per_s_min']:,.0f}–{r['tokens_per_s_max']:,.0f}]"
                      f"{' !' if r['tokens_per_s_wide'] else ''}", _ratio(r["speedup"]), mem, mem_ratio)
    return table


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds < 0.1 else f"{seconds * 1e3:,.0f} ms"


def _ratio(x: float | None) -> str:
    """3 significant figures, so a ratio far from 1 never prints as 0.00×."""
    return "n/a" if x is None else f"{x:.3g}×"


def noise_line(result: dict) -> str | None:
    """One warning line where any figure's rounds spread wider than 1.5× (max / min), else None."""
    wide = [f"{r['norm']}/{r['impl']}" for r in result.get("norms", []) if r.get("time_s_wide")] + \
        [f"{r['config']} {r['impl']}" for r in result.get("steps", []) if r.get("tokens_per_s_wide")]
    if not wide:
        return None
    return (f"warning: {len(wide)} figure(s) spread more than 1.5× over their rounds ({', '.join(wide[:4])}"
            f"{', …' if len(wide) > 4 else ''}): the machine was busy or the call too short; rerun with more "
            "--rounds, --threads 1 --clock cpu, or on a quiet machine before reading a ratio")


def environment_line(env: dict) -> str:
    """The benchmark's environment as one readable line (torch, threads, CPU, ...)."""
    return "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in env.items() if v not in (None, ""))
