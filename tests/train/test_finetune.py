"""Fine-tuning: `train.init_from` starts a run from another run's trained weights, on a second corpus
encoded with the first one's vocabulary (`data.vocab_from`)."""
from __future__ import annotations

import json

import pytest
import torch

from normlab.config import validate_config
from normlab.data import PACKAGED, load_corpus
from normlab.rundir import load_model
from normlab.train.lifecycle import RunError
from normlab.train.loop import train

BASE = {"model": {"n_layer": 1, "d_model": 16, "n_head": 2, "block_size": 16},
        "train": {"steps": 6, "eval_interval": 6, "eval_batches": 2, "batch_size": 2, "device": "cpu",
                  "warmup_steps": 0, "ckpt_interval": 6, "untrained_margin": "off"},
        "diagnostics": {"interval": "off", "layer_skip": False}}
MILTON = {"path": "paradise_lost", "vocab_from": "tinyshakespeare"}


def config(data=None, model=None, **train):
    return validate_config({"model": {**BASE["model"], **(model or {})}, "data": data or {},
                            "train": {**BASE["train"], **train}, "diagnostics": BASE["diagnostics"]})


def test_paradise_lost_ships_with_the_package_and_takes_shakespeares_vocabulary():
    assert set(PACKAGED) == {"tinyshakespeare", "paradise_lost"}
    own = load_corpus("paradise_lost", block_size=16)
    shared = load_corpus("paradise_lost", block_size=16, vocab_from="tinyshakespeare")
    shakespeare = load_corpus(None, block_size=16)
    assert shared.tokenizer.chars == shakespeare.tokenizer.chars  # the pretrained model's token ids
    assert own.tokenizer.chars != shakespeare.tokenizer.chars  # Milton has "(", ")" and a \x1a Shakespeare lacks
    assert shared.dropped == 114 and shared.vocab_from == "tinyshakespeare"
    assert len(shared.train) + len(shared.val) == 465072 - 114


def test_init_from_starts_from_the_source_weights_and_records_it(tmp_path):
    train(config(), str(tmp_path / "src"))
    source = load_model(tmp_path / "src").model.state_dict()
    # a 0-lr fine-tune keeps the weights: what it starts from is exactly the source's
    result = train(config(MILTON, init_from=str(tmp_path / "src"), lr=1e-12, min_lr=0.0, weight_decay=0.0),
                   str(tmp_path / "ft"))
    assert result.status == "completed"
    tuned = load_model(tmp_path / "ft").model.state_dict()
    assert all(torch.allclose(source[k], tuned[k], atol=1e-9) for k in source)
    meta = json.loads((tmp_path / "ft" / "run.json").read_text())
    assert meta["init_from"] == str(tmp_path / "src")
    assert meta["corpus"]["name"] == "paradise_lost" and meta["corpus"]["dropped_chars"] == 114
    # and a different init would have given different weights (the check above can fail)
    train(config(MILTON, lr=1e-12, min_lr=0.0, weight_decay=0.0, seed=7), str(tmp_path / "scratch"))
    other = load_model(tmp_path / "scratch").model.state_dict()
    assert not all(torch.allclose(source[k], other[k]) for k in source)


def test_init_from_another_model_or_a_missing_run_is_a_clear_error(tmp_path):
    train(config(), str(tmp_path / "src"))
    with pytest.raises(RunError, match=r"another model: model.n_layer = 1 there, 2 here"):
        train(config(MILTON, model={"n_layer": 2}, init_from=str(tmp_path / "src")), str(tmp_path / "a"))
    with pytest.raises(RunError, match=r"train.init_from .*nowhere.* cannot be loaded"):
        train(config(MILTON, init_from=str(tmp_path / "nowhere")), str(tmp_path / "b"))
    status = json.loads((tmp_path / "b" / "status.json").read_text())
    assert status["status"] == "failed" and "cannot be loaded" in status["reason"]
