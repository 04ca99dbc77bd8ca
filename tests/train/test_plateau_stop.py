"""`train.plateau_stop`: a run still on the unigram plateau at an evaluation from that fraction of its budget on
is finished there as failed to train; a run that has left the plateau trains on, its curve untouched."""
from __future__ import annotations

import pytest

from normlab.rundir import RunDir
from normlab.train import train
from normlab.train.group import GroupTrainer
from tests.conftest import tiny_config

QUIET = {"interval": "off", "layer_skip": False}


def run(lr: float, steps: int = 80, seed: int = 0, **train_opts):
    """lr 1e-2 leaves the plateau by step 40 (val 3.07 < 3.25); lr 1e-7 never moves from ln 65 ≈ 4.17."""
    opts = {"lr": lr, "steps": steps, "batch_size": 8, "eval_interval": 20, "ckpt_interval": 20, "seed": seed,
            "min_lr": 0.0, **train_opts}
    return tiny_config(train=opts, diagnostics=QUIET)


def val_curve(path) -> list[tuple[int, float]]:
    return [(r["step"], r["val_loss"]) for r in RunDir(path).metrics() if "val_loss" in r]


def test_a_run_on_the_plateau_stops_at_its_first_evaluation_from_the_fraction_on(tmp_path, one_torch_thread):
    result = train(run(1e-7, plateau_stop=0.5), str(tmp_path / "r"))
    assert (result.status, result.step, result.outcome) == ("completed", 40, "failed_to_train")
    status = RunDir(tmp_path / "r").read_status()
    assert status["step"] == 40 and status["outcome"] == "failed_to_train"
    assert status["reason"].startswith("stopped at step 40 of 80 (train.plateau_stop = 0.5): failed to train")
    assert [s for s, _ in val_curve(tmp_path / "r")] == [0, 20, 40]  # on the plateau at 20 too: before ½
    # started again, the finished run is reported, not trained on
    again = train(run(1e-7, plateau_stop=0.5), str(tmp_path / "r"))
    assert (again.status, again.step, again.reason) == ("completed", 40, status["reason"])


def test_a_stopped_run_checkpoints_where_it_stopped(tmp_path, one_torch_thread):
    """ckpt_interval 80: no scheduled checkpoint at step 40, so the stop writes its own."""
    train(run(1e-7, plateau_stop=0.5, ckpt_interval=80), str(tmp_path / "r"))
    assert list(RunDir(tmp_path / "r").read_json("checkpoints.json").values()) == [40]


def test_without_plateau_stop_the_same_run_spends_its_budget(tmp_path, one_torch_thread):
    result = train(run(1e-7), str(tmp_path / "r"))
    assert (result.step, result.outcome) == (80, "failed_to_train")
    assert "stopped" not in result.reason


def test_a_run_that_left_the_plateau_trains_to_the_end_unchanged(tmp_path, one_torch_thread):
    stopping, plain = tmp_path / "stop", tmp_path / "plain"
    assert train(run(1e-2, plateau_stop=0.5), str(stopping)).outcome == "trained"
    train(run(1e-2), str(plain))
    assert val_curve(stopping) == val_curve(plain) and val_curve(stopping)[-1][0] == 80


def test_plateau_stop_leaves_the_hash_of_runs_from_before_it_unchanged():
    assert run(1e-2).hash() == run(1e-2, plateau_stop="off").hash() != run(1e-2, plateau_stop=0.5).hash()


@pytest.mark.parametrize("fraction", [-0.1, 1.0])
def test_plateau_stop_outside_zero_to_one_is_refused(fraction):
    with pytest.raises(ValueError, match="plateau_stop"):
        run(1e-2, plateau_stop=fraction)


def test_a_stacked_member_on_the_plateau_stops_and_the_others_train_on_bit_identical(tmp_path, one_torch_thread):
    keep = [run(1e-2, seed=0, plateau_stop=0.5), run(1e-2, seed=2, plateau_stop=0.5)]
    stuck = run(1e-7, seed=1, plateau_stop=0.5)
    with_stuck = GroupTrainer([(keep[0], str(tmp_path / "a0")), (stuck, str(tmp_path / "a1")),
                               (keep[1], str(tmp_path / "a2"))]).run()
    without = GroupTrainer([(keep[0], str(tmp_path / "b0")), (keep[1], str(tmp_path / "b2"))]).run()
    assert [(r.step, r.outcome) for r in with_stuck] == [(80, "trained"), (40, "failed_to_train"), (80, "trained")]
    assert RunDir(tmp_path / "a1").read_status()["reason"].startswith("stopped at step 40 of 80")
    for a, b in (("a0", "b0"), ("a2", "b2")):
        assert val_curve(tmp_path / a) == val_curve(tmp_path / b)
    assert [r.val_loss for r in with_stuck[::2]] == [r.val_loss for r in without]


def test_a_run_killed_after_its_stop_checkpoint_stops_there_again(tmp_path, one_torch_thread):
    """Killed between the stop's checkpoint and its status (the layer-skip ablation runs in between): the resume
    starts at that evaluation and stops again, as the uninterrupted run did, instead of training to the end."""
    cfg = run(1e-7, plateau_stop=0.5)
    first = train(cfg, str(tmp_path / "r"))
    rd = RunDir(tmp_path / "r")
    rd.write_status("interrupted", step=40, reason="killed")  # as a kill before `finish` wrote its status
    again = train(cfg, str(tmp_path / "r"))
    assert (again.status, again.step, again.outcome) == ("completed", 40, "failed_to_train")
    assert again.reason == first.reason
    assert [s for s, _ in val_curve(tmp_path / "r")] == [0, 20, 40]
