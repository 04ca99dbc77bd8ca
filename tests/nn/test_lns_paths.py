"""LayerNorm Scaling (arXiv 2502.05795) scales each sub-layer's normalized input by 1/√ℓ on every path a model
is built by: each init recipe, a model loaded from a run directory, a run started from another's weights, and
a stack of members trained as one. Elsewhere a re-initialisation once silently dropped the scaling; here it is
measured in the forward pass, from what the sub-layer actually receives, not read from an attribute."""
from __future__ import annotations

import math

import pytest
import torch

from normlab.nn import ModelConfig, build_model
from normlab.nn.schemes import Residual
from normlab.rundir.load import load_model
from normlab.train import train
from tests.conftest import tiny_config


def received_scales(model, idx) -> list[float]:
    """For each sub-layer in order: (what the sub-layer read) / (what its input norm gave), one number each."""
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []
    hooks = []
    for block in model.blocks:
        for r in (block.attn, block.mlp):
            assert isinstance(r, Residual)
            pair: dict[str, torch.Tensor] = {}
            hooks.append(r.in_norm.register_forward_hook(lambda m, a, o, p=pair: p.__setitem__("norm", o)))
            hooks.append(r.sublayer.register_forward_pre_hook(lambda m, a, p=pair: p.__setitem__("read", a[0])))
            seen.append(pair)
    with torch.no_grad():
        model(idx)
    for h in hooks:
        h.remove()
    return [float((p["read"] / p["norm"]).mean()) for p in seen]


def expected(n_layer: int) -> list[float]:
    return [1 / math.sqrt(layer + 1) for layer in range(n_layer) for _ in range(2)]


@pytest.mark.parametrize("init", ["normal", "xavier", "gpt2", "xiong"])
def test_every_init_recipe_keeps_the_scaling(init):
    torch.manual_seed(0)
    model = build_model(ModelConfig(vocab_size=20, block_size=8, n_layer=4, n_head=2, d_model=16, scheme="lns",
                                    init=init))
    assert received_scales(model, torch.randint(20, (2, 8))) == pytest.approx(expected(4), rel=1e-5)


def test_pre_ln_is_not_scaled():
    """The measurement can fail: Pre-LN's sub-layers read the norm's output as it is."""
    model = build_model(ModelConfig(vocab_size=20, block_size=8, n_layer=4, n_head=2, d_model=16, scheme="pre"))
    assert received_scales(model, torch.randint(20, (2, 8))) == pytest.approx([1.0] * 8)


def test_loaded_and_warm_started_models_keep_the_scaling(tmp_path):
    cfg = tiny_config(model={"scheme": "lns", "n_layer": 3}, train={"steps": 4, "warmup_steps": 0})
    train(cfg, tmp_path / "a")
    idx = torch.randint(20, (2, 8))
    loaded = load_model(tmp_path / "a").model
    assert received_scales(loaded, idx) == pytest.approx(expected(3), rel=1e-5)
    warm = tiny_config(model={"scheme": "lns", "n_layer": 3},
                       train={"steps": 2, "warmup_steps": 0, "init_from": str(tmp_path / "a")})
    train(warm, tmp_path / "b")
    assert received_scales(load_model(tmp_path / "b").model, idx) == pytest.approx(expected(3), rel=1e-5)


def test_a_stack_of_members_keeps_the_scaling():
    from normlab.nn.stacked import StackedGPT

    cfg = ModelConfig(vocab_size=20, block_size=8, n_layer=3, n_head=2, d_model=16, scheme="lns")
    members = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        members.append(build_model(cfg))
    stacked = StackedGPT(members)
    idx = torch.randint(20, (2, 2, 8))  # (K, B, T)
    seen = []
    hooks = [r.sublayer.register_forward_pre_hook(lambda m, a: seen.append(a[0]))
             for block in stacked.body.blocks for r in (block.attn, block.mlp)]
    norms = []
    hooks += [r.in_norm.register_forward_hook(lambda m, a, o: norms.append(o))
              for block in stacked.body.blocks for r in (block.attn, block.mlp)]
    with torch.no_grad():
        stacked(idx)
    for h in hooks:
        h.remove()
    assert [float((r / n).mean()) for r, n in zip(seen, norms)] == pytest.approx(expected(3), rel=1e-5)
