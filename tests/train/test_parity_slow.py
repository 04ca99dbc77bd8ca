"""nanoGPT parity: the shipped CPU recipe reaches nanoGPT's val loss (<= 1.89). About a minute."""
from __future__ import annotations

from pathlib import Path

import pytest

from normlab.config import load_config
from normlab.train import train

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_nanogpt_cpu_recipe_reaches_val_loss_1_89(tmp_path):
    cfg = load_config(REPO / "configs" / "nanogpt_cpu.toml", ["train.device=cpu"])
    result = train(cfg, tmp_path / "run")
    assert result.status == "completed"
    assert result.val_loss <= 1.89, result.val_loss
