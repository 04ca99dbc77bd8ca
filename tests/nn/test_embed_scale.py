"""The learnable embedding scalar of DyT's and Derf's language-model code (`learned_embed_scale`, their
`shared_scale`): init √d_model, multiplies the token embedding, trains; refused where a fixed factor is set; leaves
the run ids of every config without it as they were."""
from __future__ import annotations

import math

import pytest
import torch

from normlab.config import RunConfig, validate_config
from normlab.nn import ModelConfig, build_model
from normlab.nn.model import GPT

TINY = dict(vocab_size=20, block_size=8, n_layer=2, n_head=2, d_model=16, positions="rope", mlp="swiglu",
            init="gpt2")


def test_starts_at_sqrt_d_and_multiplies_the_token_embedding():
    model = build_model({**TINY, "norm": "dyt", "learned_embed_scale": True})
    assert isinstance(model.embed_scale, torch.nn.Parameter) and model.embed_scale.dim() == 0
    assert model.embed_scale.item() == pytest.approx(math.sqrt(16))  # √d_model = 4
    assert model.init_record["embed_scale"] == "learned, init 4 = sqrt(d)"
    tokens = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        model.embed_scale.fill_(2.5)
        h = model.blocks[0].attn.in_norm  # what the first sub-layer reads: the scaled token embedding
        seen = []
        handle = h.register_forward_pre_hook(lambda m, args: seen.append(args[0]))
        model(tokens)
        handle.remove()
    torch.testing.assert_close(seen[0], model.wte.weight[tokens] * 2.5)


def test_with_positions_it_multiplies_token_and_position_embeddings_together():
    """Derf's patch (model_derf.patch L127): (wte + wpe)·s; refused without a position table."""
    model = build_model({**TINY, "positions": "learned", "norm": "derf", "learned_embed_scale": True,
                         "embed_scale_positions": True})
    tokens = torch.tensor([[1, 2, 3, 4]])
    seen = []
    handle = model.blocks[0].attn.in_norm.register_forward_pre_hook(lambda m, args: seen.append(args[0]))
    with torch.no_grad():
        model(tokens)
    handle.remove()
    torch.testing.assert_close(seen[0], (model.wte.weight[tokens] + model.wpe.weight[:4]) * 4.0)
    with pytest.raises(ValueError, match="positions = 'rope' has none"):
        ModelConfig(**{**TINY, "learned_embed_scale": True, "embed_scale_positions": True})


@pytest.mark.parametrize("norm", ["dyt", "derf", "layernorm"])
def test_the_scalar_gets_a_gradient_and_moves(norm):
    """On a tiny model, three AdamW steps: the scalar's gradient is non-zero and its value leaves √d."""
    torch.manual_seed(0)
    model = build_model({**TINY, "norm": norm, "learned_embed_scale": True})
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    tokens = torch.randint(0, 20, (4, 8))
    grads = []
    for _ in range(3):
        opt.zero_grad()
        _, loss = model(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
        grads.append(model.embed_scale.grad.item())
        opt.step()
    assert all(g != 0.0 and math.isfinite(g) for g in grads)
    assert abs(model.embed_scale.item() - 4.0) > 1e-3


def test_off_by_default_and_a_fixed_factor_conflicts():
    assert build_model(TINY).embed_scale == 1.0  # GPT-2's recipe: unscaled
    with pytest.raises(ValueError, match="learned_embed_scale = true learns"):
        ModelConfig(**TINY, learned_embed_scale=True, embed_scale=2.0)
    with pytest.raises(ValueError, match="learned_embed_scale"):
        ModelConfig(vocab_size=20, arch="encoder-decoder", learned_embed_scale=True)
    with pytest.raises(ValueError, match="learned_embed_scale"):  # nGPT reads unit embeddings as they are
        ModelConfig(**{**TINY, "init": "normal"}, scheme="ngpt", learned_embed_scale=True)
    assert ModelConfig(**TINY, learned_embed_scale=True).stackable  # stacked as (K,) since 2026-11-29


def test_run_ids_without_it_are_unchanged():
    """Added after runs were hashed: off, it is left out of the hash (the ids below predate it)."""
    assert RunConfig().hash() == "cfd5bd20c792"
    assert validate_config({"model": {"learned_embed_scale": False}}).hash() == RunConfig().hash()
    assert validate_config({"model": {"learned_embed_scale": True}}).hash() != RunConfig().hash()


def test_a_gpt_state_dict_holds_it():
    """A checkpoint carries the learned value (a buffer-free model would lose it on reload)."""
    model = GPT(ModelConfig(**TINY, learned_embed_scale=True))
    assert "embed_scale" in model.state_dict()
