"""The residual stream of 2026 (nn/residual.py and its schemes hc, mhc, attnres, spannorm): each formula pinned
against its paper's expression, the init each paper states, the weight-decay groups, and a 4-layer decoder of
each that learns."""
import math

import pytest
import torch
from torch import nn

import normlab
from normlab.config import TrainConfig
from normlab.diagnostics.streams import composite_gains, stochastic_distance
from normlab.nn.residual import DepthAttention, collapsed, sinkhorn, slots
from normlab.nn.schemes import build_scheme
from normlab.train.optim import build_optimizer

NEW = ["hc", "mhc", "attnres", "spannorm"]


def tiny(**overrides) -> dict:
    cfg = dict(vocab_size=23, block_size=16, n_layer=4, n_head=4, d_model=32)
    cfg.update(overrides)
    return cfg


def logits(model, idx):
    with torch.no_grad():
        return model.eval()(idx)[0]


def test_static_hyper_connections_start_as_pre_ln():
    """HC §2.3, Eq. 14: H_pre = e_{k mod n}, H_post = 1, H_res = I make every stream the Pre-LN stream, so the
    streams' sum is n times it, which the final norm reads as Pre-LN's (up to its ε: set negligible here)."""
    idx = torch.randint(0, 23, (2, 16), generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    pre = normlab.build_model(tiny(scheme="pre", norm_eps=1e-12))
    torch.manual_seed(0)
    hc = normlab.build_model(tiny(scheme="hc", norm_eps=1e-12))
    missing, unexpected = hc.load_state_dict(pre.state_dict(), strict=False)
    assert not unexpected and all(".mixing." in k for k in missing)
    torch.testing.assert_close(logits(hc, idx), logits(pre, idx), atol=1e-4, rtol=0)
    with torch.no_grad():  # ... and the test can fail: mixing the streams moves the logits
        hc.blocks[1].attn.mixing.res.copy_(torch.full((4, 4), 0.5))
    assert (logits(hc, idx) - logits(pre, idx)).abs().max() > 1e-3


def test_dynamic_hyper_connections_start_as_their_static_form():
    idx = torch.randint(0, 23, (2, 16), generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    static = normlab.build_model(tiny(scheme="hc"))
    torch.manual_seed(0)
    dynamic = normlab.build_model(tiny(scheme="hc", scheme_options={"dynamic": True}))
    dynamic.load_state_dict(static.state_dict(), strict=False)
    torch.testing.assert_close(logits(dynamic, idx), logits(static, idx), atol=0, rtol=0)  # W = 0 at init


def test_sinkhorn_is_doubly_stochastic_and_the_papers_iteration():
    """mHC §4.2: M⁰ = exp(H̃), Mᵗ = T_r(T_c(Mᵗ⁻¹)); normlab's (DeepSeek-V4's order) reaches the same matrix."""
    logits_ = torch.randn(3, 4, 4, generator=torch.Generator().manual_seed(0)) * 2
    m = sinkhorn(logits_, 20)
    assert (m.sum(-1) - 1).abs().max() < 1e-3 and (m.sum(-2) - 1).abs().max() < 1e-5 and (m > 0).all()
    paper = logits_.exp()
    for _ in range(500):
        paper = paper / paper.sum(-2, keepdim=True)
        paper = paper / paper.sum(-1, keepdim=True)
    torch.testing.assert_close(sinkhorn(logits_, 500), paper, atol=1e-4, rtol=0)
    assert stochastic_distance(paper)["row_sum_error"] < 1e-5
    assert stochastic_distance(torch.eye(4) * 2)["row_sum_error"] == pytest.approx(1.0)


def test_composite_gain_is_the_amax_of_the_product():
    """mHC §3.1: the largest absolute row sum (forward) and column sum (backward) of H_l·…·H_1."""
    upper = torch.tensor([[1.0, 1.0], [0.0, 1.0]])
    gains = composite_gains([upper, upper])  # product [[1, 2], [0, 1]]
    assert gains[0] == {"forward": 2.0, "backward": 2.0} and gains[1] == {"forward": 3.0, "backward": 3.0}
    swap = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    assert composite_gains([swap] * 5)[-1] == {"forward": 1.0, "backward": 1.0}
    scaled = torch.diag(torch.tensor([2.0, 1.0]))
    assert composite_gains([scaled, scaled])[-1]["forward"] == 4.0


def test_mhc_keeps_the_composite_gain_near_one_where_a_free_mixing_grows():
    torch.manual_seed(0)
    mhc = normlab.build_model(tiny(scheme="mhc", n_layer=6))
    torch.manual_seed(0)
    hc = normlab.build_model(tiny(scheme="hc", n_layer=6))
    with torch.no_grad():
        for block in hc.blocks:
            for residual in (block.attn, block.mlp):
                residual.mixing.res.mul_(1.2)  # an unconstrained H_res that amplifies a little
    idx = torch.randint(0, 23, (2, 16))
    gains = {}
    for name, model in (("mhc", mhc), ("hc", hc)):
        model.eval()(idx)
        mixes = [r.mix for b in model.blocks for r in (b.attn, b.mlp)]
        gains[name] = composite_gains(mixes)[-1]["forward"]
    assert gains["mhc"] == pytest.approx(1.0, abs=1e-3)
    assert gains["hc"] == pytest.approx(1.2 ** 12, rel=1e-5)


def test_attention_residuals_start_as_the_mean_of_the_sources():
    """AttnRes §5: a zero pseudo-query weighs every source alike."""
    depth = DepthAttention(8)
    sources = torch.randn(2, 3, 5, 8)
    torch.testing.assert_close(depth(sources), sources.mean(-2))
    with torch.no_grad():
        depth.query.copy_(torch.randn(8))
    keys = sources / sources.pow(2).mean(-1, keepdim=True).add(torch.finfo(torch.float32).eps).sqrt()
    weights = (keys @ depth.query).softmax(-1)  # Eq. 2–4, written out
    torch.testing.assert_close(depth(sources), (weights.unsqueeze(-1) * sources).sum(-2), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("block_layers, sources", [(0, 1 + 2 * 4), (1, 1 + 4), (2, 1 + 2), (3, 1 + 2)])
def test_attention_residuals_keep_one_source_per_block(block_layers, sources):
    """Full AttnRes: the embedding and every sub-layer's output; Block AttnRes: the embedding and one per block of
    S layers (Inkling-2's boundary at every S-th layer's attention)."""
    model = normlab.build_model(tiny(scheme="attnres", scheme_options={"block_layers": block_layers}))
    seen = {}
    model.residual_state.register_forward_hook(lambda m, a, out: seen.setdefault("state", a[0]))
    model(torch.randint(0, 23, (2, 16)))
    assert seen["state"].shape[-2] == sources
    # the sum of the sources is the stream a Pre-LN model would carry: embedding + every output
    assert collapsed(seen["state"]).shape == (2, 16, 32) and slots(seen["state"]) is seen["state"]


def test_spannorm_block_is_its_formula():
    """y = Norm(x + Attn(x)); x' = Norm′(x + FFN(y)); block 0's attention reads Norm₀(x)."""
    scheme = build_scheme("spannorm", 4)
    torch.manual_seed(0)
    attn_f, mlp_f = nn.Linear(8, 8), nn.Linear(8, 8)
    make = lambda: nn.LayerNorm(8)  # noqa: E731
    x = torch.randn(2, 3, 8)
    for layer in (0, 1):
        attn, mlp = scheme.residual(attn_f, layer, make, "attention"), scheme.residual(mlp_f, layer, make, "mlp")
        first = attn.in_norm(x) if layer == 0 else x
        y = attn.post_norm(x + attn_f(first))
        expected = mlp.post_norm(x + mlp_f(y))
        torch.testing.assert_close(scheme.combine(x, attn, None, mlp, None), expected)
        assert isinstance(attn.in_norm, nn.LayerNorm) == (layer == 0)


def test_weight_decay_groups_follow_the_papers():
    """HC §4: the static maps take no weight decay, the dynamic W does; mHC's φ, b, α none (docs/schemes.md)."""
    train = TrainConfig(weight_decay=0.1)
    for scheme, options, decayed, exempt in [("hc", {}, [], ["mixing.pre", "mixing.res", "mixing.post"]),
                                             ("hc", {"dynamic": True}, ["dynamic.w_res", "dynamic.w_pre"],
                                              ["mixing.res", "dynamic.s_alpha"]),
                                             ("mhc", {}, [], ["mixing.phi", "mixing.bias"]),
                                             ("attnres", {}, [], ["depth.query"])]:
        model = normlab.build_model(tiny(scheme=scheme, scheme_options=options))
        groups = build_optimizer(model, train, "cpu").param_groups
        names = {id(p): n for n, p in model.named_parameters()}
        decays = {names[id(p)] for p in groups[0]["params"]}
        keeps = {names[id(p)] for p in groups[1]["params"]}
        for suffix in decayed:
            assert any(n.endswith(suffix) for n in decays), (scheme, suffix)
            assert not any(n.endswith(suffix) for n in keeps), (scheme, suffix)
        for suffix in exempt:
            assert any(n.endswith(suffix) for n in keeps) and not any(n.endswith(suffix) for n in decays)
        assert any(n.endswith("attn.sublayer.qkv.weight") for n in decays)  # the model's matrices as ever


@pytest.mark.parametrize("options", [{"expansion": 2.5}, {"expansion": 0}, {"sinkhorn_iters": 0}])
def test_bad_stream_options_are_refused_by_name(options):
    scheme = "mhc" if "sinkhorn_iters" in options else "hc"
    with pytest.raises(ValueError, match=next(iter(options))):
        normlab.build_model(tiny(scheme=scheme, scheme_options=options))
    with pytest.raises(ValueError, match="block_layers"):
        normlab.build_model(tiny(scheme="attnres", scheme_options={"block_layers": 1.5}))


@pytest.mark.parametrize("scheme, options", [("hc", {}), ("hc", {"dynamic": True}), ("mhc", {}), ("attnres", {}),
                                             ("attnres", {"block_layers": 2}), ("spannorm", {})])
def test_each_trains_a_four_layer_decoder(scheme, options):
    """Its loss falls: 40 AdamW steps on a fixed batch of 4 × 16 tokens from ln 23 toward memorising it."""
    torch.manual_seed(0)
    model = normlab.build_model(tiny(scheme=scheme, scheme_options=options))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    idx, tgt = torch.randint(0, 23, (4, 16), generator=g), torch.randint(0, 23, (4, 16), generator=g)
    losses = []
    for _ in range(40):
        _, loss = model(idx, tgt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[0] == pytest.approx(math.log(23), abs=0.3)
    assert losses[-1] < losses[0] - 0.5 and all(math.isfinite(v) for v in losses)


@pytest.mark.parametrize("scheme", NEW)
def test_activation_checkpointing_gives_the_same_gradients(scheme):
    torch.manual_seed(0)
    model = normlab.build_model(tiny(scheme=scheme))
    idx = torch.randint(0, 23, (2, 16))
    grads = []
    for checkpointed in (False, True):
        model.checkpoint_blocks = checkpointed
        model.zero_grad()
        model(idx, idx)[1].backward()
        grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("scheme", ["mhc", "attnres"])
def test_the_training_probe_records_the_measures_of_the_design(tmp_path, scheme):
    """The study's per-layer store holds each stream's RMS, and mHC's H_res error and composite gain, or AttnRes's
    depth weights (one per source, summing to 1), beside the one-stream metrics read off the streams' sum."""
    from normlab.rundir.diagnostics_store import DiagnosticsStore
    from normlab.train import train
    from tests.conftest import tiny_config

    train(tiny_config(model={"scheme": scheme, "n_layer": 3}, train={"steps": 10}, diagnostics={"interval": 10}),
          tmp_path / "run")
    rows = DiagnosticsStore(tmp_path / "run").rows()
    by_metric: dict[str, list] = {}
    for step, layer, site, metric, head, value in rows:
        by_metric.setdefault(metric, []).append((step, layer, site, head, value))
    assert {"stream_rms", "contribution_ratio", "residual_rms"} <= set(by_metric)
    if scheme == "mhc":
        assert {head for *_, head, _ in by_metric["stream_rms"]} == {0, 1, 2, 3}
        assert all(v == pytest.approx(1.0, abs=1e-3) for *_, v in by_metric["composite_gain"])
        assert all(v < 1e-3 for *_, v in by_metric["h_res_row_sum_error"])
    else:
        sums: dict = {}
        for step, layer, site, head, value in by_metric["depth_weight"]:
            sums[step, layer, site] = sums.get((step, layer, site), 0.0) + value
        assert sums and all(s == pytest.approx(1.0, abs=1e-5) for s in sums.values())


@pytest.mark.parametrize("d_model", [32, 128])
def test_mhc_carries_deepseek_v4s_logit_scale_to_our_width(d_model):
    """φ ~ N(0, 0.02) at DeepSeek-V4's width 4096 gives the logits x̃φ an RMS of 0.02·√(4·4096) = 2.56 (x̃ has
    RMS 1 over its n·C entries); σ = 0.02·√(4096/C) keeps that RMS at width C, which a fixed 0.02 would not."""
    torch.manual_seed(0)
    model = normlab.build_model(tiny(scheme="mhc", d_model=d_model))
    phi = model.blocks[0].attn.mixing.phi
    x = torch.nn.functional.rms_norm(torch.randn(4096, phi.shape[0]), (phi.shape[0],))
    assert (x @ phi).pow(2).mean().sqrt().item() == pytest.approx(0.02 * math.sqrt(4 * 4096), rel=0.05)
    assert 0.02 * math.sqrt(4 * d_model) < 1.5  # the number carried as it is would leave the regime


def test_dynamic_hyper_connections_are_the_papers_equations():
    """HC Eq. 1 and 10–13 written out: Ĥ_k = B_k·T(Σ_j A_m[j]·H_j) + Σ_j A_r[j, k]·H_j, with A_r's row j read
    from stream j (it says where stream j goes). The module keeps H_res = A_rᵀ (out_i = Σ_j H_res[i, j]·x_j)."""
    from normlab.nn.residual import DynamicMixing, HyperResidual

    torch.manual_seed(0)
    n, d = 4, 8
    mixing = DynamicMixing(n, k=1, d=d)
    with torch.no_grad():
        for p in mixing.dynamic.parameters():
            p.normal_()
        mixing.res.add_(0.3 * torch.randn(n, n))
    f, norm = nn.Linear(d, d), nn.LayerNorm(d)
    x = torch.randn(2, 3, n, d)
    got = HyperResidual(f, norm, mixing)(x)

    dyn = mixing.dynamic
    h = dyn.norm(x)  # H̄, each stream on its own
    a_m = mixing.pre + dyn.s_alpha * torch.tanh(h @ dyn.w_pre).squeeze(-1)  # (B, T, n)
    a_r = mixing.res.T + dyn.s_alpha * torch.tanh(h @ dyn.w_res)  # (B, T, n, n), row j from stream j
    b = mixing.post + dyn.s_beta * torch.tanh(h @ dyn.w_post).squeeze(-1)  # (B, T, n)
    h0 = torch.einsum("btj,btjc->btc", a_m, x)
    expected = b.unsqueeze(-1) * f(norm(h0)).unsqueeze(-2) + torch.einsum("btjk,btjc->btkc", a_r, x)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
