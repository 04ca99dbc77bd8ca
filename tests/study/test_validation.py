"""The plateau stop's validation: a stopped run continued to its budget (benchmarks/plateau_validation.py), and
the ledger counting one that stayed on the plateau as failed to train, one that left it as still censored."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from normlab.rundir import RunDir
import pytest

from normlab.study.trained import line_of, trained_counts
from normlab.study.validation import VALIDATION, validated
from normlab.train import train
from tests.study.scenarios import PLATEAU_REASON, rec
from tests.train.test_plateau_stop import run, val_curve

ROOT = Path(__file__).resolve().parents[2]


def _benchmark():
    spec = importlib.util.spec_from_file_location("plateau_validation", ROOT / "benchmarks/plateau_validation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_continued_run_goes_on_from_its_stop_as_the_uninterrupted_run_did(tmp_path, one_torch_thread):
    stopped, whole = tmp_path / "stopped", tmp_path / "whole"
    train(run(1e-7, plateau_stop=0.5), str(stopped))
    assert RunDir(stopped).read_status()["reason"].startswith("stopped at step 40 of 80")
    outcome = _benchmark().continue_run(str(stopped), str(tmp_path / "continued"))
    assert outcome == {"trained": False, "status": "completed", "outcome": "failed_to_train", "line": outcome["line"],
                       "val_loss": outcome["val_loss"], "step": 80}
    assert outcome["line"] == pytest.approx(line_of(RunDir(stopped).read_config()))
    train(run(1e-7, plateau_stop="off"), str(whole))  # the same run, never stopped
    assert val_curve(tmp_path / "continued") == val_curve(whole)  # the same curve, bit for bit
    assert RunDir(stopped).read_status()["step"] == 40  # the study's own run is left as it was


def test_the_ledger_gives_a_continued_run_its_outcome_at_its_budget(tmp_path):
    """The continued run's own end (a resumed run continues the same curve), and "trained" in the study's one
    meaning: a run that left the plateau at 3.13 nats is completed, but the study's line (2.91) says it did not
    train, as the held-out study once called 6 such runs "recovered"."""
    from normlab.study.trained import judge_trained

    stuck, left, below, other = (rec(status="failed_to_train", reason=PLATEAU_REASON, seed=s) for s in range(4))
    assert stuck.censored and left.censored and other.censored
    (tmp_path / VALIDATION).write_text(json.dumps({"runs": {
        stuck.id: {"trained": False, "status": "completed", "outcome": "failed_to_train", "val_loss": 3.34,
                   "step": 300},
        left.id: {"trained": False, "status": "completed", "outcome": "trained", "val_loss": 3.13, "step": 300},
        below.id: {"trained": True, "status": "completed", "outcome": "trained", "val_loss": 2.5, "step": 300}}}))
    validated([stuck, left, below, other], tmp_path)
    assert not stuck.censored and stuck.failed_to_train and "ended failed_to_train" in stuck.reason
    assert (left.censored, left.status, left.val_loss) == (False, "completed", 3.13)
    judged = {r.id: r for r in judge_trained([stuck, left, below, other], {})}
    assert judged[left.id].did_not_train and not judged[below.id].did_not_train
    assert trained_counts(list(judged.values())) == {"trained": 1, "did not train": 2, "censored": 1, "failed": 0}
    assert other.censored  # never continued: still unknown


def test_a_second_validation_keeps_the_outcomes_of_the_first(tmp_path):
    """The ledger applies the file, so the runs an earlier validation continued are no longer censored and a later
    one (after a new pass added stopped runs) continues only the new ones: it must add to the file, not replace it
    (it once did, and the held-out study's first 97 outcomes, 6 of them recovered, were lost)."""
    write = _benchmark().write_outcomes
    write(tmp_path, {"a": {"trained": True, "val_loss": 2.9, "step": 300}, "b": {"trained": False}})
    data = write(tmp_path, {"c": {"trained": False}})
    assert sorted(data["runs"]) == ["a", "b", "c"] and data["continued"] == 3 and data["trained"] == ["a"]
    assert json.loads((tmp_path / VALIDATION).read_text()) == data
