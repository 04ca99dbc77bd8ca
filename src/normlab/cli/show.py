"""What `normlab study` and `normlab report` show in the terminal: the power plan, the live progress (a bar and a
line per run training, or a line now and then in a log), the verdicts and the failed runs. cli/study.py holds the
commands; this module only prints what the study decided."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from normlab.cli.common import PRINT_EVERY_S, console


def run_with_bar(plan, out: Path, workers: Optional[int], stack_runs: Optional[bool], executor: str = "local",
                 address: Optional[str] = None, tensorboard: bool = False):
    """Run the study with its live progress: a bar and a line per run training on a terminal, else a line every
    PRINT_EVERY_S seconds."""
    from normlab.study.ledger import Ledger
    from normlab.study.runner import run_study
    from normlab.study.state import active_runs

    live = console.is_terminal  # a terminal: a bar, and a line per active run; a log file: a line now and then
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[status]}"),
                  console=console, disable=not live) as bar:
        task = bar.add_task("study", total=1.0, status="")
        lines: dict[str, TaskID] = {}  # run id → its progress line
        printed = [0.0, -1.0]  # when, and at what done cost, a line was last printed

        def on_progress(done: float, total: float, counts: dict[str, int]) -> None:
            status = "  ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            bar.update(task, total=total, completed=done, status=status)
            if live:
                sync_run_lines(bar, lines, active_runs(Ledger(out)))
            elif time.monotonic() - printed[0] >= PRINT_EVERY_S or (done >= total and done != printed[1]):
                printed[0], printed[1] = time.monotonic(), done
                active = active_runs(Ledger(out))  # read only when a line is printed
                console.print(f"study {100 * done / max(total, 1e-12):.0f}% ({status})"
                              + "".join(f"\n  {run.progress_text()}" for run in active), highlight=False)

        return run_study(plan, out, workers, on_progress, stack_runs=stack_runs, executor=executor, address=address,
                         say=lambda line: bar.console.print(line, highlight=False), tensorboard=tensorboard)


def sync_run_lines(bar: Progress, lines: dict, active: list) -> None:
    """One bar line per run being trained: added when it starts, removed when it is done."""
    now = {run.id: run for run in active}
    for rid in [r for r in lines if r not in now]:
        bar.remove_task(lines.pop(rid))
    for rid, run in now.items():
        loss = run.phase or ("" if run.loss is None else f"loss {run.loss:.4f}")
        if rid not in lines:
            lines[rid] = bar.add_task(f"  {run.name}", total=run.steps, status=loss)
        bar.update(lines[rid], completed=run.step, total=run.steps, status=loss)


def print_plan(plan) -> None:
    """The study's power plan, before anything trains (study/power.py, resolved with the plan)."""
    from normlab.study import power

    table = Table(title=f"power plan of {plan.preset.name}: Holm over {len(plan.claims)} claims at α = 0.05",
                  title_justify="left")
    for col in ("claim", "primary test", "seeds (looks)", "share of α", "floor of p", "level, strictest step",
                "reachable", "sized on the design seeds"):
        table.add_column(col, overflow="fold")
    for r in plan.power_plan:
        table.add_row(r.claim, r.test, ", ".join(map(str, r.seeds)), ", ".join(f"{x:g}" for x in r.shares),
                      ", ".join(f"{x:.2g}" for x in r.floors), ", ".join(f"{x:.2g}" for x in r.strictest),
                      r.reachable, r.design or "—")
    console.print(table)
    console.print("floor: the smallest p the test can reach at those seeds (an exact sign test: ½ⁿ); level: α/m "
                  "times the look's share, which Holm's later steps raise; " + power.SCHEME, highlight=False)


def print_failed(failed: list[dict]) -> None:
    """As the report's "Failed runs": the reason's first line (the traceback stays in study.sqlite)."""
    from normlab.report.format import first_line, fmt_settings

    if not failed:
        return
    table = Table(title=f"failed runs ({len(failed)})", title_justify="left")
    for col in ("run", "settings", "attempts", "reason"):
        table.add_column(col, overflow="fold")
    for run in failed:
        table.add_row(escape(run["id"]), escape(fmt_settings(run["settings"])), str(run["attempts"]),
                      f"[red]{escape(first_line(run['reason']))}[/]")
    console.print(table)


def print_verdicts(verdicts, status: str = "final") -> None:
    from normlab.report.outcome import Totals

    rows = [v.to_dict() for v in verdicts]
    title = "verdicts" if status == "final" else f"verdicts ({status}: not final)"
    title += ": " + Totals.of(rows).text()
    table = Table(title=title, title_justify="left")
    design = any(v.design for v in verdicts)
    for col in ("claim", "verdict", "key number", "seeds") + (("design seeds",) if design else ()):
        table.add_column(col, overflow="fold")
    colour = {"holds": "green", "does not hold": "red", "inconclusive": "yellow", "depends on": "cyan"}
    for v, row in zip(verdicts, rows):
        outcome = v.outcome
        value = "n/a" if v.value is None else f"{v.value:.4g}"
        mark = "".join(f" [bold magenta]({m})[/]" for m, on in (("fragile", v.fragile),
                                                                ("init-dependent", v.init_dependent)) if on)
        extra = outcome.why_text or (outcome.scope_text if outcome.open_levels else "")
        interval = f" [{v.interval[0]:.4g}, {v.interval[1]:.4g}]" if v.interval else ""
        beside = ((f"{v.design['verdict']}" + (" (replicated)" if v.design.get("replicated") else ""),)
                  if design and v.design else ("—",) if design else ())
        table.add_row(v.id, f"[{colour[outcome.kind]}]{escape(outcome.text)}[/]{mark}"
                      + (f" ({escape(extra)})" if extra else ""),
                      escape(v.reading or f"{v.statistic} = {value}") + escape(interval),
                      str(len(v.seeds) if v.seeds else v.n_seeds), *beside)
        for part in v.parts:
            table.add_row("", f"  ↳ [{colour[part['verdict']]}]{part['verdict']}[/]", escape(part["name"]),
                          str(len(part.get("seeds") or [])), *(("",) if design else ()))
    console.print(table)


def counts_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
