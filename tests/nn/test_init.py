"""Init recipes (`model.init`): each measured from the built model against its paper's numbers."""
from __future__ import annotations

import math

import pytest
import torch

import normlab
from normlab.nn.init import INIT_RECIPES, RESIDUAL_OUTPUTS
from normlab.nn.model import embed
from normlab.nn.stacked import StackedGPT

D, L = 64, 8


def build(init: str, seed: int = 0, **kw):
    torch.manual_seed(seed)
    return normlab.build_model(dict(vocab_size=65, block_size=16, n_layer=L, n_head=4, d_model=D, init=init, **kw))


def projections(model, roles):
    return torch.cat([w.detach().flatten() for role, w in model.projections() if role in roles])


def test_gpt2_fixed_std_is_normal_with_residual_scaling_and_fixes_it():
    """GPT-2 §2.3 with the constant as a number: N(0, 0.02), residual outputs ÷ √(2L): the same weights as the
    base `normal` init with scaling on, whatever init_residual_scaling says (the recipe fixes it)."""
    a, b = build("gpt2-fixed-std", init_residual_scaling=False), build("normal", init_residual_scaling=True)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert projections(a, RESIDUAL_OUTPUTS).std().item() == pytest.approx(0.02 / math.sqrt(2 * L), rel=0.1)
    assert projections(a, ("q", "k", "v", "ffn_in")).std().item() == pytest.approx(0.02, rel=0.05)
    assert a.embed_scale == 1.0 and a.wte.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert a.init_record["recipe"] == "gpt2-fixed-std" and "GPT-2" in a.init_record["paper"]
    assert a.init_record["residual_outputs"] == ("normal(0, 0.005) = 0.02/sqrt(2*n_layer) (gpt2-fixed-std: always "
                                                 "scaled; init_residual_scaling does not apply)")  # 0.02/√16


@pytest.mark.parametrize("recipe, width, scaled", [("gpt2", 768, True), ("llama", 4096, False)])
def test_a_width_keeping_recipe_draws_its_papers_sigma_sqrt_d_at_our_width(recipe, width, scaled):
    """Linears σ = init_std·√(paper width / d): 0.02 at GPT-2's 768 is 0.069 at 64, at LLaMA-7B's 4096 0.16; so
    σ·√d, a linear's output RMS per unit input RMS, is the paper's. Embeddings keep the stream at init: 0.02
    without a scalar, the linears' σ under a learned √d scalar (the stream σ·√d then as at the paper's width); an
    untied head draws as a linear. The old weights, σ = 0.02 everywhere, are `gpt2-fixed-std`."""
    sigma = 0.02 * math.sqrt(width / D)
    m = build(recipe)
    assert projections(m, ("q", "k", "v", "ffn_in")).std().item() == pytest.approx(sigma, rel=0.05)
    residual = sigma / math.sqrt(2 * L) if scaled else sigma
    assert projections(m, RESIDUAL_OUTPUTS).std().item() == pytest.approx(residual, rel=0.1)
    assert m.wte.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert m.init_record["std"] == f"{sigma:g} = 0.02*sqrt({width}/{D})"
    assert "a linear's output RMS" in m.init_record["keeps"]
    scalar = build(recipe, learned_embed_scale=True, tie_weights=False)
    assert scalar.wte.weight.std().item() == pytest.approx(sigma, rel=0.05)  # stream σ·√d = 0.02·√width
    assert (scalar.wte.weight.std() * scalar.embed_scale).item() == pytest.approx(0.02 * math.sqrt(width), rel=0.05)
    assert scalar.lm_head.weight.std().item() == pytest.approx(sigma, rel=0.05)
    # at the paper's width the recipe is the paper's number
    wide = normlab.build_model(dict(vocab_size=65, block_size=16, n_layer=1, n_head=4, d_model=width, init=recipe))
    assert wide.init_record["std"].startswith("0.02 ")


def test_the_committed_regime_benchmark_says_which_recipes_keep_their_regime():
    """benchmarks/results/init_regime.json, rebuilt here for the widths up to 1024 (4096 is the full run's): the
    width-keeping recipes keep the stream, the sub-layers and the gain within 1.25×; gpt2-fixed-std does not
    (its first block's gain 1.07 at width 64 against 4.75 at 768); every frontier arm keeps its stream."""
    import json
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "benchmarks"))
    import init_regime
    committed = json.loads((root / "benchmarks/results/init_regime.json").read_text())
    tokens = init_regime.tokens_of_corpus()
    for name in ("gpt2", "gpt2-fixed-std", "xiong", "F3 Derf", "F10 mHC", "F11 AttnRes"):
        width, overrides, _ = {**init_regime.ROWS, **init_regime.frontier_rows(), **init_regime.residual_rows()}[name]
        ours = init_regime.measure(overrides, init_regime.OURS, tokens)
        row = committed["rows"][name]
        assert ours["stream_rms"] == pytest.approx(row["ours"]["stream_rms"], rel=1e-5)
        assert ours["sublayer_rms"] == pytest.approx(row["ours"]["sublayer_rms"], rel=1e-5)
        if width <= 1024:
            paper = init_regime.measure(overrides, width, tokens)
            assert init_regime.compare(ours, paper) == pytest.approx(row["ratio"], rel=1e-4)
    kept = {n: r["ratio"]["kept"] for n, r in committed["rows"].items()}
    assert kept == {"gpt2": True, "gpt2-fixed-std": False, "llama": True, "xiong": True, "F2 DyT": False,
                    "F2 RMSNorm": True, "F3 Derf": True, "F3 LayerNorm": True, "F10 HC": True, "F10 mHC": True,
                    "F11 AttnRes": True, "F12 SpanNorm": True, "F13 DyT": True, "F13 LayerNorm": True}
    assert all(r["ratio"]["stream_kept"] for r in committed["rows"].values())


def test_gpt2_is_not_the_old_run_under_its_old_id(monkeypatch):
    """`gpt2` moved meaning (2026-11-28): its config hashes apart from what the same config hashed to before
    (`compat.HASH_MEANING_CHANGED`), so a ledger or run directory made under the old meaning never answers for it;
    `gpt2-fixed-std` is the old weights under their own name."""
    from normlab import compat, config
    new = config.RunConfig.model_validate({"model": {"init": "gpt2"}})
    xiong = config.RunConfig.model_validate({"model": {"init": "xiong"}})
    with monkeypatch.context() as m:
        m.setattr(compat, "HASH_MEANING_CHANGED", {})  # the hashes as they were before the meaning moved
        old_id, old_xiong = new.hash(), xiong.hash()
    assert new.hash() != old_id
    assert new.hash() != config.RunConfig.model_validate({"model": {"init": "gpt2-fixed-std"}}).hash()
    assert xiong.hash() == old_xiong  # every other recipe keeps its runs' ids


def test_xiong_is_fairseqs_transformer_init():
    """Xiong et al. 2020 §4.1 (and fairseq, §3.2): Xavier linears, no residual scaling, embeddings N(0, d^-½)
    scaled by √d."""
    m = build("xiong", init_residual_scaling=True)  # the recipe fixes it: no scaling
    for role, w in m.projections():
        xavier = math.sqrt(2.0 / (w.shape[0] + w.shape[1]))
        assert w.std().item() == pytest.approx(xavier, rel=0.1), role
    assert m.wte.weight.std().item() == pytest.approx(D ** -0.5, rel=0.05)
    assert m.wpe.weight.std().item() == pytest.approx(D ** -0.5, rel=0.1)
    assert m.embed_scale == math.sqrt(D)
    assert m.init_record["recipe"] == "xiong" and "2002.04745" in m.init_record["paper"]
    assert m.init_record["embed_scale"] == "8 = sqrt(d)" and m.init_record["embeddings"] == "normal(0, 0.125) = d^-1/2"
    assert m.init_record["residual_outputs"] == ("as linear (xiong: no residual scaling; "
                                                 "init_residual_scaling does not apply)")


def test_xiong_scales_the_token_embedding_in_the_forward_pass():
    """The embedding output is √d · wte[token] + wpe[position]: token part RMS ≈ 1, as the model computes it."""
    m = build("xiong").eval()
    idx = torch.randint(65, (2, 16), generator=torch.Generator().manual_seed(1))
    x = embed(m, idx, m.wpe, torch.nn.Identity())
    by_hand = math.sqrt(D) * m.wte.weight[idx] + m.wpe.weight[torch.arange(16)]
    assert torch.allclose(x, by_hand)
    assert (math.sqrt(D) * m.wte.weight[idx]).pow(2).mean().sqrt().item() == pytest.approx(1.0, rel=0.1)


@pytest.mark.parametrize("init", ["gpt2", "gpt2-fixed-std", "llama", "xiong"])
def test_deepnorm_keeps_its_beta_under_every_recipe(init):
    m = build(init, scheme="deepnorm")
    assert "scheme_override" in m.init_record
    beta = (8 * L) ** -0.25  # DeepNet Table 1, decoder-only
    for role, w in m.projections():
        if role in ("v", "out", "ffn_in", "ffn_out"):
            xavier = math.sqrt(2.0 / (w.shape[0] + w.shape[1]))
            assert w.std().item() == pytest.approx(beta * xavier, rel=0.1), role


def test_an_encoder_decoder_follows_the_recipe_in_both_stacks():
    """Both stacks Xavier with no residual scaling, both position tables N(0, d^-½), one √d token scale."""
    torch.manual_seed(0)
    m = normlab.build_model(dict(vocab_size=65, block_size=16, n_layer=2, n_head=4, d_model=D, init="xiong",
                                 arch="encoder-decoder"))
    assert m.embed_scale == math.sqrt(D)
    for table in (m.wte, m.wpe, m.dec_wpe):
        assert table.weight.std().item() == pytest.approx(D ** -0.5, rel=0.1)
    for stack in (m.projections(), m.encoder_projections()):
        roles = set()
        for role, w in stack:
            roles.add(role)
            assert w.std().item() == pytest.approx(math.sqrt(2.0 / (w.shape[0] + w.shape[1])), rel=0.15), role
        assert set(RESIDUAL_OUTPUTS) <= roles


def test_xiongs_untied_head_is_fairseqs_output_projection():
    """fairseq: a head not shared with the embedding is N(0, d^-½) too; tied, it is the N(0, d^-½) table itself."""
    untied, tied = build("xiong", tie_weights=False), build("xiong")
    assert untied.lm_head.weight.std().item() == pytest.approx(D ** -0.5, rel=0.05)
    assert untied.init_record["head"] == "normal(0, 0.125)"
    assert tied.lm_head.weight is tied.wte.weight and tied.init_record["head"] == "tied to wte"
    assert build("normal", tie_weights=False).lm_head.weight.std().item() == pytest.approx(0.02, rel=0.05)


def test_the_studys_base_init_still_builds_as_a_base_init():
    """init = xavier with init_residual_scaling = false (the study's base) is the plain base init, unscaled."""
    m = build("xavier", init_residual_scaling=False)
    assert m.embed_scale == 1.0 and m.wte.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert m.init_record["recipe"] == "xavier" and m.init_record["residual_outputs"] == "as linear"


def test_a_stack_scales_the_token_embedding_as_each_member_alone():
    """StackedGPT has its own embedding path: under xiong it must multiply by √d as `embed` does."""
    members = [build("xiong", seed=s).eval() for s in (0, 1)]
    idx = torch.randint(65, (2, 3, 16), generator=torch.Generator().manual_seed(2))  # (K, B, T)
    logits, losses = StackedGPT(members).eval()(idx, idx)
    for k, member in enumerate(members):
        alone_logits, alone_loss = member(idx[k], idx[k])
        assert torch.allclose(logits[k], alone_logits, rtol=1e-5, atol=1e-5)
        assert losses[k].item() == pytest.approx(alone_loss.item(), rel=1e-6)


def test_every_recipe_names_its_paper():
    assert set(INIT_RECIPES) == {"gpt2", "gpt2-fixed-std", "llama", "xiong"}
    assert all("§" in r.text or "foundation-model-stack" in r.text or "GPT-2" in r.text for r in INIT_RECIPES.values())
    assert all(r.keeps for r in INIT_RECIPES.values())  # each says what it keeps when the width changes


def test_arms_sharing_a_seed_share_their_init_and_differ_only_where_the_scheme_does():
    """Runs paired by seed (the study's paired tests rest on it): Pre-LN and Post-LN built with one seed have the
    same embeddings and block projections; only the norms' placement differs."""
    pre, post = build("xiong", scheme="pre"), build("xiong", scheme="post")
    assert torch.equal(pre.wte.weight, post.wte.weight)
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(pre.projections(), post.projections()))
    other_seed = build("xiong", seed=1, scheme="pre")
    assert not torch.equal(pre.wte.weight, other_seed.wte.weight)
