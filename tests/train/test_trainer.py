"""The loop: determinism, bit-for-bit resume, divergence, the run directory."""
from __future__ import annotations

import json

import pytest

from normlab.train import RunDir, Trainer, resolve_device, train
from normlab.train.lifecycle import RunConflictError
from tests.conftest import tiny_config

CURVE_KEYS = ("step", "lr", "train_loss", "grad_norm", "val_loss")


def curve(path) -> list[tuple]:
    return [tuple(row.get(k) for k in CURVE_KEYS) for row in RunDir(path).metrics()]


def test_run_directory_describes_the_run(tmp_path):
    result = train(tiny_config(), tmp_path / "run")
    rd = RunDir(tmp_path / "run")
    assert result.status == "completed" and result.step == 30
    assert rd.read_config().model.vocab_size == 65  # resolved from the tokenizer
    status = rd.read_status()
    assert status["status"] == "completed" and status["val_loss"] == pytest.approx(result.val_loss)
    meta = rd.read_meta()
    assert meta["environment"]["torch_threads"] >= 1 and meta["environment"]["device"] == "cpu"
    assert meta["model"]["init"]["residual_outputs"].startswith("normal(0, 0.0")
    rows = rd.metrics()
    assert [r["step"] for r in rows] == list(range(31))
    assert {"lr", "train_loss", "grad_norm", "tokens_per_s", "elapsed_s"} <= set(rows[5])
    assert [r["step"] for r in rows if "val_loss" in r] == [0, 10, 20, 30]
    assert rows[-1]["val_loss"] < rows[0]["val_loss"] - 0.3  # it learns
    assert (tmp_path / "run" / "checkpoint.pt").is_file()


def test_same_seed_same_curve_other_seed_other_curve(tmp_path):
    train(tiny_config(), tmp_path / "a")
    train(tiny_config(), tmp_path / "b")
    train(tiny_config(train={"seed": 7}), tmp_path / "c")
    assert curve(tmp_path / "a") == curve(tmp_path / "b")
    assert curve(tmp_path / "a") != curve(tmp_path / "c")


class Interrupt(Exception):
    pass


def interrupt_at(step):
    def on_log(row):
        if row["step"] == step:
            raise Interrupt
    return on_log


@pytest.mark.parametrize("dropout, scheme", [(0.0, "pre"), (0.1, "pre"), (0.1, "mhc"), (0.1, "attnres")])
def test_resume_continues_the_same_curve(tmp_path, dropout, scheme):
    """… for the residual states of 2026 too (n streams, a stack of sources): their mixing is in the checkpoint."""
    cfg = tiny_config(model={"dropout": dropout, "scheme": scheme})
    train(cfg, tmp_path / "whole")
    with pytest.raises(Interrupt):
        Trainer(cfg, tmp_path / "cut", on_log=interrupt_at(17)).run()
    assert RunDir(tmp_path / "cut").read_status()["status"] == "failed"
    result = train(cfg, tmp_path / "cut")
    assert RunDir(tmp_path / "cut").read_meta()["resumed_from_step"] == 10
    assert result.status == "completed"
    assert curve(tmp_path / "cut") == curve(tmp_path / "whole")


def test_completed_run_is_not_rerun_and_other_config_is_refused(tmp_path):
    first = train(tiny_config(), tmp_path / "run")
    before = (tmp_path / "run" / "metrics.jsonl").read_text()
    again = train(tiny_config(), tmp_path / "run")
    assert again == first and (tmp_path / "run" / "metrics.jsonl").read_text() == before
    with pytest.raises(RunConflictError, match="holds another run"):
        train(tiny_config(train={"lr": 1e-2}), tmp_path / "run")


def test_loss_above_bound_is_diverged_not_an_exception(tmp_path):
    result = train(tiny_config(train={"diverge_loss": 3.0}), tmp_path / "run")
    assert (result.status, result.step) == ("diverged", 1)
    status = RunDir(tmp_path / "run").read_status()
    assert status["status"] == "diverged" and status["step"] == 1 and "above diverge_loss 3" in status["reason"]


def test_non_finite_loss_is_diverged_and_recorded(tmp_path):
    cfg = tiny_config(model={"norm": "none"},
                      train={"lr": 1e6, "min_lr": 0, "warmup_steps": 0, "schedule": "constant", "grad_clip": "off",
                             "diverge_loss": 1e30})
    result = train(cfg, tmp_path / "run")
    assert result.status == "diverged" and 1 < result.step <= 30
    assert "non-finite" in result.reason
    rows = RunDir(tmp_path / "run").metrics()
    assert rows[-1]["step"] == result.step and rows[-1]["train_loss"] is None  # NaN stored as null
    json.loads((tmp_path / "run" / "status.json").read_text())  # valid JSON, no bare NaN


def test_device_resolution():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type in ("cpu", "cuda")
    with pytest.raises(ValueError, match="unknown device 'gpu0'"):
        resolve_device("gpu0")


def test_failure_to_train_is_judged_against_the_unigram_cross_entropy(tmp_path):
    """A run that ends on the plateau of token frequencies is `completed` but failed to train (issue 11)."""
    from normlab.study.records import record_from_run_dir
    from normlab.train.loop import FAILED_TO_TRAIN, TRAINED, judge_training

    result = train(tiny_config(train={"steps": 3}), str(tmp_path / "stuck"))
    status = RunDir(tmp_path / "stuck").read_status()
    assert result.status == status["status"] == "completed"
    assert result.outcome == status["outcome"] == FAILED_TO_TRAIN
    assert status["unigram_ce"] == pytest.approx(3.3473, abs=1e-4) and "failed to train" in status["reason"]
    assert record_from_run_dir("x", tmp_path / "stuck").status == "failed_to_train"
    assert judge_training(3.24, 3.3473, 0.1) == (TRAINED, None)
    assert judge_training(3.25, 3.3473, 0.1)[0] == FAILED_TO_TRAIN
    assert judge_training(float("nan"), 3.3473, 0.1)[0] == FAILED_TO_TRAIN
    assert judge_training(3.9, 3.3473, None) == (TRAINED, None)  # untrained_margin = "off": never judged
    # the reason says what was measured: a loss above the plateau is not "within 0.1 nats" of it
    assert judge_training(3.984, 3.3473, 0.1)[1] == ("failed to train: final val loss 3.9840 is 0.637 nats above "
                                                     "the corpus's unigram cross-entropy 3.3473: it did not even "
                                                     "learn token frequencies")
    assert "0.047 nats below the corpus's unigram cross-entropy 3.3473, within the 0.1-nat margin" in \
        judge_training(3.30, 3.3473, 0.1)[1]


def test_a_hyper_connection_runs_record_keeps_its_composite_gain_per_layer(tmp_path):
    """A study judges mHC's composite gain (the product of every H_res so far) from the run's record: at init HC's
    H_res is the identity in every layer, so the product's Amax is 1 at each; after training it has moved."""
    from normlab.study.records import record_from_run_dir

    cfg = tiny_config(model={"scheme": "hc"}, train={"steps": 10}, diagnostics={"interval": 5})
    train(cfg, str(tmp_path / "hc"))
    record = record_from_run_dir("x", tmp_path / "hc")
    init, final = record.layers_init["composite_gain/mlp"], record.layers_final["composite_gain/mlp"]
    assert len(init) == len(final) == cfg.model.n_layer
    assert init == pytest.approx([1.0] * cfg.model.n_layer, abs=1e-6) and final != init
    plain = tiny_config(train={"steps": 2}, diagnostics={"interval": 2})
    train(plain, str(tmp_path / "pre"))
    pre = record_from_run_dir("y", tmp_path / "pre")
    assert "composite_gain/mlp" not in pre.layers_final
    assert all(len(pre.layers_final[f"branch_rms/{site}"]) == plain.model.n_layer for site in ("attn", "mlp"))
