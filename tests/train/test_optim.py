"""Learning-rate schedules and AdamW parameter groups."""
from __future__ import annotations

import math

import pytest

from normlab import build_model
from normlab.config import TrainConfig
from normlab.train.optim import build_optimizer, learning_rate


def lrs(**kw):
    cfg = TrainConfig(**kw)
    return [learning_rate(s, cfg) for s in range(cfg.steps + 5)]


def test_cosine_matches_nanogpt():
    cfg = TrainConfig(steps=2000, lr=1e-3, min_lr=1e-4, warmup_steps=100, decay_steps=2000)
    assert learning_rate(0, cfg) == pytest.approx(1e-3 / 101)
    assert learning_rate(99, cfg) == pytest.approx(1e-3 * 100 / 101)
    assert learning_rate(100, cfg) == pytest.approx(1e-3)
    mid = 100 + (2000 - 100) // 2
    assert learning_rate(mid, cfg) == pytest.approx(0.5 * (1e-3 + 1e-4))
    assert learning_rate(2000, cfg) == pytest.approx(1e-4)
    assert learning_rate(5000, cfg) == pytest.approx(1e-4)


def test_no_warmup_starts_at_peak():
    for schedule in ("constant", "cosine", "inverse_sqrt"):
        assert lrs(schedule=schedule, warmup_steps=0, steps=50, lr=2e-3)[0] == pytest.approx(2e-3)


def test_constant_and_inverse_sqrt():
    values = lrs(schedule="constant", warmup_steps=10, steps=40, lr=1e-3)
    assert values[10:] == [1e-3] * (len(values) - 10)
    cfg = TrainConfig(schedule="inverse_sqrt", warmup_steps=16, steps=100, lr=1e-3)
    assert learning_rate(16, cfg) == pytest.approx(1e-3)  # peak at the end of warmup
    assert learning_rate(64, cfg) == pytest.approx(1e-3 * math.sqrt(16 / 64))  # halves when step quadruples
    values = lrs(schedule="inverse_sqrt", warmup_steps=16, steps=100)
    assert all(a <= b for a, b in zip(values[:16], values[1:17]))  # warmup rises
    assert all(a >= b for a, b in zip(values[16:], values[17:]))  # then decays


def test_weight_decay_only_on_matrices():
    model = build_model({"vocab_size": 11, "block_size": 8, "n_layer": 2, "n_head": 2, "d_model": 16, "bias": True})
    opt = build_optimizer(model, TrainConfig(weight_decay=0.1), "cpu")
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decay["params"]) and all(p.dim() < 2 for p in no_decay["params"])
    ids = [id(p) for g in opt.param_groups for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(list(model.parameters()))  # tied head counted once
    assert any(p is model.wte.weight for p in decay["params"])


def test_every_parameter_decays_as_dyts_trainer_does():
    """`weight_decay_on = "every parameter"` (DyT's LLaMA trainer: AdamW(model.parameters(), weight_decay=0.1)):
    norm gains, biases and the DyT α and embedding scalar decay too; such a run trains alone, not in a stack."""
    from normlab.config import RunConfig
    from normlab.train.group import alone_because
    model = build_model({"vocab_size": 11, "block_size": 8, "n_layer": 2, "n_head": 2, "d_model": 16, "bias": True,
                         "norm": "dyt", "learned_embed_scale": True})
    decay, no_decay = build_optimizer(model, TrainConfig(weight_decay=0.1, weight_decay_on="every parameter"),
                                      "cpu").param_groups
    assert not no_decay["params"] and len(decay["params"]) == len(list(model.parameters()))
    assert any(p is model.embed_scale for p in decay["params"])
    cfg = RunConfig.model_validate({"train": {"weight_decay_on": "every parameter"}})
    assert "decays matrices only" in alone_because(cfg)


def test_ngpt_scaling_vectors_are_never_decayed():
    """nGPT's s_qk (heads × 1 × head_dim, a 3-D tensor), s_u, s_v, s_z and eigen learning rates stay out of weight
    decay for anyone who trains scheme `ngpt` with the default weight decay; its matrices still decay."""
    model = build_model({"vocab_size": 11, "block_size": 8, "n_layer": 2, "n_head": 2, "d_model": 16,
                         "scheme": "ngpt"})
    decay, no_decay = build_optimizer(model, TrainConfig(weight_decay=0.1), "cpu").param_groups
    decayed = {id(p) for p in decay["params"]}
    attn, mlp = model.blocks[0].attn, model.blocks[0].mlp
    scales = {"s_qk": attn.sublayer.s_qk.weight, "s_u": mlp.sublayer.s_u.weight, "s_v": mlp.sublayer.s_v.weight,
              "s_z": model.logit_scale.weight, "alpha_A": attn.eigen_lr.weight, "alpha_M": mlp.eigen_lr.weight}
    assert scales["s_qk"].dim() == 3  # what a rule by dimension alone would decay
    assert {name for name, p in scales.items() if id(p) in decayed} == set()
    n_scales = sum(1 for name, _ in model.named_parameters() if name.endswith((".s_qk.weight", ".s_u.weight",
                                                                              ".s_v.weight", "eigen_lr.weight",
                                                                              "logit_scale.weight")))
    assert n_scales == 2 * 5 + 1 and all(id(p) not in decayed for n, p in model.named_parameters()
                                         if "s_" in n or "eigen_lr" in n or "logit_scale" in n)
    assert id(attn.sublayer.qkv.weight) in decayed and id(model.wte.weight) in decayed
