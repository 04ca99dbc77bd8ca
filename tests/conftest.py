"""Shared fixtures: tiny configs that train in a second or two on 2 CPU cores."""
from __future__ import annotations

import pytest
import torch

from normlab.config import RunConfig, validate_config


def tiny_config(**sections) -> RunConfig:
    """A 2-layer, 32-wide char model on the packaged corpus; override with model={...}, train={...}."""
    raw = {
        "model": {"block_size": 16, "n_layer": 2, "n_head": 2, "d_model": 32},
        "train": {"steps": 30, "batch_size": 4, "lr": 3e-3, "warmup_steps": 5, "eval_interval": 10,
                  "eval_batches": 2, "ckpt_interval": 10, "log_interval": 1, "device": "cpu"},
    }
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return validate_config(raw)


@pytest.fixture
def tiny():
    return tiny_config


@pytest.fixture
def one_torch_thread():
    """Tiny models run fastest, and steadiest on a shared 2-core machine, on one thread."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
