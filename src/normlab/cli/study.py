"""`normlab study` and `normlab report`: the study's command, its live progress and its printed verdicts."""
from __future__ import annotations

import inspect
import time
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from normlab.cli.common import PRINT_EVERY_S, Executor, console, csv_list, err_console, fail
from normlab.cli.listings import listing
from normlab.errors import ConfigError


STUDY_HELP = """Turn the claims into verdicts: train the runs they need, measure, write the report.

    \b
    Exit codes:
    0 final report: every run completed or diverged;
    2 bad input: the study, or an OUT/study.sqlite that is not a study ledger;
    4 final report, but runs failed (listed, with their reasons);
    5 partial report (wins over 4): runs left to train or retry; run again.
    Two processes may share OUT: each trains runs the other has not taken, waits for the other's, and both end
    with the same final report and exit code."""


def study_help() -> str:
    presets = "\n".join(f"{name}: {summary}" for name, summary in listing()["presets"])  # no torch (cli/listings.py)
    return f"{inspect.cleandoc(STUDY_HELP)}\n\n\b\nPresets (--preset; costs: docs/cost.md):\n{presets}"


def study(
    preset: str = typer.Option("standard", "--preset", metavar="NAME", help="The study's preset (listed above)."),
    study_file: Optional[Path] = typer.Option(None, "--study", metavar="FILE",
                                              help="A study TOML (preset, claims, seeds, axes)."),
    out: Path = typer.Option(Path("normlab-study"), "--out", "-o", metavar="DIR",
                             help="Study directory (created, or resumed)."),
    claims: Optional[str] = typer.Option(None, "--claims", metavar="IDS",
                                         help="Comma-separated claim ids, e.g. C1,C11."),
    seeds: Optional[str] = typer.Option(None, "--seeds", metavar="SEEDS", help="Comma-separated seeds, e.g. 0,1,2."),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE",
                                   help="Override the preset's base config, e.g. train.steps=100."),
    workers: Optional[int] = typer.Option(None, "--workers", min=1, metavar="N", help="Parallel training processes."),
    tensorboard: bool = typer.Option(False, "--tensorboard", help="Each run writes TensorBoard events live to "
                                     "OUT/tensorboard."),
    robustness: bool = typer.Option(False, "--robustness", help="Rerun every run at another thread count: a "
                                    "verdict that changes is `fragile`."),
    init_pass: Optional[bool] = typer.Option(None, "--init-pass/--no-init-pass", help="Also judge each training "
                                             "claim under the other init recipe (xiong <-> gpt2); default: the "
                                             "preset's choice."),
    vary: Optional[str] = typer.Option(None, "--vary", metavar="FACTORS",
                                       help="Also judge each training claim under the other level of init, "
                                            "context (32/64 tokens) or width (64/128); a verdict that flips is "
                                            "`depends on <factor>`."),
    stack_runs: Optional[bool] = typer.Option(None, "--stack-runs/--no-stack-runs",
                                              help="Train runs of one shape as one stacked model; default: on a "
                                                   "GPU, not on a CPU (docs/performance.md)."),
    executor: Executor = typer.Option("local", "--executor", help="local (worker processes) or ray (a Ray task "
                                 "per run; pip install -e '.[ray]')."),
    address: Optional[str] = typer.Option(None, "--address", metavar="HOST:PORT",
                                          help="With --executor ray: the cluster (HOST:PORT or auto); unset: a "
                                          "local Ray."),
    write_report: bool = typer.Option(True, "--report/--no-report", help="Write the report when done; "
                                      "--no-report: train and say how far it is (`normlab report` writes it)."),
    plan_only: bool = typer.Option(False, "--plan", help="Print the power plan (each claim's test, the smallest p it "
                              "can reach at its seeds, the level it must beat) and exit; trains nothing."),
) -> None:
    from normlab.study.plan import load_study

    try:  # an unknown preset is refused here, naming the valid ones
        plan = load_study(preset, study_file, csv_list(claims), _seeds(seeds), set_, robustness=robustness,
                          init_pass=init_pass, vary=csv_list(vary))
        if tensorboard:  # before any run starts: each would fail on it, and spend its retries
            from normlab.rundir.events import require_tensorboard
            require_tensorboard()
    except (ConfigError, ValueError) as e:
        fail(str(e))
    if plan_only:
        _print_plan(plan)
        return
    console.print(f"normlab study: preset [bold]{plan.preset.name}[/], claims {', '.join(plan.spec.claims)}, "
                  f"seeds {plan.preset.seeds} → {out}", highlight=False)
    try:
        outcome = _run_with_bar(plan, out, workers, stack_runs, executor.value, address, tensorboard)
    except KeyboardInterrupt:
        _study_interrupted(out)
    except ConfigError as e:  # OUT's study.sqlite is not a study ledger; an executor that cannot start
        fail(str(e))
    try:
        from normlab.study.ledger import Ledger
        from normlab.study.publish import publish, run_counts

        if tensorboard:  # runs trained before the flag was given (or shipped to Ray nodes) get theirs now
            from normlab.study.tensorboard import write_events
            write_events(out)
        # the study as it ended, judged once: the report and the terminal never disagree
        if write_report:
            paths, verdicts, status = publish(out, outcome.judged)  # the study as it ended: seeds after their rounds
        else:
            paths, verdicts, status = None, [], outcome.judged.status
        counts = run_counts(outcome.plan, Ledger(out), outcome.ids)  # each word in its one meaning
    except ConfigError as e:  # OUT's study.sqlite is not a study ledger
        fail(str(e))
    if verdicts:
        _print_verdicts(verdicts, status.status_text())
    _print_failed(status.failed)
    where = f"{paths['html']}, {paths['markdown']}, {paths['json']}" if paths else f"no report (`normlab report {out}`)"
    console.print(f"{status.status_text()}: {sum(counts.values())} runs ({_counts(counts)}) in "
                  f"{outcome.wall_s:.0f} s → {where}", highlight=False)
    raise typer.Exit(_study_exit_code(status))


def _run_with_bar(plan, out: Path, workers: Optional[int], stack_runs: Optional[bool], executor: str = "local",
                  address: Optional[str] = None, tensorboard: bool = False):
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
                _sync_run_lines(bar, lines, active_runs(Ledger(out)))
            elif time.monotonic() - printed[0] >= PRINT_EVERY_S or (done >= total and done != printed[1]):
                printed[0], printed[1] = time.monotonic(), done
                active = active_runs(Ledger(out))  # read only when a line is printed
                console.print(f"study {100 * done / max(total, 1e-12):.0f}% ({status})"
                              + "".join(f"\n  {run.progress_text()}" for run in active), highlight=False)

        return run_study(plan, out, workers, on_progress, stack_runs=stack_runs, executor=executor, address=address,
                         say=lambda line: bar.console.print(line, highlight=False), tensorboard=tensorboard)


def _sync_run_lines(bar: Progress, lines: dict, active: list) -> None:
    """One bar line per run being trained: added when it starts, removed when it is done."""
    now = {run.id: run for run in active}
    for rid in [r for r in lines if r not in now]:
        bar.remove_task(lines.pop(rid))
    for rid, run in now.items():
        loss = run.phase or ("" if run.loss is None else f"loss {run.loss:.4f}")
        if rid not in lines:
            lines[rid] = bar.add_task(f"  {run.name}", total=run.steps, status=loss)
        bar.update(lines[rid], completed=run.step, total=run.steps, status=loss)


def _study_interrupted(out: Path) -> None:
    """Ctrl-C: the workers have stopped and handed their runs back; one line, no traceback, exit 130."""
    from normlab.study.ledger import Ledger

    try:
        done, total = Ledger(out).progress()
        where = f": {done} of {total} runs settled"
    except ConfigError:
        where = ""
    err_console.print(f"[yellow]interrupted[/]{where}; run the same command again to resume (interrupted runs go on "
                      "from their last checkpoint)", highlight=False)
    raise typer.Exit(130)


def _study_exit_code(status) -> int:
    """5 partial (first: a failed run may yet be retried, and nothing is final), 4 failed runs, else 0."""
    if not status.final:
        return 5
    return 4 if status.failed else 0


def report(out: Path = typer.Argument(Path("normlab-study"), metavar="OUT", help="A study directory.")) -> None:
    """Re-render a study's report from its ledger, without re-running anything.

    A study not yet finished gets a report that says "partial" (exit 0: it was written).
    Exit 2 if OUT is not a study directory.
    """
    if not (out / "study.sqlite").is_file():
        fail(f"{str(out)!r} has no study.sqlite: not a normlab study directory")
    from normlab.study.publish import publish

    try:
        paths, _, status = publish(out)
    except ConfigError as e:  # study.sqlite is not a ledger, or holds no study
        fail(str(e))
    _print_failed(status.failed)
    console.print(f"{status.status_text()} → {paths['html']}, {paths['markdown']}, {paths['json']}", highlight=False)


def _print_plan(plan) -> None:
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


def _print_failed(failed: list[dict]) -> None:
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


def _print_verdicts(verdicts, status: str = "final") -> None:
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


def _seeds(text: Optional[str]) -> list[int] | None:
    try:
        return [int(s) for s in csv_list(text) or []] or None
    except ValueError:
        fail(f"--seeds {text!r}: seeds must be integers, e.g. --seeds 0,1,2")


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
