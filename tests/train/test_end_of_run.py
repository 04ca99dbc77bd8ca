"""After the last step: the layer-skip ablation fits its budget, every phase is shown, and an interruption in the
ablation leaves the run completed (train/end_of_run.py)."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
from torch import nn

from normlab.config import RunConfig, validate_config
from normlab.diagnostics.skip import plan_layer_skip, spread
from normlab.train import end_of_run
from normlab.train.end_of_run import LayerSkipRun, Phase, budget_s
from normlab.train.loop import Trainer, layer_skip_again, train
from normlab.rundir import RunDir
from tests.conftest import tiny_config


# -- the plan: what fits the budget ------------------------------------------------------
def test_a_plan_keeps_layers_first_then_gives_up_batches_then_layers():
    """(1 + layers) evaluations of `batches` each, at 1 s a val batch."""
    whole = plan_layer_skip(6, None, 4, batch_s=1.0, budget_s=28.0)  # (1 + 6) × 4 = 28
    assert (sorted(whole.layers), whole.batches, whole.whole) == ([0, 1, 2, 3, 4, 5], 4, True)
    fewer_batches = plan_layer_skip(6, None, 4, batch_s=1.0, budget_s=27.9)  # 27 // 7 = 3 batches each
    assert (sorted(fewer_batches.layers), fewer_batches.batches, fewer_batches.whole) == ([0, 1, 2, 3, 4, 5], 3, False)
    fewer_layers = plan_layer_skip(1000, 100, 20, batch_s=1.0, budget_s=19.0)  # 19 one-batch evaluations
    assert fewer_layers.batches == 1 and len(fewer_layers.layers) == 18
    assert {0, 999} <= set(fewer_layers.layers)
    assert "18 of 1000 layers" in fewer_layers.why and "100 asked for" in fewer_layers.why
    none = plan_layer_skip(6, None, 4, batch_s=1.0, budget_s=2.9)  # the full model and one layer: not a depth
    assert none.layers == [] and "pay for 2" in none.why


def test_the_layers_are_measured_spread_out_so_any_prefix_covers_the_stack():
    assert spread(list(range(9))) == [0, 8, 4, 2, 6, 1, 3, 5, 7]
    assert sorted(spread(list(range(37)))) == list(range(37))
    assert spread([5]) == [5] and spread([]) == []


def test_the_budget_is_a_share_of_the_training_time_with_a_floor_and_can_be_lifted():
    dc = RunConfig().diagnostics
    assert budget_s(dc, 400.0) == pytest.approx(100.0)  # 25 %
    assert budget_s(dc, 1.0) == end_of_run.BUDGET_FLOOR_S  # a run of seconds keeps its ablation whole
    assert budget_s(dc.model_copy(update={"end_of_run_budget": 0.0}), 400.0) == 0.0
    assert budget_s(dc.model_copy(update={"layer_skip_budgeted": False}), 400.0) is None


def test_the_new_settings_leave_every_run_id_as_it_was():
    assert RunConfig().hash() == "cfd5bd20c792"  # computed before the budget existed
    same = validate_config({"diagnostics": {"end_of_run_budget": 0.25, "layer_skip_budgeted": True}})
    assert same.hash() == RunConfig().hash()
    assert validate_config({"diagnostics": {"layer_skip_budgeted": False}}).hash() != RunConfig().hash()
    assert validate_config({"diagnostics": {"end_of_run_budget": 0.5}}).hash() != RunConfig().hash()


# -- the ablation on a clock of its own ----------------------------------------------------
class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class NoPhases:
    @contextlib.contextmanager
    def phase(self, *args, **kwargs):
        yield Phase("test", 1, "val batches")


def ablation(monkeypatch, budget, batch_costs, eval_batches=4, n_layer=6, interrupt_at=None):
    """A LayerSkipRun whose every val batch costs the next of `batch_costs` seconds (the last one repeats)."""
    clock, calls = Clock(), []
    monkeypatch.setattr(end_of_run, "time", SimpleNamespace(perf_counter=clock))  # this module's clock alone

    def evaluate(batches, on_batch):
        calls.append(batches)
        if interrupt_at is not None and len(calls) == interrupt_at:
            raise KeyboardInterrupt
        for _ in range(batches):
            clock.now += batch_costs[min(len(calls) - 1, len(batch_costs) - 1)]
            on_batch()
        return 1.0 + 0.1 * len(calls)  # every evaluation a different loss

    run = LayerSkipRun([nn.Identity() for _ in range(n_layer)], evaluate, eval_batches, None, budget)
    return run, calls


def test_a_budgeted_ablation_takes_fewer_batches_and_stays_within_its_budget(monkeypatch):
    run, calls = ablation(monkeypatch, budget=10.0, batch_costs=[1.0])  # 0.8 × 10 − 1 s timed = 7 batches
    saved = []
    record = run.run(NoPhases(), saved.append)
    assert calls == [1] * 7  # the timed batch is the full model's; then each of 6 layers on one batch
    assert record["status"] == "complete" and not record["whole"] and record["eval_batches"] == 1
    assert record["sampled_layers"] == [0, 1, 2, 3, 4, 5] and record["seconds"] == 7.0 <= 10.0
    assert saved[-1] == record


def test_an_ablation_that_runs_slower_than_planned_stops_at_its_budget(monkeypatch):
    run, calls = ablation(monkeypatch, budget=10.0, batch_costs=[1.0, 1.0, 2.5])  # planned at 1 s, then 2.5 s
    record = run.run(NoPhases(), lambda r: None)
    # 1 + 1 + 2.5 + 2.5 = 7 s, then 9.5 s: one more would end at 12 s, past the 10 s budget
    assert record["status"] == "partial" and record["stopped"] == "out of budget after 4 of 6 layers"
    assert record["seconds"] == 9.5
    measured = [i for i, d in enumerate(record["delta_loss"]) if d is not None]
    assert measured == [0, 1, 2, 5]  # the first, the last, the middle, ...: spread, not the bottom of the stack
    assert record["skipped"] == 4 and record["judged"].startswith("judged on 4 evenly spaced layers of 6")


def test_no_budget_measures_everything_over_every_batch_and_a_zero_budget_nothing(monkeypatch):
    run, calls = ablation(monkeypatch, budget=None, batch_costs=[100.0])
    record = run.run(NoPhases(), lambda r: None)
    assert calls == [4] * 7 and record["whole"] and record["status"] == "complete"  # no timing batch either
    zero, calls = ablation(monkeypatch, budget=0.0, batch_costs=[1.0])
    assert zero.run(NoPhases(), lambda r: None)["status"] == "skipped" and calls == []


def test_ctrl_c_in_the_ablation_saves_what_was_measured_and_goes_on_up(monkeypatch):
    run, _ = ablation(monkeypatch, budget=None, batch_costs=[1.0], interrupt_at=4)  # base, 2 layers, then Ctrl-C
    saved = []
    with pytest.raises(KeyboardInterrupt):
        run.run(NoPhases(), saved.append)
    assert saved[-1]["status"] == "partial" and saved[-1]["stopped"] == "interrupted after 2 of 6 layers"
    assert [i for i, d in enumerate(saved[-1]["delta_loss"]) if d is not None] == [0, 5]


# -- a real run -----------------------------------------------------------------------------
def quick_config(**diagnostics):
    return tiny_config(model={"n_layer": 3}, train={"steps": 4, "eval_interval": 2, "ckpt_interval": 2},
                       diagnostics={"interval": "off", "layer_skip": True, **diagnostics})


def test_every_phase_after_the_last_step_is_shown_and_a_study_reads_it_in_status_json(tmp_path):
    seen, status_phases = [], []

    def on_phase(phase):
        seen.append((phase.name, phase.done, phase.total, phase.ended))
        status_phases.append(RunDir(tmp_path / "run").read_status().get("phase"))

    result = Trainer(quick_config(), str(tmp_path / "run"), on_phase=on_phase).run()
    assert result.status == "completed"
    names = list(dict.fromkeys(name for name, *_ in seen))
    assert names == ["final evaluation", "checkpoint", "layer-skip ablation"]
    for name in names:
        last = [s for s in seen if s[0] == name][-1]
        assert last[3] and last[1] == last[2], last  # each ends with its bar full
    assert any(p and p.startswith("layer-skip ablation 0/") for p in status_phases)
    status = RunDir(tmp_path / "run").read_status()
    assert "phase" not in status and status["layer_skip"] == "complete"
    record = RunDir(tmp_path / "run").read_json("layer_skip.json")
    assert record["whole"] and record["sampled_layers"] == [0, 1, 2] and record["base_loss"] == result.val_loss


def test_ctrl_c_in_the_ablation_keeps_the_run_completed_and_diagnose_measures_it_later(tmp_path, monkeypatch):
    calls = []
    real = Trainer._ablation_loss

    def interrupted(self, batches, on_batch):
        calls.append(batches)
        if len(calls) == 3:  # the full model, one layer skipped, then Ctrl-C
            raise KeyboardInterrupt
        return real(self, batches, on_batch)

    monkeypatch.setattr(Trainer, "_ablation_loss", interrupted)
    run = RunDir(tmp_path / "run")
    trainer = Trainer(quick_config(), str(run.path))
    with pytest.raises(KeyboardInterrupt):
        trainer.run()
    status = run.read_status()
    assert status["status"] == "completed" and status["step"] == 4
    assert status["layer_skip"] == "partial: interrupted after 1 of 3 layers"
    assert run.find_checkpoint("cpu") is not None and run.metrics()[-1]["step"] == 4
    assert run.read_json("layer_skip.json")["status"] == "partial"
    assert trainer.result.status == "completed"

    calls.clear()
    assert train(quick_config(), run.path).status == "completed" and calls == []  # not run again on a rerun
    monkeypatch.setattr(Trainer, "_ablation_loss", real)
    record = layer_skip_again(run.path)
    assert record["status"] == "complete" and record["whole"] and record["skipped"] == 3
    assert run.read_json("layer_skip.json") == record and run.read_status()["layer_skip"] == "complete"


def test_diagnose_layer_skip_refuses_a_run_that_is_not_completed(tmp_path):
    run = RunDir(tmp_path / "run")
    run.create()
    run.write_config(quick_config())
    run.write_status("interrupted", step=2)
    with pytest.raises(ValueError, match="is interrupted .*finish its training first"):
        layer_skip_again(run.path)
    with pytest.raises(ValueError, match="not a normlab run directory"):
        layer_skip_again(tmp_path / "nothing")


def test_sigterm_in_the_ablation_of_normlab_train_leaves_it_completed(tmp_path):
    """The CLI turns SIGTERM into Ctrl-C's path; an ablation with no budget over many val batches is still going
    when the signal comes."""
    cfg = tiny_config(model={"n_layer": 8}, train={"steps": 2, "warmup_steps": 0, "eval_interval": 2, "ckpt_interval": 2,
                                                   "eval_batches": 60},
                      diagnostics={"interval": "off", "layer_skip": True, "layer_skip_budgeted": False})
    (tmp_path / "config.toml").write_text(cfg.to_toml())
    run = RunDir(tmp_path / "run")
    proc = subprocess.Popen([sys.executable, "-m", "normlab", "train", str(tmp_path / "config.toml"), "--out",
                             str(run.path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "200"})
    deadline = time.monotonic() + 120
    while "layer-skip" not in ((run.read_status() or {}).get("phase") or ""):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in out + err and "completed 2 steps" in out
    assert f"normlab diagnose {run.path} --layer-skip" in err
    status = run.read_status()
    assert status["status"] == "completed" and status["layer_skip"].startswith(("partial", "skipped"))


def test_a_studys_progress_line_shows_the_phase_a_run_is_in(tmp_path):
    from rich.progress import Progress

    from normlab.cli.show import sync_run_lines
    from normlab.study.state import active_runs

    cfg = quick_config()
    run = RunDir(tmp_path / "run")
    run.create()
    run.append_metrics({"step": 4, "train_loss": 3.5})
    run.write_status("completed", step=4, phase="layer-skip ablation 3/8 val batches, ~2 s left")

    class Ledger:  # the one study run being trained now
        def running(self):
            return [("abc", cfg.to_dict())]

        def run_dir(self, rid):
            return run.path

    [active] = active_runs(Ledger())
    assert active.phase == "layer-skip ablation 3/8 val batches, ~2 s left"
    assert active.progress_text().endswith("step 4/4 loss 3.5000, layer-skip ablation 3/8 val batches, ~2 s left")
    bar, lines = Progress(disable=True), {}
    sync_run_lines(bar, lines, [active])
    assert bar.tasks[0].fields["status"] == "layer-skip ablation 3/8 val batches, ~2 s left"


def test_normlab_diagnose_layer_skip_measures_a_completed_run_whole(tmp_path):
    from typer.testing import CliRunner

    from normlab.cli import app

    run = RunDir(tmp_path / "run")
    assert train(quick_config(end_of_run_budget=0.0), run.path).status == "completed"
    assert run.read_status()["layer_skip"] == "skipped: diagnostics.end_of_run_budget = 0"
    assert not (run.path / "layer_skip.json").exists()
    result = CliRunner().invoke(app, ["diagnose", str(run.path), "--layer-skip"])
    assert result.exit_code == 0, result.output
    assert "effective depth: " in result.output and "layer_skip.json" in result.output
    assert run.read_json("layer_skip.json")["whole"] and run.read_status()["layer_skip"] == "complete"
    refused = CliRunner().invoke(app, ["diagnose", str(run.path), "--layer-skip", "--no-skip"])
    assert refused.exit_code == 2 and "leave out --no-skip" in refused.output
