"""What every `normlab` command shares: the Typer app, its consoles, the one-line refusal (`fail`), progress
bars, and the option values the registries give, read only when a command's help or values need them (they import
torch; `normlab --help` must not).
"""
from __future__ import annotations

import contextlib
import signal
from enum import Enum
from typing import Callable, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)


def choices(name: str, values) -> type[Enum]:
    """An option's valid values, which --help lists and a bad value is told (click names both)."""
    return Enum(name, {v: v for v in values}, type=str)


def lazy_help(text: Callable[[], str]) -> type[typer.core.TyperCommand]:
    """A command class whose help is `text()`, read when that command's help is shown (it names a registry's
    entries, which import torch): `normlab --help` lists the command by its `short_help` and imports nothing."""

    class _Lazy(typer.core.TyperCommand):
        @property
        def help(self) -> str:
            return text()

        @help.setter
        def help(self, value) -> None:
            pass

    return _Lazy


def one_of(option: str, given: list[str], valid: tuple[str, ...]) -> None:
    """Refuse a value of `option` that is not in `valid`, naming both (as click does for a fixed choice)."""
    for value in given:
        if value not in valid:
            fail(f"{option}: {value!r} is not one of {', '.join(map(repr, valid))}")


def norm_names() -> tuple[str, ...]:
    from normlab.nn.norms import NORMS

    return tuple(NORMS)


EXECUTORS = ("local", "ray")  # normlab.study.jobs.EXECUTORS, which a test keeps equal
Executor = choices("Executor", EXECUTORS)
Parallel = choices("Parallel", ("ddp", "fsdp"))
Only = choices("Only", ("norms", "steps"))
Clock = choices("Clock", ("wall", "cpu"))
Precision = choices("Precision", ("fp32", "bf16"))
Dtype = choices("Dtype", ("float32", "bfloat16", "float16"))
BenchConfig = choices("BenchConfig", ("nanogpt-cpu", "baby-gpt"))


# typer ≥ 0.2x writes a positional argument's Python type beside it in --help (`CONFIG <path>`); the name and the
# help text say it better
typer.core.TyperArgument.display_type_rich = lambda self, ctx: None


app = typer.Typer(help="normlab: where does the normalization go, and which one?",
                  no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  context_settings={"help_option_names": ["-h", "--help"]})


console = Console(soft_wrap=True)  # messages with long paths stay on one line
err_console = Console(stderr=True)


def _version(value: bool) -> None:
    if value:
        import normlab

        console.print(f"normlab {normlab.__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Show normlab's version and exit.")) -> None:
    """normlab: where does the normalization go, and which one?"""


def fail(message: str, code: int = 2) -> None:
    # escaped: an error that quotes `[base]` or `[0.001, 0.003]` must print them, not read them as markup
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@contextlib.contextmanager
def sigterm_as_interrupt():
    """SIGTERM (a scheduler, `kill`, a timeout) stops a run as Ctrl-C does: recorded, resumable, a completed run
    left completed; without this Python dies on it at once."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def exit_quietly(code: int = 2) -> None:
    """Ranks other than 0 under torchrun: rank 0 has said why."""
    raise typer.Exit(code)


def say_note(message: str) -> None:
    err_console.print(f"[bold yellow]note:[/] {message}", highlight=False, soft_wrap=True)


def progress_bar(disable: bool = False) -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[status]}"),
                    console=console, transient=False, disable=disable)


def status_line(row: dict) -> str:
    parts = []
    if row.get("train_loss") is not None:
        parts.append(f"loss {row['train_loss']:.4f}")
    if row.get("val_loss") is not None:
        parts.append(f"val {row['val_loss']:.4f}")
    if row.get("tokens_per_s") is not None:
        parts.append(f"{row['tokens_per_s']:,.0f} tok/s")
    return "  ".join(parts)


PRINT_EVERY_S = 30.0  # progress lines when the output is not a terminal (a log file, CI)


def csv_list(text: Optional[str]) -> list[str] | None:
    return [t.strip() for t in text.split(",") if t.strip()] if text else None
