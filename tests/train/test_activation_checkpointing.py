"""train.activation_checkpointing: the same curve as without it, less activation memory, refused where a
recomputed block would corrupt shared state (ResiDual)."""
from __future__ import annotations

import json

import pytest
import torch

import normlab
from normlab.bench.timing import peak_step_memory_mb
from normlab.config import validate_config
from normlab.train.loop import train

BASE = {"model": {"n_layer": 3, "d_model": 16, "n_head": 2, "block_size": 16, "dropout": 0.1},
        "train": {"steps": 6, "eval_interval": 3, "eval_batches": 2, "batch_size": 4, "device": "cpu",
                  "warmup_steps": 0, "log_interval": 1, "untrained_margin": "off"},
        "diagnostics": {"interval": 3, "layer_skip": False}}


def curve(path):
    rows = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r.get("train_loss"), r.get("grad_norm"), r.get("val_loss")) for r in rows]


@pytest.mark.parametrize("arch, scheme", [("decoder", "deepnorm"), ("encoder-decoder", "admin"), ("encoder", "post")])
def test_checkpointing_trains_the_same_curve(tmp_path, one_torch_thread, arch, scheme):
    """Dropout 0.1: the recomputed blocks replay the same masks, so every logged number is identical."""
    runs = {}
    for flag in (False, True):
        cfg = validate_config({**BASE, "model": {**BASE["model"], "arch": arch, "scheme": scheme},
                               "train": {**BASE["train"], "activation_checkpointing": flag}})
        assert train(cfg, str(tmp_path / str(flag))).status == "completed"
        runs[flag] = curve(tmp_path / str(flag))
    assert runs[True] == runs[False] and len(runs[True]) >= 6


def test_checkpointing_cuts_activation_memory():
    torch.manual_seed(0)
    model = normlab.build_model(dict(vocab_size=32, block_size=64, n_layer=24, n_head=2, d_model=64, scheme="deepnorm"))
    x = torch.randint(32, (8, 64))

    def step():
        _, loss = model(x, x)
        loss.backward()
        model.zero_grad(set_to_none=True)
    model.train()
    plain = peak_step_memory_mb(step, torch.device("cpu"), 0)
    model.checkpoint_blocks = True
    recomputed = peak_step_memory_mb(step, torch.device("cpu"), 0)
    if plain is None:
        pytest.skip("this torch build gives no allocator events to measure with")
    assert recomputed < 0.5 * plain, (recomputed, plain)


def test_residual_refuses_checkpointing_with_the_reason():
    with pytest.raises(ValueError, match="scheme 'residual' cannot use train.activation_checkpointing"):
        validate_config({**BASE, "model": {**BASE["model"], "scheme": "residual"},
                         "train": {**BASE["train"], "activation_checkpointing": True}})
