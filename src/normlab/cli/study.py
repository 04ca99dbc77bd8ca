"""`normlab study` and `normlab report`: the commands (what they show in the terminal: cli/show.py)."""
from __future__ import annotations

import inspect
from pathlib import Path
from typing import Optional

import typer

from normlab.cli.common import Executor, console, csv_list, err_console, fail
from normlab.cli.listings import listing
from normlab.cli.show import counts_text, print_failed, print_plan, print_verdicts, run_with_bar
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
    from normlab.study.load import load_study

    try:  # an unknown preset is refused here, naming the valid ones
        plan = load_study(preset, study_file, csv_list(claims), _seeds(seeds), set_, robustness=robustness,
                          init_pass=init_pass, vary=csv_list(vary))
        if tensorboard:  # before any run starts: each would fail on it, and spend its retries
            from normlab.rundir.events import require_tensorboard
            require_tensorboard()
    except (ConfigError, ValueError) as e:
        fail(str(e))
    if plan_only:
        print_plan(plan)
        return
    console.print(f"normlab study: preset [bold]{plan.preset.name}[/], claims {', '.join(plan.spec.claims)}, "
                  f"seeds {plan.preset.seeds} → {out}", highlight=False)
    try:
        outcome = run_with_bar(plan, out, workers, stack_runs, executor.value, address, tensorboard)
    except KeyboardInterrupt:
        _study_interrupted(out)
    except ConfigError as e:  # OUT's study.sqlite is not a study ledger; an executor that cannot start
        fail(str(e))
    try:
        from normlab.study.publish import publish

        if tensorboard:  # runs trained before the flag was given (or shipped to Ray nodes) get theirs now
            from normlab.study.tensorboard import write_events
            write_events(out)
        # the study as it ended (seeds after their rounds), judged once: the report and the terminal never disagree
        paths, verdicts, status, counts = publish(out, outcome.judged, write_report)
    except ConfigError as e:  # OUT's study.sqlite is not a study ledger
        fail(str(e))
    if verdicts:
        print_verdicts(verdicts, status.status_text())
    print_failed(status.failed)
    where = f"{paths['html']}, {paths['markdown']}, {paths['json']}" if paths else f"no report (`normlab report {out}`)"
    console.print(f"{status.status_text()}: {sum(counts.values())} runs ({counts_text(counts)}) in "
                  f"{outcome.wall_s:.0f} s → {where}", highlight=False)
    raise typer.Exit(_study_exit_code(status))


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
        paths, _, status, _ = publish(out)
    except ConfigError as e:  # study.sqlite is not a ledger, or holds no study
        fail(str(e))
    print_failed(status.failed)
    console.print(f"{status.status_text()} → {paths['html']}, {paths['markdown']}, {paths['json']}", highlight=False)


def _seeds(text: Optional[str]) -> list[int] | None:
    try:
        return [int(s) for s in csv_list(text) or []] or None
    except ValueError:
        fail(f"--seeds {text!r}: seeds must be integers, e.g. --seeds 0,1,2")
