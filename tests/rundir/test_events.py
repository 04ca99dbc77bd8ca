"""Live TensorBoard events: written while a run trains, rewritten on resume (never a step twice), per-layer
metrics and hparams, and study runs in folders a person can tell apart."""
from __future__ import annotations

import re

import pytest

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

from normlab.rundir.events import run_name  # noqa: E402
from normlab.train import RunDir  # noqa: E402
from normlab.train.loop import Trainer, train  # noqa: E402
from tests.conftest import tiny_config  # noqa: E402


def scalars(logdir) -> dict[str, list[int]]:
    """{tag: [steps]} of every scalar in the directory's event files (all of them, as TensorBoard reads it)."""
    out: dict[str, list[int]] = {}
    for path in sorted(logdir.glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            out.setdefault(tag, []).extend(e.step for e in acc.Scalars(tag))
    return out


def config():
    return tiny_config(train={"steps": 40, "ckpt_interval": 20, "eval_interval": 10, "log_interval": 5},
                       diagnostics={"interval": 10})


def test_events_are_written_live_and_a_resumed_run_never_repeats_a_step(tmp_path):
    events = tmp_path / "run" / "tensorboard"
    seen_live = {}

    def stop_at_30(row):
        if row["step"] == 15:  # mid-run: the steps logged so far are already in the event files
            seen_live.update(scalars(events))
        if row["step"] == 30:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Trainer(config(), str(tmp_path / "run"), on_log=stop_at_30, events=events).run()
    assert seen_live["loss/train"] == [5, 10, 15] and seen_live["loss/val"] == [0, 10]
    assert RunDir(tmp_path / "run").read_status()["status"] == "interrupted"

    train(config(), str(tmp_path / "run"), events=events)  # resumes from step 20: 25 and 30 are logged again
    whole = tmp_path / "whole"
    train(config(), str(whole), events=whole / "tensorboard")
    resumed, uninterrupted = scalars(events), scalars(whole / "tensorboard")
    for tag, steps in resumed.items():
        assert steps == sorted(set(steps)), f"{tag} shows a step twice: {steps}"
    assert resumed.keys() == uninterrupted.keys()
    assert resumed["loss/train"] == uninterrupted["loss/train"] == list(range(5, 41, 5))
    assert "residual_rms/block/layer00" in resumed and "grad_norm/block/layer01" in resumed  # per-layer metrics
    assert "hparam/val_loss" in resumed  # the hparams session, with the final metrics


def test_study_runs_write_live_events_in_folders_named_by_their_settings(tmp_path):
    from normlab.study.load import load_study
    from normlab.study.runner import run_study
    from normlab.study.tensorboard import write_events
    from tests.study.test_study import TINY

    spec = load_study("standard", claims=["C13"], seeds=[0, 1], overrides=TINY + ["train.steps=20"], init_pass=False)
    run_study(spec, tmp_path / "s", workers=2, tensorboard=True)
    names = sorted(p.name for p in (tmp_path / "s" / "tensorboard").iterdir())
    assert len(names) == 4 and all(re.fullmatch(r"pre-layernorm-L\d+-d16(-nofinalnorm)?-lr[\d.e-]+-w\d+-s[01]-[0-9a-f]{6}",
                                                n) for n in names), names
    assert len({n.rsplit("-", 1)[0] for n in names}) == 4  # C13's two arms × two seeds, told apart without the id
    assert write_events(tmp_path / "s") == 0  # every run wrote its own, live
    # a study trained without the flag gets its events afterwards, under the same names
    run_study(spec, tmp_path / "plain", workers=2)
    assert write_events(tmp_path / "plain") == 4
    assert sorted(p.name for p in (tmp_path / "plain" / "tensorboard").iterdir()) == names


def test_run_name_tells_runs_apart():
    cfg = tiny_config(model={"scheme": "deepnorm", "n_layer": 12}, train={"lr": 3e-3, "warmup_steps": 0, "seed": 4})
    assert run_name(cfg.to_dict(), "0123456789ab") == "deepnorm-layernorm-L12-d32-lr0.003-w0-s4-012345"
