"""The `normlab` command line."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from normlab.config import ConfigError, load_config
from normlab.data import CorpusError
from normlab.nn.norms import NORMS
from normlab.nn.schemes import SCHEMES

app = typer.Typer(help="normlab: where does the normalization go, and which one?",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
console = Console(soft_wrap=True)  # messages with long paths stay on one line
err_console = Console(stderr=True)


def fail(message: str, code: int = 2) -> None:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@app.command()
def train(
    config: Optional[Path] = typer.Argument(None, help="TOML config (see configs/); unset: the defaults."),
    set_: list[str] = typer.Option([], "--set", help="Override a key, e.g. --set model.n_layer=6 (repeatable)."),
    out: Path = typer.Option(..., "--out", "-o", help="Run directory to create, or to resume."),
    fresh: bool = typer.Option(False, "--fresh", help="Delete what OUT holds and start over."),
) -> None:
    """Train one model; resumes OUT if it holds this run, interrupted."""
    from normlab.train.loop import RunConflictError, Trainer

    try:
        cfg = load_config(config, set_)
        if fresh and out.exists():
            shutil.rmtree(out)
        trainer = Trainer(cfg, str(out))
    except (ConfigError, CorpusError, ValueError) as e:
        fail(str(e))
    steps = trainer.tc.steps
    with _progress() as progress:
        task = progress.add_task("train", total=steps, status="")
        trainer.on_log = lambda row: progress.update(task, completed=row["step"], status=_status_line(row))
        try:
            result = trainer.run()
        except RunConflictError as e:
            fail(str(e))
        progress.update(task, completed=result.step)
    _print_result(result, out)
    if result.status == "diverged":
        raise typer.Exit(3)


def _progress() -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[status]}"),
                    console=console, transient=False)


def _status_line(row: dict) -> str:
    parts = []
    if row.get("train_loss") is not None:
        parts.append(f"loss {row['train_loss']:.4f}")
    if row.get("val_loss") is not None:
        parts.append(f"val {row['val_loss']:.4f}")
    if row.get("tokens_per_s") is not None:
        parts.append(f"{row['tokens_per_s']:,.0f} tok/s")
    return "  ".join(parts)


def _print_result(result, out: Path) -> None:
    if result.status == "completed":
        val = f"{result.val_loss:.4f}" if result.val_loss is not None else "n/a"
        console.print(f"[green]completed[/] {result.step} steps, val loss {val} → {out}")
    else:
        console.print(f"[yellow]{result.status}[/] at step {result.step}: {result.reason} → {out}")


@app.command()
def schemes(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """List the placement schemes and normalizers with their formulas."""
    scheme_rows = [{"name": n, "formula": c.formula, "paper": c.paper, "final_norm": c.final_norm,
                    "options": dict(c.OPTIONS), "incompatible_norms": dict(c.incompatible_norms)}
                   for n, c in SCHEMES.items()]
    norm_rows = [{"name": n, "formula": c.formula, "paper": c.paper, "options": dict(c.OPTIONS)}
                 for n, c in NORMS.items()]
    if as_json:
        print(json.dumps({"schemes": scheme_rows, "norms": norm_rows}, indent=2, ensure_ascii=False))
        return
    table = Table(title="placement schemes", title_justify="left")
    for col in ("name", "formula", "paper"):
        table.add_column(col)
    for row in scheme_rows:
        table.add_row(row["name"], row["formula"], row["paper"])
    console.print(table)
    table = Table(title="normalizers", title_justify="left")
    for col in ("name", "formula", "paper"):
        table.add_column(col)
    for row in norm_rows:
        table.add_row(row["name"], row["formula"], row["paper"])
    console.print(table)


@app.command()
def check(
    target: Path = typer.Argument(..., help="A config TOML, a run directory, or a checkpoint.pt."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Static checks of a model's normalization; exit 1 on any error or warning."""
    from normlab.diagnostics.check import check_target

    try:
        _, at_init, findings = check_target(target)
    except (ConfigError, CorpusError, ValueError) as e:
        fail(str(e))
    if as_json:
        print(json.dumps({"target": str(target), "at_init": at_init,
                          "findings": [f.to_dict() for f in findings]}, indent=2, ensure_ascii=False))
    elif not findings:
        console.print(f"[green]ok[/] {target}: no findings")
    else:
        table = Table(title=f"normlab check {target}", title_justify="left")
        for col in ("severity", "check", "where", "finding", "fix"):
            table.add_column(col, overflow="fold")
        for f in findings:
            table.add_row(f.severity, f.code, f.where, f.message, f.fix)
        console.print(table)
    if any(f.severity in ("error", "warning") for f in findings):
        raise typer.Exit(1)


@app.command()
def diagnose(
    target: Path = typer.Argument(..., help="A normlab run directory or checkpoint, or a Hugging Face model directory."),
    text: Optional[Path] = typer.Option(None, "--text", help="UTF-8 text to measure on; default: tiny Shakespeare."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    no_skip: bool = typer.Option(False, "--no-skip", help="Skip the layer-skip ablation."),
) -> None:
    """Per-layer residual RMS, contribution, angular distance, block influence, gradients and layer-skip ΔL."""
    from normlab.diagnostics.diagnose import diagnose as run_diagnose, load_subject

    try:
        result = run_diagnose(load_subject(target, str(text) if text else None), skip=not no_skip)
    except (ConfigError, CorpusError, ValueError, OSError) as e:
        fail(str(e))
    if as_json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return
    console.print(f"[bold]{result['target']}[/]: placement [cyan]{result['placement']}[/], normalizer "
                  f"[cyan]{result['normalizer']}[/], final norm {result['final_norm']}, {result['n_layer']} layers; "
                  f"{result['objective']} = {result['loss']:.4f}", highlight=False)
    table = Table(title_justify="left")
    columns = ["layer", "residual_rms", "contribution_ratio", "angular_distance", "block_influence", "grad_norm",
               "skip_delta_loss"]
    for col in columns:
        table.add_column(col.replace("_", " "), justify="right")
    for row in result["layers"]:
        table.add_row(*[_fmt(row.get(col)) for col in columns])
    console.print(table)
    if "effective_depth" in result:
        e = result["effective_depth"]
        console.print(f"effective depth: {e['effective_depth']} of {result['n_layer']} layers raise the loss by "
                      f"more than {e['threshold']:.0%} when skipped")


def _fmt(value) -> str:
    if value is None:
        return "–"
    return str(value) if isinstance(value, int) else f"{value:.4g}"


def main() -> None:
    app()


if __name__ == "__main__":
    main()
