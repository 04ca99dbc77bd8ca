"""The `normlab` command line.

Nothing here imports torch at module level: the registries whose names the options list (schemes, normalizers,
presets, Hugging Face families) are read when a command's help or values need them (`common.lazy_help`, `common.one_of`), so
that `normlab --help` answers at once (`benchmarks/cli_startup.py`); each command imports what it runs.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.progress import TaskID
from rich.table import Table

from normlab.cli.common import (PRINT_EVERY_S, BenchConfig, Clock, Dtype, Only, Parallel, Precision, app, console,
                                err_console, exit_quietly, fail, lazy_help, norm_names, one_of, progress_bar, say_note,
                                sigterm_as_interrupt, status_line)
from normlab.cli.listings import listing
from normlab.cli.study import STUDY_HELP, report, study, study_help
from normlab.errors import ConfigError, CorpusError


def _bench_help() -> str:
    names = listing()  # the registries' names, without importing torch (cli/listings.py)
    return f"{BENCH_HELP}\n\n--scheme: {', '.join(names['schemes'])}, all.\n\n--norm: {', '.join(names['norms'])}."


@app.command()
def train(
    config: Optional[Path] = typer.Argument(None, metavar="CONFIG",
                                            help="TOML config (see configs/); unset: the defaults."),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE",
                                   help="Override a key, e.g. --set model.n_layer=6 (repeatable)."),
    out: Path = typer.Option(..., "--out", "-o", metavar="DIR", help="Run directory to create, or to resume."),
    fresh: bool = typer.Option(False, "--fresh", help="Start over: delete what normlab wrote in OUT (refused if OUT "
                               "is not a normlab run directory or holds other files)."),
    tensorboard: bool = typer.Option(False, "--tensorboard", help="Write TensorBoard events live to OUT/tensorboard "
                                     "(scalars, per-layer metrics, hparams): tensorboard --logdir OUT."),
    parallel: Parallel = typer.Option("ddp", "--parallel", help="Under torchrun: ddp (DistributedDataParallel) or fsdp "
                                 "(FSDP2, each block sharded); train.batch_size is the global batch."),
) -> None:
    """Train one model; resumes OUT if it holds this run, interrupted.

    Data-parallel: torchrun --nproc_per_node N -m normlab train [CONFIG] --out OUT (gloo on CPU, NCCL on CUDA);
    only rank 0 writes OUT, and its checkpoints resume on any number of processes.
    """
    from normlab.rundir import read_config_file
    from normlab.train.distributed import SINGLE, close, from_env
    from normlab.train.lifecycle import RunError
    from normlab.train.loop import Trainer

    dist = SINGLE
    try:
        if tensorboard:
            from normlab.rundir.events import require_tensorboard
            require_tensorboard()
        cfg = read_config_file(config, set_)
        dist = from_env(cfg.train.device, parallel.value)
        trainer = Trainer(cfg, str(out), fresh=fresh, on_note=say_note if dist.main else None, dist=dist,
                          events=out / "tensorboard" if tensorboard else None)
    except (ConfigError, CorpusError, ValueError) as e:
        close(dist)
        fail(str(e)) if dist.main else exit_quietly()
    ended = False
    try:
        with sigterm_as_interrupt():
            result = _train_with_bar(trainer) if dist.main else trainer.run()
        ended = True  # completed or diverged: every rank ends here together (they share the global loss)
    except RunError as e:
        fail(str(e)) if dist.main else exit_quietly()
    except KeyboardInterrupt:
        if dist.main and trainer.result is not None:  # cut short after the last step: the run is completed
            _print_result(trainer.result, out)
            err_console.print(f"[yellow]interrupted[/] in the end-of-run diagnostics; `normlab diagnose {out} "
                              "--layer-skip` runs the layer-skip ablation", highlight=False)
        elif dist.main:
            err_console.print(f"[yellow]interrupted[/] at step {getattr(trainer, 'step', 0)}; run the same command "
                              "again to resume from the last checkpoint", highlight=False)
        raise typer.Exit(130)
    finally:
        close(dist, wait=ended)
    if dist.main:
        _print_result(result, out)
    # rank 0 alone carries the diverged exit code: torchrun stops the other ranks as soon as one exits non-zero,
    # which could cut rank 0 off before it has recorded and reported the divergence
    if result.status == "diverged" and dist.main:
        raise typer.Exit(3)


def _train_with_bar(trainer):
    from normlab.train.lifecycle import RunError

    live, printed = console.is_terminal, [0.0]  # not a terminal: a line at each evaluation, and every 30 s

    def on_log(row: dict) -> None:
        progress.update(task, completed=row["step"], status=status_line(row))
        if not live and ("val_loss" in row or time.monotonic() - printed[0] >= PRINT_EVERY_S):
            printed[0] = time.monotonic()
            console.print(f"step {row['step']}/{trainer.tc.steps}  {status_line(row)}", highlight=False)

    def on_phase(phase) -> None:  # the work after the last step (train/end_of_run.py): a bar each
        if phase.name not in phases:
            phases[phase.name] = progress.add_task(phase.name, total=phase.total, status=phase.note)
        progress.update(phases[phase.name], total=phase.total, completed=phase.done, status=phase.note)
        if not live and (phase.ended or phase.done == 0 or time.monotonic() - printed[0] >= PRINT_EVERY_S):
            printed[0] = time.monotonic()
            said = f"{phase.name} done in {phase.elapsed_s:.1f} s" if phase.ended else phase.progress_text()
            console.print(said + (f"  ({phase.note})" if phase.note else ""), highlight=False)

    phases: dict[str, TaskID] = {}
    with progress_bar(disable=not live) as progress:
        task = progress.add_task("train", total=trainer.tc.steps, status="")
        trainer.on_log = on_log
        trainer.phases.on_phase = on_phase
        try:
            result = trainer.run()
        except (RunError, KeyboardInterrupt):
            progress.stop()
            raise
        progress.update(task, completed=result.step)
    return result


def _print_result(result, out: Path) -> None:
    if result.status == "completed":
        val = f"{result.val_loss:.4f}" if result.val_loss is not None else "n/a"
        console.print(f"[green]completed[/] {result.step} steps, val loss {val} → {out}")
        if result.outcome == "failed_to_train":
            console.print(f"[yellow]{escape(result.reason or 'failed to train')}[/]", highlight=False)
    else:
        console.print(f"[yellow]{result.status}[/] at step {result.step}: {result.reason} → {out}")


@app.command()
def schemes(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """List the placement schemes and normalizers with their formulas."""
    from normlab.nn.norms import NORMS
    from normlab.nn.schemes import SCHEMES

    scheme_rows = [{"name": n, "formula": c.formula, "paper": c.paper, "source": c.source, "final_norm": c.final_norm,
                    "options": dict(c.OPTIONS),
                    "incompatible_norms": {n: c.norm_refusal(n) for n in NORMS.names() if c.norm_refusal(n)},
                    # what the scheme's paper fixes: a config that leaves it unset gets it, one that sets another
                    # value is refused
                    "requires": {key: {"value": value, "why": why} for key, (value, why) in c.facts.requires.items()},
                    "undefined_architectures": dict(c.facts.undefined_architectures)}
                   for n, c in SCHEMES.items()]
    norm_rows = [{"name": n, "formula": c.formula, "paper": c.paper, "options": dict(c.OPTIONS)}
                 for n, c in NORMS.items()]
    if as_json:
        print(json.dumps({"schemes": scheme_rows, "norms": norm_rows}, indent=2, ensure_ascii=False))
        return
    for title, rows in (("placement schemes", scheme_rows), ("normalizers", norm_rows)):
        table = Table(title=title, title_justify="left")
        fixes, sources = any(row.get("requires") for row in rows), any(row.get("source") for row in rows)
        for col in ("name", "formula", "paper") + (("source",) if sources else ()) + (("fixes",) if fixes else ()):
            table.add_column(col)
        for row in rows:
            fixed = ", ".join(f"{k} = {v['value']!r}" for k, v in row.get("requires", {}).items())
            # escaped: a formula's brackets ([tanh(x·βᵀ)·α + γ]) are not rich markup
            table.add_row(row["name"], escape(row["formula"]), escape(row["paper"]),
                          *((escape(row["source"]),) if sources else ()), *((escape(fixed),) if fixes else ()))
        console.print(table)


app.command(cls=lazy_help(study_help), short_help=STUDY_HELP.splitlines()[0])(study)  # cli/study.py
app.command()(report)


@app.command()
def check(
    target: Path = typer.Argument(..., metavar="TARGET", help="A config TOML, a run directory, or a checkpoint.pt."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    init: bool = typer.Option(False, "--init", help="A run without a checkpoint: check its untrained model."),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE",
                                   help="Override a key of a config TOML, as train's --set (repeatable); refused for "
                                        "a run or checkpoint, whose weights were trained with their own config."),
) -> None:
    """Static checks of a model's normalization; exit 1 on any error or warning."""
    from normlab.diagnostics.check import check_target

    try:
        _, at_init, findings = check_target(target, init=init, overrides=set_)
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
    target: Path = typer.Argument(..., metavar="TARGET",
                                  help="A normlab run directory or checkpoint, or a Hugging Face model directory."),
    text: Optional[Path] = typer.Option(None, "--text", metavar="FILE",
                                        help="UTF-8 text to measure on; default: tiny Shakespeare."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    no_skip: bool = typer.Option(False, "--no-skip", help="Skip the layer-skip ablation."),
    init: bool = typer.Option(False, "--init", help="A normlab run without a checkpoint: measure its untrained "
                              "model (the output says so)."),
    device: str = typer.Option("cpu", "--device", metavar="DEVICE", help="cpu, cuda, cuda:N, or auto (CUDA when "
                               "present)."),
    dtype: Dtype = typer.Option("float32", "--dtype", help="The model's dtype while measured (statistics are taken "
                                "in fp32)."),
    html: Optional[Path] = typer.Option(None, "--html", metavar="FILE", help="Also write a one-page report with "
                                        "per-layer plots to FILE."),
    layer_skip: bool = typer.Option(False, "--layer-skip", help="A completed normlab run directory: measure its "
                                    "end-of-run layer-skip ablation whole (the blocks diagnostics.layer_skip_most "
                                    "asks for, on its own val batches, all of them, no time budget) into "
                                    "RUN/layer_skip.json; nothing else is measured."),
) -> None:
    """Per-layer residual RMS, contribution, angular distance, block influence, gradients and layer-skip ΔL."""
    from normlab.diagnostics.diagnose import diagnose as run_diagnose, load_subject
    from normlab.diagnostics.structure import placement_text

    if layer_skip:
        _layer_skip_again(target, device, as_json, refused={"--text": text, "--no-skip": no_skip, "--init": init,
                                                             "--html": html, "--dtype": dtype.value != "float32"})
        return
    try:
        subject = load_subject(target, str(text) if text else None, init=init, device=device, dtype=dtype.value)
        result = run_diagnose(subject, skip=not no_skip)
    except (ConfigError, CorpusError, ValueError, OSError) as e:
        fail(str(e))
    if html is not None:
        from normlab.diagnostics.page import write

        written = write(result, html)
        (err_console if as_json else console).print(f"wrote {written}", highlight=False)
    if str(result.get("tokenizer", "")).startswith("none"):  # a fallback is said, never silent
        err_console.print(f"[yellow]note:[/] tokenizer {escape(result['tokenizer'])}", highlight=False)
    if as_json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return
    console.print(f"[bold]{result['target']}[/]: placement [cyan]{placement_text(result)}[/], normalizer "
                  f"[cyan]{result['normalizer']}[/], final norm {result['final_norm']}, {result['n_layer']} layers; "
                  f"{result['objective']} = {result['loss']:.4f}", highlight=False)
    if "weights" in result:
        console.print(f"weights: {result['weights']}", highlight=False)
    table = Table(title_justify="left")
    columns = ["layer", "residual_rms", "contribution_ratio", "angular_distance", "block_influence", "grad_norm",
               "skip_delta_loss"]
    for col in columns:
        table.add_column(col.replace("_", " "), justify="right")
    for row in result["layers"]:
        table.add_row(*[_fmt(row.get(col)) for col in columns])
    console.print(table)
    from normlab.diagnostics.streams import describe

    for line in describe(result.get("residual", {})):
        console.print(line, highlight=False)
    if "effective_depth" in result:
        from normlab.diagnostics.skip import depth_sentence

        console.print(f"effective depth: {depth_sentence(result['effective_depth'], result['n_layer'])}",
                      highlight=False)


def _layer_skip_again(run: Path, device: str, as_json: bool, refused: dict) -> None:
    """`normlab diagnose RUN --layer-skip`: the run's own ablation, with a bar and an estimate."""
    from normlab.diagnostics.skip import depth_sentence
    from normlab.train.loop import layer_skip_again

    given = [flag for flag, value in refused.items() if value]
    if given:
        fail(f"--layer-skip measures a run on its own val batches, in its own dtype: leave out {', '.join(given)}")

    def on_phase(phase) -> None:
        if phase.name not in tasks:
            tasks[phase.name] = bar.add_task(phase.name, total=phase.total, status=phase.note)
        bar.update(tasks[phase.name], total=phase.total, completed=phase.done, status=phase.note)

    tasks: dict[str, TaskID] = {}
    try:
        with sigterm_as_interrupt(), progress_bar(disable=as_json or not err_console.is_terminal) as bar:
            record = layer_skip_again(run, device, on_phase)
    except KeyboardInterrupt:
        err_console.print(f"[yellow]interrupted[/]; what was measured is in {run / 'layer_skip.json'}",
                          highlight=False)
        raise typer.Exit(130)
    except (ConfigError, CorpusError, ValueError, OSError) as e:
        fail(str(e))
    if as_json:
        print(json.dumps(record, indent=2, ensure_ascii=False))
        return
    console.print(f"effective depth: {depth_sentence(record, len(record['delta_loss']))} → "
                  f"{run / 'layer_skip.json'}", highlight=False)


def _import_help() -> str:
    return (f"Import a {listing()['importable']} model as a normlab run (train --set train.init_from=RUN_DIR fine-tunes "
            "it; with train.init_from_match=by_name under another placement).")


def _export_help() -> str:
    return f"Write a run in the Hugging Face layout that holds its placement: {listing()['exportable']}."


@app.command("import-hf", cls=lazy_help(_import_help), short_help="Import a Hugging Face model as a normlab run.")
def import_hf(
    path: Path = typer.Argument(..., metavar="PATH", help="A local Hugging Face model directory (config.json and "
                                "safetensors, or a .bin read weights-only). Nothing runs from it; nothing is "
                                "downloaded."),
    out: Path = typer.Option(..., "--out", "-o", metavar="RUN_DIR", help="The run directory to write (new)."),
    block_size: Optional[int] = typer.Option(None, "--block-size", metavar="T", help="Shorten the context to T "
                                             "tokens (learned positions past it are dropped)."),
) -> None:
    from normlab.hf.run import import_run

    try:
        run, record = import_run(path, out, block_size)
    except (ConfigError, ValueError, OSError) as e:
        fail(str(e))
    left = f", {len(record['ignored'])} left out on purpose" if record["ignored"] else ""
    console.print(f"imported {record['family']} ({record['used']} tensors{left}) → {run.path}", highlight=False)
    for note in record["notes"]:
        console.print(f"note: {note}", highlight=False)


@app.command(cls=lazy_help(_export_help), short_help="Write a run in the Hugging Face layout that holds its "
             "placement.")
def export(
    target: Path = typer.Argument(..., metavar="RUN_DIR", help="A normlab run directory or its checkpoint."),
    fmt: str = typer.Option("hf", "--format", help="hf: a Hugging Face directory (config.json, model.safetensors, "
                            "tokenizer)."),
    out: Path = typer.Option(..., "--out", "-o", metavar="DIR", help="The directory to write (new or empty)."),
) -> None:
    from normlab.hf.run import export_run

    if fmt != "hf":
        fail(f"unknown --format {fmt!r}; valid: hf")
    try:
        written = export_run(target, out)
    except (ConfigError, CorpusError, ValueError, OSError) as e:
        fail(str(e))
    console.print(f"exported {target} → {written} (transformers.AutoModel*.from_pretrained loads it)",
                  highlight=False)


@app.command()
def sample(
    target: Path = typer.Argument(..., metavar="RUN", help="A normlab decoder run directory or its checkpoint."),
    prompt: str = typer.Option(..., "--prompt", "-p", metavar="TEXT", help="The text to continue."),
    max_new_tokens: int = typer.Option(200, "--max-new-tokens", "-n", min=0, metavar="N", help="Tokens to add."),
    greedy: bool = typer.Option(False, "--greedy", help="Take the most likely token at every step (then "
                                "--temperature, --top-k and --seed change nothing)."),
    temperature: float = typer.Option(0.8, "--temperature", metavar="T", help="Divide the logits by T (> 0) "
                                      "before drawing (< 1: surer, > 1: wilder)."),
    top_k: Optional[int] = typer.Option(None, "--top-k", min=1, metavar="K", help="Draw among the K most likely "
                                        "tokens only; unset: all."),
    seed: int = typer.Option(0, "--seed", metavar="S", help="Seed of the draws: one seed, one text."),
    device: str = typer.Option("cpu", "--device", metavar="DEVICE", help="cpu, cuda, cuda:N, or auto."),
) -> None:
    """Print the prompt and a run's continuation of it (a decoder): greedy, or drawn with a temperature and top-k."""
    from normlab.rundir.sample import sample_run

    try:
        text = sample_run(target, prompt, max_new_tokens, None if greedy else temperature, None if greedy else top_k,
                          seed, device)
    except (ConfigError, CorpusError, ValueError, OSError) as e:
        fail(str(e))
    print(text)  # the text as it is: no markup, no wrapping


def _fmt(value) -> str:
    if value is None:
        return "–"
    return str(value) if isinstance(value, int) else f"{value:.4g}"


BENCH_HELP = "Time normalizer forward+backward and training steps against torch.nn and a nanoGPT-style reference."


@app.command(cls=lazy_help(_bench_help), short_help=BENCH_HELP)
def bench(
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    quick: bool = typer.Option(False, "--quick", help="A tiny subset (seconds): one small shape, a tiny model."),
    only: Optional[Only] = typer.Option(None, "--only", help="Only the norm or the step benchmark (default: both)."),
    rounds: Optional[int] = typer.Option(None, "--rounds", min=1, metavar="N",
                                         help="Interleaved timing rounds (default 7)."),
    steps: int = typer.Option(2, "--steps", min=1, metavar="N", help="Training steps per timing sample."),
    compile_: bool = typer.Option(True, "--compile/--no-compile",
                                  help="Include torch.compile (norms, and normlab-compile steps); minutes on CPU."),
    scheme: list[str] = typer.Option(["pre"], "--scheme", metavar="SCHEME", help="Placement scheme(s) of the step "
                                     "bench (repeatable; listed above); all: every one."),
    norm: list[str] = typer.Option([], "--norm", metavar="NORM", help="Normalizer(s) of the step bench (repeatable; "
                                   "listed above; default layernorm, rmsnorm)."),
    config: list[BenchConfig] = typer.Option([], "--config", help="Step-bench model(s) (repeatable; default both)."),
    precision: list[Precision] = typer.Option(["fp32", "bf16"], "--precision",
                                              help="Step-bench precision(s): fp32, bf16."),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, metavar="N",
                                          help="torch.set_num_threads for the run."),
    clock: Clock = typer.Option("wall", "--clock", help="wall, or cpu (process CPU time: with --threads 1, "
                              "steadier on a shared machine; tokens/s then are per CPU-second)."),
) -> None:
    import torch

    from normlab.bench import run_bench, tables
    from normlab.bench.report import environment_line, noise_line
    from normlab.nn.schemes import SCHEMES

    one_of("--scheme", scheme, (*SCHEMES, "all"))
    one_of("--norm", norm, norm_names())
    only, clock, precision = only and only.value, clock.value, [p.value for p in precision]
    config = [c.value for c in config]
    schemes = tuple(SCHEMES) if "all" in scheme else tuple(scheme)
    options = {"schemes": schemes, "configs": tuple(config), "precisions": tuple(precision)}
    options |= {"norms": tuple(norm)} if norm else {}
    threads_before = torch.get_num_threads()
    try:
        torch.set_num_threads(threads or threads_before)
        result = run_bench(quick=quick, rounds=rounds, steps_per_sample=steps, compile=compile_,
                           only=only, clock=clock, **options)
    except ValueError as e:  # an unknown scheme/normalizer, or an incompatible pair
        fail(str(e))
    finally:
        torch.set_num_threads(threads_before)
    if as_json:
        print(json.dumps(result, indent=2))
        return
    for table in tables(result):
        console.print(table)
    for note in result.get("scheme_notes", []):  # what a scheme's paper fixes: a pair skipped, or a setting filled in
        own = SCHEMES.get(note["scheme"]).facts.requires.get("norm")
        hint = f" (--scheme {note['scheme']} --norm {own[0]} times it)" if note["skipped"] and own else ""
        console.print(f"{'skipped' if note['skipped'] else 'note'} {note['scheme']}/{note['norm']}: "
                      f"{escape(note['why'])}{hint}", highlight=False)
    console.print(f"[dim]{escape(environment_line(result['environment']))}[/]", highlight=False)
    if noise_line(result):
        err_console.print(f"[yellow]{escape(noise_line(result))}[/]", highlight=False)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
