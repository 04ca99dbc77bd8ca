"""A study killed with SIGKILL twice, mid-training, and run again ends with the runs and verdicts of a study
that was never interrupted: the same run ids, the same val losses at every evaluation, the same verdicts.
(One kill losing and duplicating nothing, and two processes on one directory: tests/study/test_study.py.)"""
from __future__ import annotations

import json
import signal
import subprocess

import pytest

from normlab.study.ledger import Ledger, pid_alive
from normlab.train import RunDir
from tests.study.test_study import study_cmd, wait_until

STEPS = ("--set", "train.steps=300", "--workers", "1")


def _evaluations(out) -> dict[str, list]:
    """Each run's (step, val loss) at every evaluation, and its final status."""
    reg = Ledger(out)
    return {r["id"]: ([(m["step"], m["val_loss"]) for m in RunDir(reg.run_dir(r["id"])).metrics() if "val_loss" in m],
                      r["status"]) for r in reg.rows()}


def _verdicts(out) -> list[tuple]:
    return [(v["id"], v["verdict"], v["value"]) for v in json.loads((out / "verdicts.json").read_text())["verdicts"]]


def _logged(out) -> int:
    """Metric rows written so far over every run (0 before the ledger exists)."""
    try:
        reg = Ledger(out)
        return sum(len(RunDir(reg.run_dir(r["id"])).metrics()) for r in reg.rows())
    except Exception:  # the study is still creating its ledger or a run directory
        return 0


def _kill_while_training(out, past: int) -> int:
    """Start the study, SIGKILL it once a run is mid-training and more than `past` rows are logged; the rows
    logged by then."""
    proc = subprocess.Popen(study_cmd(out, *STEPS), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def training():
        assert proc.poll() is None, proc.stderr.read().decode()
        return _logged(out) > past and any(r["status"] == "running" for r in Ledger(out).rows())

    wait_until(training)
    owners = [r["owner_pid"] for r in Ledger(out).rows() if r["status"] == "running"]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    wait_until(lambda: not any(pid_alive(p) for p in owners), timeout=30)  # its workers died with it
    return _logged(out)


@pytest.mark.slow  # three tiny studies of 4 runs × 300 steps: 74 s on 2 shared cores
def test_a_study_killed_twice_and_resumed_matches_one_never_interrupted(tmp_path):
    clean = subprocess.run(study_cmd(tmp_path / "clean", *STEPS), capture_output=True, text=True, timeout=900)
    assert clean.returncode == 0, clean.stderr

    out = tmp_path / "killed"
    first = _kill_while_training(out, 0)
    second = _kill_while_training(out, first + 5)  # later: its first run resumed, or further runs begun
    assert second > first
    assert Ledger(out).counts().get("completed", 0) < 4  # the kills left work to do
    resumed = subprocess.run(study_cmd(out, *STEPS), capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr

    assert _evaluations(out) == _evaluations(tmp_path / "clean")
    assert _verdicts(out) == _verdicts(tmp_path / "clean")
    assert max(r["attempts"] for r in Ledger(out).rows()) >= 2  # a run was killed and taken up again
