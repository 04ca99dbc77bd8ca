"""A training process killed with SIGKILL mid-run resumes to the same final val loss and curve."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from normlab.train import RunDir
from tests.conftest import tiny_config
from tests.train.test_trainer import curve


def normlab_train(config_path, out):
    return subprocess.Popen([sys.executable, "-m", "normlab", "train", str(config_path), "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "COLUMNS": "120"})


def wait_for_step(run_dir: RunDir, step: int, proc, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = run_dir.metrics()
        if rows and rows[-1]["step"] >= step:
            return
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.02)
    raise TimeoutError(f"no step {step} within {timeout} s")


def test_sigkill_then_resume_matches_uninterrupted(tmp_path):
    cfg = tiny_config(train={"steps": 400, "ckpt_interval": 50, "eval_interval": 100})
    config_path = tmp_path / "config.toml"
    config_path.write_text(cfg.to_toml())

    whole = normlab_train(config_path, tmp_path / "whole")
    assert whole.wait(timeout=300) == 0, whole.stderr.read().decode()

    cut_dir = RunDir(tmp_path / "cut")
    proc = normlab_train(config_path, cut_dir.path)
    wait_for_step(cut_dir, 130, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert cut_dir.read_status()["status"] == "running"  # killed for real, mid-run
    assert cut_dir.metrics()[-1]["step"] < 400

    resumed = normlab_train(config_path, cut_dir.path)
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read().decode()
    assert cut_dir.read_meta()["resumed_from_step"] in (100, 150, 200, 250, 300, 350)
    assert cut_dir.read_status()["val_loss"] == RunDir(tmp_path / "whole").read_status()["val_loss"]
    assert curve(cut_dir.path) == curve(tmp_path / "whole")


@pytest.mark.usefixtures("ctrl_c_reaches_children")
def test_ctrl_c_marks_the_run_interrupted_and_the_rerun_says_where_it_resumes(tmp_path):
    cfg = tiny_config(train={"steps": 400, "ckpt_interval": 50, "eval_interval": 100})
    config_path = tmp_path / "config.toml"
    config_path.write_text(cfg.to_toml())
    run_dir = RunDir(tmp_path / "run")
    proc = subprocess.Popen([sys.executable, "-m", "normlab", "train", str(config_path), "--out", str(run_dir.path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "120"})
    wait_for_step(run_dir, 130, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in out + err and "KeyboardInterrupt" not in out + err
    assert "interrupted at step" in err and "run the same command again to resume" in err
    status = run_dir.read_status()
    assert status["status"] == "interrupted" and 130 <= status["step"] < 400

    again = subprocess.run([sys.executable, "-m", "normlab", "train", str(config_path), "--out", str(run_dir.path)],
                           capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "120"})
    assert again.returncode == 0, again.stderr
    step = run_dir.read_meta()["resumed_from_step"]
    assert step in (100, 150, 200, 250, 300, 350) and f"resuming from step {step}" in again.stderr
    assert run_dir.read_status()["status"] == "completed"
