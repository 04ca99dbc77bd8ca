"""The study's cost in reference runs (study/reference.py): one reference run timed at a study's start, once per
host, stated beside the wall time in verdicts.json and the report."""
from __future__ import annotations

import socket

import pytest

from normlab.study import reference
from normlab.study.reference import in_reference_runs, measure_reference, reference_config


def test_the_reference_run_is_the_standard_base_run_for_its_full_budget():
    cfg = reference_config()
    assert (cfg.model.scheme, cfg.model.n_layer, cfg.model.d_model, cfg.model.block_size) == ("pre", 4, 64, 32)
    assert cfg.train.steps == 300 and cfg.train.plateau_stop == "off" and cfg.train.number("threads") == 1


def test_a_study_times_it_once_per_host(monkeypatch):
    monkeypatch.setenv("NORMLAB_REFERENCE_RUN", "on")
    monkeypatch.setattr(reference, "time_reference_run", lambda: 7.25)
    measured = measure_reference(None)
    assert measured["s"] == 7.25 and measured["host"] == socket.gethostname()
    assert measure_reference(measured) is measured  # resumed on the same host: not timed again
    elsewhere = {**measured, "host": "another-host", "s": 3.0}
    assert measure_reference(elsewhere)["s"] == 7.25  # resumed elsewhere: timed there
    monkeypatch.setenv("NORMLAB_REFERENCE_RUN", "off")
    assert measure_reference(None) is None and measure_reference(elsewhere) is elsewhere


def test_a_wall_time_in_reference_runs():
    assert in_reference_runs(700.0, {"s": 7.0}) == pytest.approx(100.0)
    assert in_reference_runs(700.0, None) is None and in_reference_runs(0.0, {"s": 7.0}) is None


@pytest.mark.slow
def test_the_reference_run_trains_and_is_timed():
    seconds = reference.time_reference_run()
    assert 0 < seconds < 600
