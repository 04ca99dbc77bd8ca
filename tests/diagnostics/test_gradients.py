"""`step0_block_gradients` measures without training what a run's probe records at its first step, so C2's step-0
parts can be judged over a hundred seeds at init: it must equal, block by block, the `grad_norm/block` a real
training run stores for step 0."""
from __future__ import annotations

import dataclasses

import pytest

from normlab.diagnostics.gradients import step0_block_gradients
from normlab.study.claims import CLAIMS
from normlab.study.records import record_from_run_dir
from normlab.study.presets import PRESETS
from normlab.train import train
from tests.conftest import tiny_config


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    pass


def _recorded(cfg, path) -> list[float]:
    """The step-0 per-block gradient norms a training run of `cfg` records (its DiagnosticsStore, as a study reads it)."""
    assert train(cfg, path).status == "completed"
    return record_from_run_dir("r", path).layers_init["grad_norm/block"]


@pytest.mark.parametrize("scheme, init, seed", [("pre", "gpt2", 0), ("post", "xiong", 3)])
def test_step0_block_gradients_are_what_a_one_step_run_records(tmp_path, scheme, init, seed):
    # clipping at 1e-3 would shrink every gradient the optimizer sees: the probe, and this, read them before it
    cfg = tiny_config(model={"scheme": scheme, "init": init, "n_layer": 3},
                      train={"steps": 1, "seed": seed, "eval_interval": 1, "ckpt_interval": 1, "grad_clip": 1e-3},
                      diagnostics={"interval": 1, "layer_skip": False})
    recorded = _recorded(cfg, tmp_path / "run")
    measured = step0_block_gradients(cfg)
    assert len(recorded) == len(measured) == 3
    assert measured == pytest.approx(recorded, rel=1e-5)
    assert all(g > 1e-3 for g in measured)  # unclipped: above the clip


def test_another_seed_gives_other_gradients():
    cfg = tiny_config(model={"n_layer": 2}, train={"seed": 0})
    other = tiny_config(model={"n_layer": 2}, train={"seed": 1})
    assert step0_block_gradients(cfg) == step0_block_gradients(cfg)  # deterministic
    assert step0_block_gradients(cfg) != pytest.approx(step0_block_gradients(other), rel=1e-3)


def test_c2_measures_both_schemes_and_recipes_at_the_deepest_depth_without_training():
    preset = dataclasses.replace(
        PRESETS["quick"], depths=[2, 3], seeds=[1000], knobs={"C2": {"init_seeds": 2}},
        base={**PRESETS["quick"].base, "model.block_size": 16, "model.d_model": 32, "model.n_head": 2,
              "train.batch_size": 4})
    m = CLAIMS.get("C2")().measure(preset)
    assert (m["depth"], m["seeds"]) == (3, [1000, 1001])
    assert m["at"] == {"model.block_size": 16, "model.d_model": 32}  # the base it was measured on, to match records
    assert sorted(m["profiles"]) == ["gpt2/post", "gpt2/pre", "xiong/post", "xiong/pre"]
    assert all(sorted(by_seed) == ["1000", "1001"] and all(len(p) == 3 for p in by_seed.values())
               for by_seed in m["profiles"].values())
    assert m["profiles"]["xiong/post"]["1000"] != m["profiles"]["xiong/pre"]["1000"]
