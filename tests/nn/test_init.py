"""Init recipes (`model.init`): each measured from the built model against its paper's numbers."""
from __future__ import annotations

import math

import pytest
import torch

import normlab
from normlab.nn.init import INIT_RECIPES, RESIDUAL_OUTPUTS
from normlab.nn.model import embed

D, L = 64, 8


def build(init: str, seed: int = 0, **kw):
    torch.manual_seed(seed)
    return normlab.build_model(dict(vocab_size=65, block_size=16, n_layer=L, n_head=4, d_model=D, init=init, **kw))


def projections(model, roles):
    return torch.cat([w.detach().flatten() for role, w in model.projections() if role in roles])


def test_gpt2_is_normal_with_residual_scaling_and_fixes_it():
    """GPT-2 §2.3: N(0, 0.02), residual outputs ÷ √(2L): the same weights as the base `normal` init with
    scaling on, whatever init_residual_scaling says (the recipe fixes it)."""
    a, b = build("gpt2", init_residual_scaling=False), build("normal", init_residual_scaling=True)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert projections(a, RESIDUAL_OUTPUTS).std().item() == pytest.approx(0.02 / math.sqrt(2 * L), rel=0.1)
    assert projections(a, ("q", "k", "v", "ffn_in")).std().item() == pytest.approx(0.02, rel=0.05)
    assert a.embed_scale == 1.0 and a.wte.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert a.init_record["recipe"] == "gpt2" and "GPT-2" in a.init_record["paper"]


def test_xiong_is_fairseqs_transformer_init():
    """Xiong et al. 2020 §3.1 (fairseq): Xavier linears, no residual scaling, embeddings N(0, d^-½) scaled by √d."""
    m = build("xiong", init_residual_scaling=True)  # the recipe fixes it: no scaling
    for role, w in m.projections():
        xavier = math.sqrt(2.0 / (w.shape[0] + w.shape[1]))
        assert w.std().item() == pytest.approx(xavier, rel=0.1), role
    assert m.wte.weight.std().item() == pytest.approx(D ** -0.5, rel=0.05)
    assert m.wpe.weight.std().item() == pytest.approx(D ** -0.5, rel=0.1)
    assert m.embed_scale == math.sqrt(D)
    assert m.init_record["recipe"] == "xiong" and "2002.04745" in m.init_record["paper"]
    assert m.init_record["embed_scale"] == "8 = sqrt(d)" and m.init_record["residual_outputs"] == "as linear"


def test_xiong_scales_the_token_embedding_in_the_forward_pass():
    """The embedding output is √d · wte[token] + wpe[position]: token part RMS ≈ 1, as the model computes it."""
    m = build("xiong").eval()
    idx = torch.randint(65, (2, 16), generator=torch.Generator().manual_seed(1))
    x = embed(m, idx, m.wpe, torch.nn.Identity())
    by_hand = math.sqrt(D) * m.wte.weight[idx] + m.wpe.weight[torch.arange(16)]
    assert torch.allclose(x, by_hand)
    assert (math.sqrt(D) * m.wte.weight[idx]).pow(2).mean().sqrt().item() == pytest.approx(1.0, rel=0.1)


@pytest.mark.parametrize("init", ["gpt2", "xiong"])
def test_deepnorm_keeps_its_beta_under_every_recipe(init):
    m = build(init, scheme="deepnorm")
    assert "scheme_override" in m.init_record
    beta = (8 * L) ** -0.25  # DeepNet Table 1, decoder-only
    for role, w in m.projections():
        if role in ("v", "out", "ffn_in", "ffn_out"):
            xavier = math.sqrt(2.0 / (w.shape[0] + w.shape[1]))
            assert w.std().item() == pytest.approx(beta * xavier, rel=0.1), role


def test_an_encoder_decoder_follows_the_recipe_in_both_stacks():
    torch.manual_seed(0)
    m = normlab.build_model(dict(vocab_size=65, block_size=16, n_layer=2, n_head=4, d_model=D, init="xiong",
                                 arch="encoder-decoder"))
    assert m.embed_scale == math.sqrt(D)
    assert m.dec_wpe.weight.std().item() == pytest.approx(D ** -0.5, rel=0.1)


def test_every_recipe_names_its_paper():
    assert set(INIT_RECIPES) == {"gpt2", "xiong"}
    assert all("§" in r.text for r in INIT_RECIPES.values())


def test_arms_sharing_a_seed_share_their_init_and_differ_only_where_the_scheme_does():
    """Runs paired by seed (the study's paired tests rest on it): Pre-LN and Post-LN built with one seed have the
    same embeddings and block projections; only the norms' placement differs."""
    pre, post = build("xiong", scheme="pre"), build("xiong", scheme="post")
    assert torch.equal(pre.wte.weight, post.wte.weight)
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(pre.projections(), post.projections()))
    other_seed = build("xiong", seed=1, scheme="pre")
    assert not torch.equal(pre.wte.weight, other_seed.wte.weight)
