"""Nothing lost, nothing run that shouldn't: --fresh, planted pickles, the lock, damaged checkpoints, bad input.

Each test here failed on the code before the run directory got its lock, marker and verified
checkpoints (issue 9); the comment on each says what the old code did.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from normlab.cli import app
from normlab.rundir import CheckpointError, RunDir, RunLock, checkpoint as ckpt_mod
from tests.conftest import tiny_config
from tests.train.test_trainer import curve

runner = CliRunner()


def write_config(tmp_path, **train_opts) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(tiny_config(train={"steps": 20, "ckpt_interval": 10, **train_opts}).to_toml())
    return path


def cli_train(config, out, *extra):
    return runner.invoke(app, ["train", str(config), "--out", str(out), *extra])


def one_line_error(result, *needles):
    """Exit 2, an `error:` line naming what is wrong, and no traceback."""
    assert result.exit_code == 2, result.output
    assert "error:" in result.output and "Traceback" not in result.output, result.output
    for needle in needles:
        assert needle in result.output, result.output


# -- --fresh deletes only what normlab made ----------------------------------------------

def test_fresh_refuses_a_directory_normlab_did_not_make(tmp_path, monkeypatch):
    """Old: `--out . --fresh` removed the working directory recursively."""
    config = write_config(tmp_path)
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "thesis.tex").write_text("years of work")
    monkeypatch.chdir(work)
    result = cli_train(config, ".", "--fresh")
    one_line_error(result, "not a normlab run directory", "nothing was deleted")
    assert (work / "src" / "thesis.tex").read_text() == "years of work"
    assert sorted(p.name for p in work.iterdir()) == ["src"]


def test_fresh_refuses_a_run_directory_holding_other_files(tmp_path):
    config = write_config(tmp_path, steps=5)
    out = tmp_path / "run"
    assert cli_train(config, out).exit_code == 0
    (out / "notes.txt").write_text("mine")
    result = cli_train(config, out, "--fresh")
    one_line_error(result, "notes.txt", "nothing was deleted")
    assert (out / "notes.txt").read_text() == "mine" and RunDir(out).read_status()["status"] == "completed"


def test_fresh_clears_a_run_directory_and_trains_again(tmp_path):
    config = write_config(tmp_path, steps=5)
    out = tmp_path / "run"
    assert cli_train(config, out).exit_code == 0
    before = curve(out)
    assert cli_train(config, out, "--fresh").exit_code == 0
    assert curve(out) == before and (out / ".normlab-run").is_file()


def test_training_into_a_foreign_non_empty_directory_is_refused(tmp_path):
    """Old: config.toml, metrics and checkpoints were written among the user's files."""
    config = write_config(tmp_path, steps=5)
    out = tmp_path / "mine"
    out.mkdir()
    (out / "data.csv").write_text("1,2\n")
    one_line_error(cli_train(config, out), "not a normlab run directory", "data.csv")
    assert [p.name for p in out.iterdir()] == ["data.csv"]


# -- nothing unpickled ---------------------------------------------------------------------

class Planted:
    """A pickle that, when loaded with weights_only=False, writes a file (it could do anything)."""

    def __init__(self, sentinel: str):
        self.sentinel = sentinel

    def __reduce__(self):
        return (Path.write_text, (Path(self.sentinel), "pwned"))


def plant(run: Path, sentinel: Path) -> None:
    """Replace checkpoint.pt by a pickle bomb and list its digest, as an attacker who can write the dir would."""
    target = run / ckpt_mod.NEWEST
    torch.save({"model": {}, "step": 20, "payload": Planted(str(sentinel))}, target)
    manifest = json.loads((run / ckpt_mod.MANIFEST).read_text())
    manifest[ckpt_mod.sha256(target)] = 20
    (run / ckpt_mod.MANIFEST).write_text(json.dumps(manifest))


def test_planted_pickle_is_never_executed_by_diagnose_check_or_resume(tmp_path):
    """Old: torch.load(weights_only=False) ran the payload in all three commands."""
    config = write_config(tmp_path)
    out, sentinel = tmp_path / "run", tmp_path / "pwned.txt"
    assert cli_train(config, out).exit_code == 0
    plant(out, sentinel)
    for command in (["diagnose", str(out / "checkpoint.pt"), "--no-skip"], ["check", str(out / "checkpoint.pt")]):
        result = runner.invoke(app, command)
        one_line_error(result, "unusable")
        assert "refused: not a plain pickle of tensors, it asks to call" in result.output
        assert "weights_only" not in result.output  # torch's advice to load it with weights_only=False: never
    status = RunDir(out).read_status()
    RunDir(out).write_status("running", step=status["step"])  # as if killed: the next train resumes
    result = cli_train(config, out)
    assert result.exit_code == 0, result.output
    assert "checkpoint.pt is unusable" in result.output and "checkpoint.prev.pt (step 10)" in result.output
    assert not sentinel.exists()


def test_diagnose_of_the_run_directory_passes_over_the_planted_file(tmp_path):
    config = write_config(tmp_path)
    out, sentinel = tmp_path / "run", tmp_path / "pwned.txt"
    assert cli_train(config, out).exit_code == 0
    plant(out, sentinel)
    result = runner.invoke(app, ["diagnose", str(out), "--no-skip"])
    assert result.exit_code == 0 and "checkpoint.prev.pt (step 10)" in result.output, result.output
    assert not sentinel.exists()


# -- one process per run directory ----------------------------------------------------------

def test_second_train_on_a_held_directory_is_refused_naming_the_holder(tmp_path):
    """Old: both processes trained and interleaved metrics.jsonl."""
    config = write_config(tmp_path, steps=5)
    out = tmp_path / "run"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from normlab.rundir import RunLock; "
                               "lock = RunLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(60)", str(out)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        one_line_error(cli_train(config, out), "in use by another normlab process", f"pid {holder.pid}")
        assert RunDir(out).metrics() == []
    finally:
        holder.kill()
        holder.wait()
    assert cli_train(config, out).exit_code == 0  # a dead holder's lock is gone with it


def test_lock_is_exclusive_within_one_process_too(tmp_path):
    with RunLock(tmp_path):
        with pytest.raises(Exception, match="in use by another normlab process"):
            RunLock(tmp_path).acquire()
    RunLock(tmp_path).acquire().release()


# -- damaged checkpoints ------------------------------------------------------------------

def interrupted_run(tmp_path, name="run") -> tuple[Path, Path]:
    config = write_config(tmp_path)
    out = tmp_path / name
    assert cli_train(config, out).exit_code == 0
    RunDir(out).write_status("running", step=20)
    return config, out


def test_truncated_checkpoint_falls_back_to_the_previous_one_and_continues_the_same_curve(tmp_path):
    """Old: a miniz traceback, and status.json stayed `running`."""
    config, out = interrupted_run(tmp_path)
    whole = curve(out)
    newest = out / "checkpoint.pt"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    result = cli_train(config, out)
    assert result.exit_code == 0, result.output
    assert "checkpoint.pt is unusable" in result.output and "step 10" in result.output
    assert curve(out) == whole
    assert RunDir(out).read_meta()["resumed_from_step"] == 10 and RunDir(out).read_meta()["notes"]


def test_flipped_byte_is_caught_by_the_digest(tmp_path):
    """torch's zip reader loads a checkpoint with a flipped tensor byte silently; the manifest does not."""
    _, out = interrupted_run(tmp_path)
    data = bytearray((out / "checkpoint.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (out / "checkpoint.pt").write_bytes(data)
    found = RunDir(out).find_checkpoint()
    assert found.path.name == "checkpoint.prev.pt" and "SHA-256" in found.note()


def test_no_good_checkpoint_is_a_clear_error_and_the_status_says_why(tmp_path):
    """Old: a zero-byte checkpoint printed only `Aborted.` (EOFError), and the status stayed `running`."""
    config, out = interrupted_run(tmp_path)
    (out / "checkpoint.pt").write_bytes(b"")
    (out / "checkpoint.prev.pt").write_bytes(b"PK\x03\x04 not really")
    one_line_error(cli_train(config, out), "no usable checkpoint", "empty file")
    status = RunDir(out).read_status()
    assert status["status"] == "failed" and "no usable checkpoint" in status["reason"]
    with pytest.raises(CheckpointError):
        RunDir(out).load_checkpoint()


# -- bad input: one line, exit 2, status says failed ----------------------------------------

def test_disk_full_is_one_line_and_recorded(tmp_path):
    """Old: an OSError traceback. /dev/full answers every write with ENOSPC, as a full disk does."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    config = write_config(tmp_path, steps=5)
    out = tmp_path / "run"
    out.mkdir()
    (out / ".normlab-run").write_text("{}")
    (out / "checkpoint.pt.tmp").symlink_to("/dev/full")
    one_line_error(cli_train(config, out), "No space left on device")
    status = RunDir(out).read_status()
    assert status["status"] == "failed" and "No space left on device" in status["reason"]


def test_out_that_is_a_file_is_refused(tmp_path):
    """Old: FileExistsError traceback from mkdir."""
    config = write_config(tmp_path, steps=5)
    (tmp_path / "afile").write_text("keep")
    one_line_error(cli_train(config, tmp_path / "afile"), "is a file, not a directory")
    assert (tmp_path / "afile").read_text() == "keep"


def test_unwritable_out_is_refused():
    """Root writes through file modes, so a read-only filesystem stands in for a read-only --out."""
    if os.access("/sys", os.W_OK) and not Path("/sys/normlab-probe").parent.exists():
        pytest.skip("no read-only filesystem to try")
    result = runner.invoke(app, ["train", "--set", "train.steps=1", "--set", "train.warmup_steps=0", "--out",
                                 "/sys/normlab-test-run"])
    one_line_error(result, "cannot create run directory", "/sys/normlab-test-run")


def test_corrupt_config_on_resume_is_one_line_and_recorded(tmp_path):
    """Old: the ConfigError escaped the CLI as a traceback."""
    config, out = interrupted_run(tmp_path)
    (out / "config.toml").write_text("[model\nn_layer = ")
    one_line_error(cli_train(config, out), "config.toml", "cannot be read")
    status = RunDir(out).read_status()
    assert status["status"] == "failed" and "config.toml" in status["reason"]


def test_bogus_norm_impl_is_one_line_and_recorded(tmp_path):
    """Old: a ValueError traceback from inside the first forward pass."""
    config = write_config(tmp_path, steps=2, warmup_steps=0)
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "normlab", "train", str(config), "--out", str(out)],
                          capture_output=True, text=True, env={**os.environ, "NORMLAB_NORM_IMPL": "bogus"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "'bogus'" in proc.stderr and "auto, fast, reference" in proc.stderr
    assert RunDir(out).read_status()["status"] == "failed"


# -- diagnose and check load what was named, or refuse -------------------------------------

def test_diagnose_refuses_a_file_that_is_not_a_normlab_checkpoint(tmp_path):
    """Old: ignored the file and measured a random-init model, exit 0."""
    (tmp_path / "other").mkdir()
    torch.save({"w": torch.zeros(2)}, tmp_path / "other" / "mymodel.pt")
    one_line_error(runner.invoke(app, ["diagnose", str(tmp_path / "other" / "mymodel.pt")]), "mymodel.pt")
    one_line_error(runner.invoke(app, ["check", str(tmp_path / "other" / "mymodel.pt")]), "mymodel.pt")


def test_run_without_checkpoint_needs_init_and_then_says_so(tmp_path):
    """Old: measured the random init with exit 0 and did not say so."""
    out = tmp_path / "run"
    run = RunDir(out)
    run.create()
    run.write_config(tiny_config())
    one_line_error(runner.invoke(app, ["diagnose", str(out), "--no-skip"]), "no checkpoint", "--init")
    one_line_error(runner.invoke(app, ["check", str(out)]), "no checkpoint", "--init")
    result = runner.invoke(app, ["diagnose", str(out), "--no-skip", "--init"])
    assert result.exit_code == 0 and "untrained" in result.output, result.output
    data = json.loads(runner.invoke(app, ["diagnose", str(out), "--no-skip", "--init", "--json"]).stdout)
    assert data["step"] == 0 and data["weights"].startswith("untrained")


def test_diagnose_loads_the_named_checkpoint_file(tmp_path):
    config = write_config(tmp_path)
    out = tmp_path / "run"
    assert cli_train(config, out).exit_code == 0
    newest = json.loads(runner.invoke(app, ["diagnose", str(out), "--no-skip", "--json"]).stdout)
    prev = json.loads(runner.invoke(app, ["diagnose", str(out / "checkpoint.prev.pt"), "--no-skip", "--json"]).stdout)
    assert (newest["step"], prev["step"]) == (20, 10) and newest["loss"] != prev["loss"]


def test_diagnose_never_runs_code_from_a_hugging_face_directory(tmp_path, monkeypatch):
    """A config.json whose auto_map points at code in the directory: transformers asks on a terminal
    (here the answer would be yes); normlab passes trust_remote_code=False, so it never asks."""
    pytest.importorskip("transformers")
    model_dir, sentinel = tmp_path / "hf", tmp_path / "ran.txt"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps({
        "model_type": "evilnet", "architectures": ["EvilModel"],
        "auto_map": {"AutoConfig": "evil.EvilConfig", "AutoModel": "evil.EvilModel"}}))
    (model_dir / "evil.py").write_text(f"open({str(sentinel)!r}, 'w').write('ran')\n"
                                       "from transformers import PretrainedConfig\n"
                                       "class EvilConfig(PretrainedConfig):\n    model_type = 'evilnet'\n")
    monkeypatch.setattr("builtins.input", lambda *a, **k: "y")
    result = runner.invoke(app, ["diagnose", str(model_dir)])
    assert result.exit_code == 2 and not sentinel.exists(), result.output


def test_bench_scheme_all_lists_every_scheme(monkeypatch):
    """Old: `normlab bench --scheme all` crashed: the scheme registry could not be iterated."""
    from normlab import cli
    from normlab.nn.schemes import SCHEMES

    seen = {}

    def fake_bench(**kwargs):
        seen.update(kwargs)
        return {"environment": {"torch": "test"}}

    monkeypatch.setattr("normlab.bench.run_bench", fake_bench)
    monkeypatch.setattr("normlab.bench.tables", lambda result: [])
    result = runner.invoke(cli.app, ["bench", "--scheme", "all", "--quick", "--only", "steps"])
    assert result.exit_code == 0, result.output
    from tests.nn.test_schemes import ALL_SCHEMES

    assert seen["schemes"] == tuple(SCHEMES.names()) == tuple(ALL_SCHEMES)


def test_a_run_directory_records_its_schema_and_one_a_newer_normlab_wrote_is_refused(tmp_path):
    """The marker holds the schema the run was written under; its config is read as that schema wrote it, and a
    newer one is refused before any of it is read, nothing changed."""
    from normlab.compat import SCHEMA_VERSION
    from normlab.config import ConfigError, validate_config
    from normlab.rundir.layout import MARKER

    run = RunDir(tmp_path / "run")
    run.create()
    run.write_config(validate_config({}))
    assert run.schema() == SCHEMA_VERSION and run.read_config() == validate_config({})
    marker = run.read_json(MARKER)
    run.write_json(MARKER, {**marker, "schema": SCHEMA_VERSION + 1})
    with pytest.raises(ConfigError, match=rf"run directory .* newer normlab \(schema {SCHEMA_VERSION + 1}\)"):
        run.read_config()
    run.write_json(MARKER, {k: v for k, v in marker.items() if k != "schema"})
    assert run.schema() == 0  # a run from before schemas were recorded
