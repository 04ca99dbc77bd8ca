"""The command line: `normlab schemes`, `normlab train`, help and errors."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from normlab.cli import app
from normlab.train import RunDir
from tests.conftest import tiny_config

runner = CliRunner()


def test_schemes_json_lists_every_scheme_and_normalizer_in_registration_order():
    from tests.nn.test_schemes import ALL_NORMS, ALL_SCHEMES  # the one list of each a new one joins

    result = runner.invoke(app, ["schemes", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [s["name"] for s in data["schemes"]] == ALL_SCHEMES
    assert [n["name"] for n in data["norms"]] == ALL_NORMS
    assert all(s["formula"] for s in data["schemes"]) and all(n["formula"] for n in data["norms"])


def test_schemes_table():
    result = runner.invoke(app, ["schemes"])
    assert result.exit_code == 0 and "deepnorm" in result.output and "rmsnorm" in result.output


COMMANDS = [[], ["train"], ["schemes"], ["study"], ["report"], ["check"], ["diagnose"], ["bench"]]


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("command", COMMANDS)
def test_help_on_every_command_names_values_not_python_types(command, flag):
    result = runner.invoke(app, [*command, flag])
    assert result.exit_code == 0 and "Usage" in result.output
    for label in ("<bool>", "<str>", "<int", "<path>", "<list[str]>", "<float>"):
        assert label not in result.output, (command, label)


def test_choices_are_listed_as_choices_and_a_bad_one_is_named_with_the_valid_ones():
    from normlab.cli.common import BenchConfig, Dtype, Executor, Parallel
    from normlab.bench.steps import CONFIGS
    from normlab.diagnostics.diagnose import DTYPES
    from normlab.study.runner import EXECUTORS
    from normlab.study.presets import PRESETS
    from normlab.train.distributed import PARALLEL

    # the CLI's fixed choice lists match the modules that act on them
    for choices, valid in ((Executor, EXECUTORS), (Parallel, PARALLEL), (Dtype, DTYPES),
                           (BenchConfig, [c.name for c in CONFIGS])):
        assert sorted(c.value for c in choices) == sorted(valid)
    help_text = runner.invoke(app, ["study", "-h"], terminal_width=200).output
    # the presets are a registry, listed in the command's help when it is shown (not imported for `normlab --help`)
    assert all(f"{name}: " in help_text for name in PRESETS) and "--executor <local|ray>" in help_text
    assert "'.[ray]'" in help_text  # printed as written, not read as markup
    assert "--parallel <ddp|fsdp>" in runner.invoke(app, ["train", "-h"], terminal_width=200).output
    bad = runner.invoke(app, ["study", "--preset", "fast"])
    assert bad.exit_code == 2 and "unknown preset 'fast'; valid: standard, quick, deep, full" in bad.output


def test_version_and_shell_completion():
    import normlab

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"normlab {normlab.__version__}"
    top = runner.invoke(app, ["-h"]).output
    assert "--install-completion" in top and "--show-completion" in top


def test_bench_ratios_keep_three_significant_figures_and_the_environment_is_one_line():
    from normlab.bench.report import _ratio, environment_line

    assert _ratio(0.00213) == "0.00213×" and _ratio(1.0) == "1×" and _ratio(0.9183) == "0.918×" and _ratio(None) == "n/a"
    line = environment_line({"torch": "2.13.0", "threads": 2, "fused_kernels": "built", "device_name": None})
    assert line == "torch: 2.13.0; threads: 2; fused kernels: built" and "{" not in line


def test_train_runs_and_writes_a_run_directory(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(tiny_config().to_toml())
    result = runner.invoke(app, ["train", str(config), "--set", "train.steps=12", "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert "completed 12 steps" in result.output
    assert RunDir(tmp_path / "r").read_status()["status"] == "completed"


def test_train_unknown_key_is_a_clear_error(tmp_path):
    result = runner.invoke(app, ["train", "--set", "model.n_layers=3", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "n_layers" in result.output and "n_layer" in result.output
    assert not (tmp_path / "r").exists()


def test_train_conflicting_directory_then_fresh(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(tiny_config().to_toml())
    out = str(tmp_path / "r")
    assert runner.invoke(app, ["train", str(config), "--set", "train.steps=5", "--out", out]).exit_code == 0
    clash = runner.invoke(app, ["train", str(config), "--set", "train.steps=6", "--out", out])
    assert clash.exit_code == 2 and "holds another run" in clash.output
    fresh = runner.invoke(app, ["train", str(config), "--set", "train.steps=6", "--out", out, "--fresh"])
    assert fresh.exit_code == 0 and "completed 6 steps" in fresh.output


def test_diverged_run_exits_3_with_its_step(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(tiny_config(train={"diverge_loss": 3.0}).to_toml())
    result = runner.invoke(app, ["train", str(config), "--out", str(tmp_path / "r")])
    assert result.exit_code == 3 and "diverged at step 1" in result.output


# slow
# (the default suite stays under 10 min on 2 cores; `make test-slow` runs it)
@pytest.mark.slow
def test_study_prints_each_active_runs_step_and_loss_when_output_is_not_a_terminal(tmp_path, monkeypatch):
    import re

    from normlab import cli
    from tests.study.test_study import TINY

    monkeypatch.setattr(cli, "PRINT_EVERY_S", 0.0)
    args = ["study", "--out", str(tmp_path / "s"), "--claims", "C13", "--seeds", "0", "--workers", "2"]
    for item in TINY + ["train.steps=400"]:
        args += ["--set", item]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert re.search(r"^study \d+% \(", result.output, re.M)
    lines = re.findall(r"^  (pre-layernorm-L\d+-d16\S*) step (\d+)/400 loss (\d+\.\d{4})$", result.output, re.M)
    assert lines and {int(step) for _, step, _ in lines} - {0}, result.output  # steps seen while training
    assert not re.search(r"^study\s+━", result.output, re.M)  # no bar drawn into a log


def test_study_without_its_report_trains_says_how_far_it_is_and_leaves_the_report_to_normlab_report(tmp_path):
    """`make run`'s passes before its last: --no-report trains and exits as the study would, and writes no report
    (`normlab report` writes it once, from the ledger)."""
    from tests.study.test_study import TINY

    args = ["study", "--out", str(tmp_path / "s"), "--claims", "C13", "--seeds", "0", "--workers", "1",
            "--no-report"]
    for item in TINY + ["train.steps=8"]:
        args += ["--set", item]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "final: " in result.output and f"no report (`normlab report {tmp_path / 's'}`)" in result.output
    assert not list((tmp_path / "s").glob("report.*")) and not (tmp_path / "s" / "verdicts.json").exists()
    again = runner.invoke(app, ["report", str(tmp_path / "s")])
    assert again.exit_code == 0 and (tmp_path / "s" / "verdicts.json").is_file(), again.output


def test_train_prints_a_line_per_evaluation_when_output_is_not_a_terminal(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(tiny_config().to_toml())
    result = runner.invoke(app, ["train", str(config), "--set", "train.steps=20", "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert "step 0/20  val " in result.output and "step 10/20  loss " in result.output
    assert "step 20/20  loss " in result.output and "train ━" not in result.output


def test_one_progress_line_per_active_run_comes_and_goes():
    from rich.progress import Progress

    from normlab.cli.show import sync_run_lines
    from normlab.study.state import ActiveRun

    bar, lines = Progress(disable=True), {}
    a, b = ActiveRun("a", "pre-a", 10, 100, 3.2), ActiveRun("b", "post-b", 0, 100, None)
    sync_run_lines(bar, lines, [a, b])
    assert set(lines) == {"a", "b"} and bar.tasks[0].completed == 10 and bar.tasks[0].fields["status"] == "loss 3.2000"
    sync_run_lines(bar, lines, [ActiveRun("b", "post-b", 50, 100, 2.9)])
    assert set(lines) == {"b"} and [t.completed for t in bar.tasks] == [50]
    assert a.progress_text() == "pre-a step 10/100 loss 3.2000" and b.progress_text() == "post-b step 0/100"


def test_the_cli_starts_without_the_hf_extra():
    """`pip install -e .` (no extras) must give a working `normlab`: the `hf` extra's packages are imported only
    where an HF directory is read (safetensors once crashed `normlab --help` from the family registry)."""
    import subprocess
    import sys

    code = ("import sys\n"
            "for name in ('safetensors', 'transformers', 'tokenizers'):\n"
            "    sys.modules[name] = None  # as if not installed: importing it raises ImportError\n"
            "from typer.testing import CliRunner\n"
            "from normlab.cli import app\n"
            "result = CliRunner().invoke(app, ['--help'])\n"
            "assert result.exit_code == 0, result.output\n"
            "result = CliRunner().invoke(app, ['schemes', '--json'])\n"
            "assert result.exit_code == 0, result.output\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_top_level_help_imports_no_torch():
    """`normlab --help` lists the commands without importing torch (about 2 s of the 3-4 s every call took):
    the registries its commands name are read when that command's help or values need them."""
    import subprocess
    import sys

    code = ("import sys\nfrom normlab.cli import app\ntry:\n    app(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('torch imported:', 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert "import-hf" in out and out.rstrip().endswith("torch imported: False"), out


def test_the_executors_the_cli_offers_are_the_studys():
    from normlab.cli import common
    from normlab.study.jobs import EXECUTORS

    assert common.EXECUTORS == EXECUTORS


def test_a_commands_help_names_its_registrys_entries():
    from normlab.hf.families import importable_text

    assert "frontier: " in runner.invoke(app, ["study", "--help"]).output
    assert "deepnorm" in runner.invoke(app, ["bench", "--help"]).output
    assert importable_text().split(" ")[0] in runner.invoke(app, ["import-hf", "--help"]).output


def test_the_help_lists_are_the_registries():
    """`--help` reads its lists from cli/listings.json (so it imports no torch); they must say what the registries
    say: after adding a scheme, normalizer, preset or family, run `python -m normlab.cli.listings`."""
    from normlab.cli.listings import from_registries, listing

    assert listing() == from_registries(), "cli/listings.json is stale: run python -m normlab.cli.listings"


@pytest.mark.parametrize("command", ["study", "export", "import-hf", "bench"])
def test_a_commands_help_imports_no_torch(command):
    """Old: these four imported torch to list a registry in their help (1.6-1.8 s on 2 cores)."""
    import subprocess
    import sys

    code = ("import sys; from normlab.cli import main; sys.argv = ['normlab', %r, '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\nassert 'torch' not in sys.modules, 'torch imported'") % command
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-500:]
