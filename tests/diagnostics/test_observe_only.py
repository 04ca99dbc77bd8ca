"""Diagnostics observe and never change the math: the same curve bit for bit with them on and off,
and a resumed run keeps one copy of every measured step."""
from __future__ import annotations

import sqlite3

import pytest
import torch

from normlab.diagnostics import DiagnosticsStore
from normlab.train import RunDir, Trainer, train
from tests.conftest import tiny_config

CURVE_KEYS = ("step", "lr", "train_loss", "grad_norm", "val_loss")


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    pass


def curve(path) -> list[tuple]:
    return [tuple(row.get(k) for k in CURVE_KEYS) for row in RunDir(path).metrics()]


def all_rows(path) -> list[tuple]:
    with sqlite3.connect(path / DiagnosticsStore.FILENAME) as db:
        return db.execute("SELECT step, layer, site, metric, head, value FROM layer_metrics").fetchall()


def duplicated_keys(path) -> list[tuple]:
    with sqlite3.connect(path / DiagnosticsStore.FILENAME) as db:
        return db.execute("SELECT step, layer, site, metric, head, COUNT(*) FROM layer_metrics "
                          "GROUP BY step, layer, site, metric, head HAVING COUNT(*) > 1").fetchall()


class Interrupt(Exception):
    pass


def sort_key(row: tuple) -> tuple:
    return tuple((v is None, v if v is not None else 0) for v in row[:5])


@pytest.mark.parametrize("scheme,dropout,precision", [
    ("pre", 0.0, "fp32"), ("post", 0.0, "fp32"), ("pre", 0.1, "fp32"), ("post", 0.1, "fp32"), ("sandwich", 0.1, "bf16"),
])
def test_curve_is_bit_identical_with_diagnostics_on_and_off(tmp_path, scheme, dropout, precision):
    model = {"scheme": scheme, "dropout": dropout}
    short = {"steps": 20, "precision": precision}  # evaluations at 0, 10, 20; checkpoints at 10, 20
    on = train(tiny_config(model=model, train=short, diagnostics={"interval": 1}), tmp_path / "on")
    off = train(tiny_config(model=model, train=short, diagnostics={"interval": "off"}), tmp_path / "off")
    assert on.status == off.status == "completed"
    assert on.val_loss == off.val_loss
    curve_on, curve_off = curve(tmp_path / "on"), curve(tmp_path / "off")
    assert len(curve_on) == 21 and all(row[2] is not None for row in curve_on[1:])
    assert curve_on == curve_off
    # the final weights too
    w_on = RunDir(tmp_path / "on").load_checkpoint()["model"]
    w_off = RunDir(tmp_path / "off").load_checkpoint()["model"]
    assert all(torch.equal(w_on[k], w_off[k]) for k in w_off)
    # and the diagnostics really ran (every step) in one and not at all in the other
    assert DiagnosticsStore(tmp_path / "on").steps() == list(range(20))
    assert not (tmp_path / "off" / DiagnosticsStore.FILENAME).exists()


@pytest.mark.parametrize("interval", [1, 5])
def test_resume_keeps_every_measured_step_exactly_once(tmp_path, interval):
    cfg = tiny_config(diagnostics={"interval": interval, "layer_skip": False})
    train(cfg, tmp_path / "whole")

    def interrupt_at_17(row):
        if row["step"] == 17:
            raise Interrupt

    with pytest.raises(Interrupt):
        Trainer(cfg, tmp_path / "cut", on_log=interrupt_at_17).run()
    measured_before = DiagnosticsStore(tmp_path / "cut").steps()
    assert measured_before == [s for s in range(17) if s % interval == 0]  # steps 10.. will be measured again
    result = train(cfg, tmp_path / "cut")
    assert result.status == "completed"
    assert RunDir(tmp_path / "cut").read_meta()["resumed_from_step"] == 10

    assert duplicated_keys(tmp_path / "cut") == []
    expected_steps = [s for s in range(30) if s % interval == 0]
    assert DiagnosticsStore(tmp_path / "cut").steps() == expected_steps
    rows = all_rows(tmp_path / "cut")
    per_step = {s: sum(1 for r in rows if r[0] == s) for s in expected_steps}
    assert len(set(per_step.values())) == 1
    # and the resumed run measured exactly what the uninterrupted run did, value for value
    assert sorted(rows, key=sort_key) == sorted(all_rows(tmp_path / "whole"), key=sort_key)
    assert curve(tmp_path / "cut") == curve(tmp_path / "whole")
