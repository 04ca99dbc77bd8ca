"""Normalization placement schemes: DeepNorm constants, slot structure, init gains, validation.

Every expected number here is typed out from the papers' formulas (and, as a
second line of defence, as a hard-coded literal), never read back from the
library, so a typo in the library's formula cannot pass by being copied.
"""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import normlab
from normlab.nn import NORMS, SCHEMES, ModelConfig, Residual, build_scheme, deepnorm_constants
from normlab.nn.norms import Norm
from tests.nn.test_norms import NAMES

ALL_SCHEMES = ["post", "pre", "sandwich", "peri", "deepnorm", "mix", "lns", "subln", "admin", "residual", "reordered",
               "parallel", "hybrid", "keel", "ngpt", "hc", "mhc", "attnres", "spannorm"]
ALL_NORMS = NAMES  # tests/nn/test_norms.py's list: a new normalizer joins it there
NORM_CLASS = {name: NORMS.get(name) for name in ALL_NORMS}


def tiny(**overrides) -> dict:
    cfg = dict(vocab_size=13, block_size=8, n_layer=2, n_head=2, d_model=16)
    cfg.update(overrides)
    return cfg


def kind(module: nn.Module) -> str:
    """'norm' for a normalizer, 'id' for an identity; anything else is a failure."""
    if isinstance(module, Norm):
        return "norm"
    if isinstance(module, nn.Identity):
        return "id"
    raise AssertionError(f"unexpected module in a norm slot: {module!r}")


def residuals(model):
    for block in model.blocks:
        yield block.layer, "attn", block.attn
        yield block.layer, "mlp", block.mlp


def test_registries_hold_exactly_the_documented_names():
    assert SCHEMES.names() == ALL_SCHEMES
    assert NORMS.names() == ALL_NORMS


# ---------------------------------------------------------------------------
# 1. DeepNorm constants (DeepNet, Wang et al. 2022, arXiv 2203.00555, Fig. 2)
# ---------------------------------------------------------------------------

# (architecture, N, M, part, α expected (formula), β expected (formula), α literal, β literal)
DEEPNORM_CASES = [
    # decoder-only (M layers): α = (2M)^¼, β = (8M)^-¼
    ("decoder-only", 0, 6, "decoder", (2 * 6) ** 0.25, (8 * 6) ** -0.25, 1.8612, 0.3799),
    ("decoder-only", 0, 1, "decoder", (2 * 1) ** 0.25, (8 * 1) ** -0.25, 1.1892, 0.5946),
    ("decoder-only", 0, 24, "decoder", (2 * 24) ** 0.25, (8 * 24) ** -0.25, 2.6321, 0.2686),
    # encoder-only (N layers): α = (2N)^¼, β = (8N)^-¼
    ("encoder-only", 6, 0, "encoder", (2 * 6) ** 0.25, (8 * 6) ** -0.25, 1.8612, 0.3799),
    ("encoder-only", 12, 0, "encoder", (2 * 12) ** 0.25, (8 * 12) ** -0.25, 2.2134, 0.3195),
    # encoder-decoder, encoder part: α = 0.81 (N⁴M)^(1/16), β = 0.87 (N⁴M)^(-1/16)
    ("encoder-decoder", 6, 6, "encoder", 0.81 * (6**4 * 6) ** (1 / 16), 0.87 * (6**4 * 6) ** (-1 / 16), 1.4179, 0.4970),
    ("encoder-decoder", 12, 6, "encoder", 0.81 * (12**4 * 6) ** (1 / 16), 0.87 * (12**4 * 6) ** (-1 / 16), 1.6862, 0.4179),
    ("encoder-decoder", 6, 12, "encoder", 0.81 * (6**4 * 12) ** (1 / 16), 0.87 * (6**4 * 12) ** (-1 / 16), 1.4807, 0.4759),
    # encoder-decoder, decoder part: α = (3M)^¼, β = (12M)^-¼
    ("encoder-decoder", 6, 6, "decoder", (3 * 6) ** 0.25, (12 * 6) ** -0.25, 2.0598, 0.3433),
    ("encoder-decoder", 12, 6, "decoder", (3 * 6) ** 0.25, (12 * 6) ** -0.25, 2.0598, 0.3433),
    ("encoder-decoder", 6, 12, "decoder", (3 * 12) ** 0.25, (12 * 12) ** -0.25, 2.4495, 0.2887),
]


@pytest.mark.parametrize("arch,N,M,part,alpha,beta,alpha_lit,beta_lit", DEEPNORM_CASES)
def test_deepnorm_constants_match_paper(arch, N, M, part, alpha, beta, alpha_lit, beta_lit):
    # the hand-typed formula and the literal agree (guards the expectations themselves)
    assert alpha == pytest.approx(alpha_lit, abs=1e-4)
    assert beta == pytest.approx(beta_lit, abs=1e-4)
    got = deepnorm_constants(arch, n_encoder=N, n_decoder=M)
    assert got[part]["alpha"] == pytest.approx(alpha, rel=1e-12)
    assert got[part]["beta"] == pytest.approx(beta, rel=1e-12)
    assert round(got[part]["alpha"], 4) == pytest.approx(alpha_lit, abs=1e-4)
    assert round(got[part]["beta"], 4) == pytest.approx(beta_lit, abs=1e-4)


@pytest.mark.parametrize("arch,N,M,parts", [
    ("encoder-only", 3, 0, {"encoder"}),
    ("decoder-only", 0, 3, {"decoder"}),
    ("encoder-decoder", 3, 3, {"encoder", "decoder"}),
])
def test_deepnorm_constants_return_only_the_parts_the_architecture_has(arch, N, M, parts):
    got = deepnorm_constants(arch, n_encoder=N, n_decoder=M)
    assert set(got) == parts
    for part in parts:
        assert set(got[part]) == {"alpha", "beta"}


@pytest.mark.parametrize("arch,N,M", [
    ("decoder-only", 0, 0),
    ("decoder-only", 5, 0),      # encoder depth does not count for a decoder-only model
    ("encoder-only", 0, 0),
    ("encoder-only", 0, 5),
    ("encoder-decoder", 0, 6),
    ("encoder-decoder", 6, 0),
    ("encoder-decoder", -1, 6),
])
def test_deepnorm_constants_refuse_zero_depth(arch, N, M):
    with pytest.raises(ValueError):
        deepnorm_constants(arch, n_encoder=N, n_decoder=M)


@pytest.mark.parametrize("arch", ["decoder", "encoder_decoder", "", "Decoder-Only"])
def test_deepnorm_constants_refuse_unknown_architecture(arch):
    with pytest.raises(ValueError, match="architecture"):
        deepnorm_constants(arch, n_encoder=6, n_decoder=6)


# ---------------------------------------------------------------------------
# 2. A built DeepNorm / Sub-LN model uses its constants
# ---------------------------------------------------------------------------

def _std(w: torch.Tensor) -> float:
    return w.detach().float().std().item()


def _xavier_std(w: torch.Tensor, gain: float = 1.0) -> float:
    fan_out, fan_in = w.shape
    return gain * math.sqrt(2.0 / (fan_in + fan_out))


def _check_projection_stds(model, d: int, qk_gain: float, rest_gain: float, mlp: str):
    for block in model.blocks:
        attn, ffn = block.attn.sublayer, block.mlp.sublayer
        q, k, v = attn.qkv.weight[:d], attn.qkv.weight[d:2 * d], attn.qkv.weight[2 * d:]
        for name, w, gain in [("q", q, qk_gain), ("k", k, qk_gain), ("v", v, rest_gain),
                              ("out", attn.proj.weight, rest_gain), ("ffn_out", ffn.proj.weight, rest_gain)]:
            assert w.shape[0] == d and _std(w) == pytest.approx(_xavier_std(w, gain), rel=0.05), name
        d_ff = ffn.proj.weight.shape[1]
        halves = ffn.fc.weight.split(d_ff, dim=0)
        assert len(halves) == (2 if mlp == "swiglu" else 1)
        for w in halves:  # SwiGLU's gate and up projections are two (d_ff, d) matrices
            assert w.shape == (d_ff, d)
            assert _std(w) == pytest.approx(_xavier_std(w, rest_gain), rel=0.05), "ffn_in"
        for w in [attn.qkv.weight, attn.proj.weight, ffn.fc.weight, ffn.proj.weight]:
            assert abs(w.mean().item()) < 0.1 * _std(w)


@pytest.mark.parametrize("mlp", ["gelu", "swiglu"])
def test_deepnorm_model_uses_alpha_and_beta(mlp):
    torch.manual_seed(0)
    L, d = 2, 256
    model = normlab.build_model(dict(vocab_size=17, block_size=8, n_layer=L, n_head=4, d_model=d,
                                     scheme="deepnorm", mlp=mlp))
    alpha, beta = (2 * L) ** 0.25, (8 * L) ** -0.25
    assert alpha == pytest.approx(1.41421, abs=1e-5) and beta == pytest.approx(0.5, abs=1e-12)
    seen = 0
    for _, _, res in residuals(model):
        assert isinstance(res, Residual)
        assert res.alpha == pytest.approx(alpha, rel=1e-12)
        assert res.in_scale == 1.0
        assert isinstance(res.post_norm, NORM_CLASS["layernorm"])
        assert kind(res.in_norm) == "id" and kind(res.out_norm) == "id"
        seen += 1
    assert seen == 2 * L
    _check_projection_stds(model, d, qk_gain=1.0, rest_gain=beta, mlp=mlp)
    override = model.init_record["scheme_override"]
    assert override["init"] == "xavier_normal"
    assert override["gain_q_k"] == 1.0
    assert override["gain_v_out_ffn"] == pytest.approx(beta, rel=1e-12)
    desc = model.scheme.record()
    assert desc["alpha"] == pytest.approx(alpha) and desc["beta"] == pytest.approx(beta)


@pytest.mark.parametrize("L,alpha_lit", [(1, 1.1892), (4, 1.6818), (6, 1.8612)])
def test_deepnorm_alpha_follows_depth(L, alpha_lit):
    model = normlab.build_model(tiny(scheme="deepnorm", n_layer=L))
    for _, _, res in residuals(model):
        assert res.alpha == pytest.approx((2 * L) ** 0.25, rel=1e-12)
        assert res.alpha == pytest.approx(alpha_lit, abs=1e-4)


def test_subln_model_uses_gamma():
    torch.manual_seed(0)
    L, d = 2, 256
    model = normlab.build_model(dict(vocab_size=17, block_size=8, n_layer=L, n_head=4, d_model=d, scheme="subln"))
    gamma = math.sqrt(math.log(2 * L))
    assert gamma == pytest.approx(1.1774, abs=1e-4)
    _check_projection_stds(model, d, qk_gain=1.0, rest_gain=gamma, mlp="gelu")
    override = model.init_record["scheme_override"]
    assert override["gain_q_k"] == 1.0
    assert override["gain_v_out_ffn"] == pytest.approx(gamma, rel=1e-12)


@pytest.mark.parametrize("scheme", [s for s in ALL_SCHEMES if s not in ("deepnorm", "subln")])
def test_other_schemes_keep_the_base_init(scheme):
    model = normlab.build_model(tiny(scheme=scheme))
    assert "scheme_override" not in model.init_record
    assert model.scheme.init_gains() is None


# ---------------------------------------------------------------------------
# 3. Slot structure of every Residual
# ---------------------------------------------------------------------------

def _layout(model):
    """{(layer, which): (in, out, post, alpha, in_scale)} plus embed/final kinds."""
    slots = {(layer, which): (kind(r.in_norm), kind(r.out_norm), kind(r.post_norm), r.alpha, r.in_scale)
             for layer, which, r in residuals(model)}
    return slots, kind(model.embed_norm), kind(model.final_norm)


POST = ("id", "id", "norm", 1.0, 1.0)
PRE = ("norm", "id", "id", 1.0, 1.0)
SANDWICH = ("norm", "norm", "id", 1.0, 1.0)
PLAIN = ("id", "id", "id", 1.0, 1.0)


@pytest.mark.parametrize("scheme,options,per_layer,embed,final", [
    ("post", {}, [POST] * 4, "id", "id"),
    ("pre", {}, [PRE] * 4, "id", "norm"),
    ("sandwich", {}, [SANDWICH] * 4, "id", "norm"),
    ("peri", {}, [SANDWICH] * 4, "norm", "norm"),
    ("deepnorm", {}, [("id", "id", "norm", 8 ** 0.25, 1.0)] * 4, "id", "id"),
    ("mix", {"mix_ratio": 0.5}, [POST, POST, PRE, PRE], "id", "norm"),
    ("mix", {}, [POST, PRE, PRE, PRE], "id", "norm"),             # default ρ = 0.25: ⌊0.25·4⌋ = 1
    ("mix", {"mix_ratio": 0.0}, [PRE] * 4, "id", "norm"),
    ("mix", {"mix_ratio": 1.0}, [POST] * 4, "id", "norm"),
    ("mix", {"mix_ratio": 0.74}, [POST, POST, PRE, PRE], "id", "norm"),  # ⌊2.96⌋ = 2 (floor, not round)
    ("lns", {}, [("norm", "id", "id", 1.0, 1 / math.sqrt(ell)) for ell in (1, 2, 3, 4)], "id", "norm"),
    ("subln", {}, [PRE] * 4, "id", "norm"),
    ("reordered", {}, [("id", "norm", "id", 1.0, 1.0)] * 4, "id", "norm"),
    ("parallel", {}, [(PRE, PLAIN)] * 4, "id", "norm"),  # the MLP branch reads the attention branch's norm
    ("parallel", {"shared_norm": False}, [PRE] * 4, "id", "norm"),
    ("hybrid", {}, [(POST, PLAIN)] * 4, "id", "norm"),  # Norm(x + Attn(x)), then x + FFN(x)
    ("hybrid", {"first_pre": True}, [PRE] + [(POST, PLAIN)] * 3, "id", "norm"),
    ("keel", {}, [PRE] + [("norm", "id", "norm", 8.0, 1.0)] * 3, "id", "id"),  # α = L = 2 × 4; block 0 plain (§3.1)
    ("keel", {"plain_first_layer": False}, [("norm", "id", "norm", 8.0, 1.0)] * 4, "id", "id"),
])
@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
def test_slot_structure(scheme, options, per_layer, embed, final, norm):
    model = normlab.build_model(tiny(scheme=scheme, scheme_options=options, n_layer=4, norm=norm))
    slots, embed_kind, final_kind = _layout(model)
    for layer in range(4):
        for which in ("attn", "mlp"):
            got = slots[(layer, which)]
            want = per_layer[layer]
            if isinstance(want[0], tuple):  # (attention's slots, the MLP's slots)
                want = want[("attn", "mlp").index(which)]
            assert got[:3] == want[:3], (layer, which)
            assert got[3] == pytest.approx(want[3], rel=1e-12), (layer, which, "alpha")
            assert got[4] == pytest.approx(want[4], rel=1e-12), (layer, which, "in_scale")
    assert embed_kind == embed
    assert final_kind == final
    # every norm is the configured normalizer, and none is shared between slots
    norms = [m for m in model.modules() if isinstance(m, Norm)]
    assert norms and all(isinstance(m, NORM_CLASS[norm]) for m in norms)
    assert len({id(m) for m in norms}) == len(norms)
    # inner norms exist only in Sub-LN
    for block in model.blocks:
        want_inner = "norm" if scheme == "subln" else "id"
        assert kind(block.attn.sublayer.inner_norm) == want_inner
        assert kind(block.mlp.sublayer.inner_norm) == want_inner


def test_lns_scale_literals():
    model = normlab.build_model(tiny(scheme="lns", n_layer=4))
    lits = [1.0, 0.7071, 0.5774, 0.5]
    for block, lit in zip(model.blocks, lits):
        assert block.attn.in_scale == pytest.approx(lit, abs=1e-4)
        assert block.mlp.in_scale == pytest.approx(lit, abs=1e-4)


@pytest.mark.parametrize("mlp", ["gelu", "swiglu"])
def test_subln_inner_norm_widths(mlp):
    model = normlab.build_model(tiny(scheme="subln", mlp=mlp, d_model=24, n_head=2))
    d_ff = model.cfg.resolved_d_ff()
    for block in model.blocks:
        assert block.attn.sublayer.inner_norm.d == 24
        assert block.mlp.sublayer.inner_norm.d == d_ff


def test_mix_describe_counts_post_layers():
    assert build_scheme("mix", 8).record()["n_post_layers"] == 2
    assert build_scheme("mix", 8, {"mix_ratio": 0.5}).record()["n_post_layers"] == 4
    assert build_scheme("mix", 3, {"mix_ratio": 0.5}).record()["n_post_layers"] == 1


class _Scale(nn.Module):
    def __init__(self, c: float):
        super().__init__()
        self.c = c

    def forward(self, x):
        return self.c * x


def test_residual_formula():
    """x ← PostNorm(α·x + OutNorm(F(s·InNorm(x)))) with distinguishable stand-ins."""
    torch.manual_seed(0)
    F_ = nn.Linear(5, 5)
    x = torch.randn(2, 3, 5)
    res = Residual(F_, in_norm=_Scale(2.0), out_norm=_Scale(3.0), post_norm=_Scale(5.0), alpha=7.0, in_scale=0.5)
    want = 5.0 * (7.0 * x + 3.0 * F_(0.5 * (2.0 * x)))
    torch.testing.assert_close(res(x), want)
    plain = Residual(F_)
    torch.testing.assert_close(plain(x), x + F_(x))
    assert all(isinstance(m, nn.Identity) for m in (plain.in_norm, plain.out_norm, plain.post_norm))


def test_reordered_block_is_olmo2s_formula():
    """OLMo 2 (arXiv 2501.00656): h = x + RMSNorm(Attn(x)); out = h + RMSNorm(MLP(h)), transcribed by hand."""
    torch.manual_seed(0)
    model = normlab.build_model(tiny(scheme="reordered", norm="rmsnorm", n_layer=1)).eval()
    block = model.blocks[0]
    with torch.no_grad():
        for p in block.parameters():  # norm gains away from 1, so a norm in the wrong slot shows
            p.add_(0.1 * torch.randn_like(p))
        x = torch.randn(2, 5, model.cfg.d_model)

        def rms(t, w):
            return w * t / torch.sqrt(t.pow(2).mean(-1, keepdim=True) + model.cfg.norm_eps)

        h = x + rms(block.attn.sublayer(x), block.attn.out_norm.weight)
        want = h + rms(block.mlp.sublayer(h), block.mlp.out_norm.weight)
        torch.testing.assert_close(block(x), want, rtol=1e-5, atol=1e-6)


def _rms(t, w, eps=1e-5):
    return w * t / torch.sqrt(t.pow(2).mean(-1, keepdim=True) + eps)


def _perturbed_block(scheme, options=None, n_layer=1, layer=0, **cfg):
    """Block `layer` of a tiny RMSNorm model with every parameter moved off its init (norm gains away from 1, so a
    norm in the wrong slot shows), and an input x."""
    torch.manual_seed(0)
    model = normlab.build_model(tiny(scheme=scheme, scheme_options=options or {}, norm="rmsnorm", n_layer=n_layer,
                                     **cfg)).eval()
    block = model.blocks[layer]
    with torch.no_grad():
        for p in block.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return block, torch.randn(2, 5, model.cfg.d_model)


@pytest.mark.parametrize("shared", [True, False])
def test_parallel_block_is_gptj_and_neox_formula(shared):
    """GPT-J / PaLM (one norm): x + Attn(LN(x)) + MLP(LN(x)); GPT-NeoX use_parallel_residual (two):
    x + Attn(LN₁(x)) + MLP(LN₂(x)), transcribed by hand."""
    block, x = _perturbed_block("parallel", {"shared_norm": shared})
    with torch.no_grad():
        w_attn = block.attn.in_norm.weight
        w_mlp = w_attn if shared else block.mlp.in_norm.weight
        want = x + block.attn.sublayer(_rms(x, w_attn)) + block.mlp.sublayer(_rms(x, w_mlp))
        torch.testing.assert_close(block(x), want, rtol=1e-5, atol=1e-6)
    norms = [m for m in block.modules() if isinstance(m, Norm)]
    assert len(norms) == (1 if shared else 2)  # shared: one module, one set of parameters, one state-dict name


def _qkv_norm_attention(attn, x):
    """HybridNorm's attention (its code: OLMo's attention with q_norm, k_norm, v_norm per head), written out:
    softmax(Norm(Q)Norm(K)ᵀ/√d_h + causal mask) Norm(V), heads joined, output projection."""
    B, T, C = x.shape
    nh, hs = attn.n_head, C // attn.n_head
    q, k, v = (t.reshape(B, T, nh, hs) for t in attn.qkv(x).split(C, dim=2))
    q, k, v = (_rms(t, n.weight).transpose(1, 2) for t, n in ((q, attn.q_norm), (k, attn.k_norm), (v, attn.v_norm)))
    scores = q @ k.transpose(-2, -1) / math.sqrt(hs)  # (B, nh, T, T)
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
    return attn.proj(y)


def test_hybrid_block_is_hybridnorms_formula():
    """HybridNorm (arXiv 2503.04598, as its code computes it): Y = X + Attn_QKV(X); X' = Norm(Y) + FFN(Norm(Y))."""
    block, x = _perturbed_block("hybrid", n_layer=2, layer=1)
    with torch.no_grad():
        y = x + _qkv_norm_attention(block.attn.sublayer, x)
        z = _rms(y, block.attn.post_norm.weight)
        torch.testing.assert_close(block(x), z + block.mlp.sublayer(z), rtol=1e-5, atol=1e-6)
    assert [block.attn.sublayer.v_norm.d, block.attn.sublayer.q_norm.d] == [8, 8]  # per head: d_model / n_head


def test_hybrid_star_first_block_is_pre_norm_with_qkv_norm():
    """HybridNorm* (the official code's layer-0 override attn_norm = True, ffn_residual = False): block 0 is
    Pre-Norm around both sub-layers, QKV-norm kept; the blocks after it are HybridNorm's."""
    block, x = _perturbed_block("hybrid", {"first_pre": True}, n_layer=2)
    with torch.no_grad():
        h = x + _qkv_norm_attention(block.attn.sublayer, _rms(x, block.attn.in_norm.weight))
        want = h + block.mlp.sublayer(_rms(h, block.mlp.in_norm.weight))
        torch.testing.assert_close(block(x), want, rtol=1e-5, atol=1e-6)
    later, x = _perturbed_block("hybrid", {"first_pre": True}, n_layer=2, layer=1)
    assert kind(later.attn.post_norm) == "norm" and kind(later.attn.in_norm) == kind(later.mlp.in_norm) == "id"


def test_hybrid_refuses_a_second_qk_norm_when_the_config_is_validated():
    """Old: the config passed and only building the model failed."""
    with pytest.raises(ValueError, match="needs qk_norm = 'none'.*normalizes q, k and v per head itself"):
        ModelConfig(**tiny(scheme="hybrid", qk_norm="full_width"))
    fitted, why = SCHEMES.get("hybrid").fit({"norm": "layernorm", "qk_norm": "per_head"}, axes=("qk_norm",))
    assert fitted is None and "qk_norm" in why


def test_each_stack_is_validated_at_its_own_depth(monkeypatch):
    """Old: the validator built both stacks' schemes with n_layer, the model the decoder's with n_dec_layer."""
    from normlab.nn import config as nn_config

    built = []
    real = nn_config.build_scheme
    monkeypatch.setattr(nn_config, "build_scheme", lambda name, n, *a: built.append(n) or real(name, n, *a))
    ModelConfig(**tiny(scheme="deepnorm", arch="encoder-decoder", n_layer=2, n_dec_layer=5))
    assert built == [2, 5]


@pytest.mark.parametrize("n_layer, alpha_lit", [(2, 4.0), (3, 6.0)])
def test_keel_block_is_keels_formula(n_layer, alpha_lit):
    """Keel (arXiv 2601.19895): x ← Norm(α·x + F(Norm′(x))) around each sub-layer of every block after the first,
    α = L = 2·n_layer sub-layers."""
    block, x = _perturbed_block("keel", n_layer=n_layer, layer=n_layer - 1)
    alpha = 2 * n_layer
    assert alpha == alpha_lit and block.attn.alpha == block.mlp.alpha == alpha_lit
    with torch.no_grad():
        h = _rms(alpha * x + block.attn.sublayer(_rms(x, block.attn.in_norm.weight)), block.attn.post_norm.weight)
        want = _rms(alpha * h + block.mlp.sublayer(_rms(h, block.mlp.in_norm.weight)), block.mlp.post_norm.weight)
        torch.testing.assert_close(block(x), want, rtol=1e-5, atol=1e-6)
    assert build_scheme("keel", 4, {"alpha": 3.0}).record()["alpha"] == 3.0


def test_keel_model_is_a_direct_transcription_of_the_paper():
    """Keel's whole stack written out from the paper (§3.1), reading the model's parameters and nothing of its
    code: the first layer x ← x + F(LN(x)) around both sub-layers (no post-norm, no α), every later sub-layer
    x ← LN(α·x + F(LN(x))) with α = L = 2·n_layer, no final norm, the head on the last block's output."""
    torch.manual_seed(0)
    n_layer = 3
    model = normlab.build_model(tiny(scheme="keel", norm="rmsnorm", n_layer=n_layer)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
        idx = torch.randint(0, 13, (2, 6))
        x = model.wte.weight[idx] + model.wpe.weight[:6]  # (B, T, C)
        alpha = 2.0 * n_layer
        for i, block in enumerate(model.blocks):
            for r in (block.attn, block.mlp):
                branch = r.sublayer(_rms(x, r.in_norm.weight))
                x = x + branch if i == 0 else _rms(alpha * x + branch, r.post_norm.weight)
        logits, _ = model(idx)
        torch.testing.assert_close(logits, x @ model.wte.weight.T, rtol=1e-5, atol=1e-5)


def test_keel_everywhere_differs_from_the_papers_first_layer():
    """The option that turns the first-layer case off builds another model (the transcription above could not
    pass for both)."""
    first = normlab.build_model(tiny(scheme="keel", n_layer=2)).blocks[0]
    every = normlab.build_model(tiny(scheme="keel", n_layer=2, scheme_options={"plain_first_layer": False})).blocks[0]
    assert (first.attn.alpha, kind(first.attn.post_norm)) == (1.0, "id")
    assert (every.attn.alpha, kind(every.attn.post_norm)) == (4.0, "norm")


def test_keels_alpha_is_l_unless_set():
    """α = L, the sub-layers the stream passes (2·n_layer), written as the option's default; a number sets it."""
    assert build_scheme("keel", 4).alpha == 8.0 and build_scheme("keel", 4, {"alpha": 3.0}).alpha == 3.0
    assert SCHEMES.get("keel").OPTIONS["alpha"] == "L"
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match=rf"'alpha' .* must be > 0, got {bad}; leave it unset for α = L"):
            build_scheme("keel", 4, {"alpha": bad})


# (scheme, switch, its default, the run ids of configs that set it to 0 and to 1, hashed before it was a bool)
SWITCHES = [("parallel", "shared_norm", True, "f87a7c753a4c", "c2b8dfd0478e"),
            ("hybrid", "first_pre", False, "7692f8a43ec0", "59e57fa5018f"),
            ("keel", "plain_first_layer", True, "7bb7165a930e", "d83e4cd4fa70")]


@pytest.mark.parametrize("scheme, option, default, off_id, on_id", SWITCHES)
def test_switch_options_are_bools_and_take_one_or_zero_as_configs_store_them(scheme, option, default, off_id, on_id):
    assert SCHEMES.get(scheme).OPTIONS[option] is default and build_scheme(scheme, 4).options[option] is default
    for given, read in ((True, True), (False, False), (1.0, True), (0.0, False)):
        assert build_scheme(scheme, 4, {option: given}).options[option] is read
    with pytest.raises(ValueError, match=rf"scheme '{scheme}' option '{option}' is a switch: true or false "
                                         r"\(1 or 0\), got 0.5"):
        build_scheme(scheme, 4, {option: 0.5})


@pytest.mark.parametrize("scheme, option, default, off_id, on_id", SWITCHES)
def test_a_switch_in_a_config_keeps_its_run_id_and_a_bad_one_says_what_is_valid(scheme, option, default, off_id,
                                                                                 on_id):
    """`model.scheme_options` stores numbers, as the run ids of configs that set a switch were hashed: true and 1
    are one config, and a value that is neither gets one line naming it and the valid ones."""
    from normlab.config import ConfigError, load_config

    def config(value):
        return load_config(None, [f"model.scheme={scheme}", f"model.scheme_options.{option}={value}"])

    assert config("true").hash() == config("1").hash() == config("1.0").hash() == on_id
    assert config("false").hash() == config("0").hash() == off_id
    assert config("false").model.scheme_options == {option: 0.0}
    with pytest.raises(ConfigError, match=rf"option '{option}' is a switch: true or false \(1 or 0\), got 2.0"):
        config("2")


def test_the_role_not_the_call_order_says_which_sublayer_a_residual_wraps():
    """The block names each sub-layer: a scheme that treats attention and the MLP apart builds the same
    residuals when asked for the MLP first."""
    def norm():
        return NORMS.get("layernorm")(4)

    hybrid = build_scheme("hybrid", 2)
    mlp, attn = (hybrid.residual(nn.Identity(), 1, norm, role) for role in ("mlp", "attention"))
    assert (kind(mlp.post_norm), kind(attn.post_norm)) == ("id", "norm")
    residual = build_scheme("residual", 2)
    mlp, attn = (residual.residual(nn.Identity(), 0, norm, role) for role in ("mlp", "attention"))
    assert (mlp.first, attn.first) == (False, True)  # x_d starts at the stack's first sub-layer, attention


# ---------------------------------------------------------------------------
# 4. final_norm
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("scheme", ALL_SCHEMES)
def test_final_norm_default_and_override(scheme):
    """The default is the scheme's own (`Scheme.final_norm`, read from the registry); either can be set."""
    default = normlab.build_model(tiny(scheme=scheme))
    own = SCHEMES.get(scheme).final_norm
    assert ModelConfig(**tiny(scheme=scheme)).resolved_final_norm() is own
    if scheme == "residual":  # its final module merges the two streams: y = x_a + Norm(x_d); it cannot go
        assert isinstance(default.final_norm.norm, Norm)
        with pytest.raises(ValueError, match="needs its final module"):
            ModelConfig(**tiny(scheme=scheme, final_norm=False))
        return
    assert kind(default.final_norm) == ("norm" if own else "id")
    off = normlab.build_model(tiny(scheme=scheme, final_norm=False))
    assert type(off.final_norm) is nn.Identity
    on = normlab.build_model(tiny(scheme=scheme, final_norm=True))
    assert isinstance(on.final_norm, Norm)


def test_final_norm_false_on_pre_removes_its_parameters():
    on = normlab.build_model(tiny(scheme="pre"))
    off = normlab.build_model(tiny(scheme="pre", final_norm=False))
    assert any(k.startswith("final_norm.") for k in on.state_dict())
    assert not any(k.startswith("final_norm.") for k in off.state_dict())


# ---------------------------------------------------------------------------
# 5. Every scheme × normalizer; validation
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("norm", ALL_NORMS)
@pytest.mark.parametrize("scheme", ALL_SCHEMES)
def test_every_combination_builds_and_trains_or_is_refused(scheme, norm):
    """Each scheme with what its paper fixes (`Scheme.fit`), a pair it refuses refused: tests/test_every_scheme.py
    runs this for a toy scheme registered there, so it reads the registry."""
    cfg = tiny(scheme=scheme, norm=norm)
    if SCHEMES.get(scheme).fit({"norm": norm}, axes=("norm",))[0] is None:
        with pytest.raises(ValueError) as info:
            normlab.build_model(cfg)
        assert repr(scheme) in str(info.value) and repr(norm) in str(info.value)
        with pytest.raises(ValueError):
            ModelConfig(**cfg)
        return
    torch.manual_seed(0)
    model = normlab.build_model(cfg)
    idx = torch.randint(0, 13, (2, 8))
    targets = torch.randint(0, 13, (2, 8))
    logits, loss = model(idx, targets)
    assert logits.shape == (2, 8, 13)
    assert torch.isfinite(logits).all()
    assert loss.ndim == 0 and torch.isfinite(loss)
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name
    # some gradient actually flows into the blocks
    assert any(p.grad.abs().sum() > 0 for n, p in model.named_parameters() if n.startswith("blocks."))


@pytest.mark.parametrize("field,bad,valid", [("scheme", "prenorm", ALL_SCHEMES), ("norm", "batchnorm", ALL_NORMS)])
def test_unknown_names_list_the_valid_ones(field, bad, valid):
    with pytest.raises(ValueError) as info:
        normlab.build_model(tiny(**{field: bad}))
    msg = str(info.value)
    assert repr(bad) in msg
    for name in valid:
        assert name in msg


def test_unknown_scheme_name_in_build_scheme():
    with pytest.raises(ValueError, match="Valid: post, pre, sandwich, peri, deepnorm, mix, lns, subln"):
        build_scheme("periln", 4)


@pytest.mark.parametrize("scheme,options,bad", [
    ("mix", {"ratio": 0.5}, "ratio"),
    ("mix", {"mix_ratio": 0.5, "extra": 1.0}, "extra"),
    ("pre", {"mix_ratio": 0.5}, "mix_ratio"),
    ("deepnorm", {"alpha": 2.0}, "alpha"),
    ("parallel", {"shared": 1.0}, "shared"),
    ("hybrid", {"shared_norm": 1.0}, "shared_norm"),
])
def test_unknown_scheme_option_raises(scheme, options, bad):
    with pytest.raises(ValueError) as info:
        normlab.build_model(tiny(scheme=scheme, scheme_options=options))
    assert repr(bad) in str(info.value) and repr(scheme) in str(info.value)
    with pytest.raises(ValueError):
        build_scheme(scheme, 4, options)


@pytest.mark.parametrize("ratio", [-0.01, 1.01, 2.0, -1.0])
def test_mix_ratio_outside_unit_interval_raises(ratio):
    with pytest.raises(ValueError, match="mix_ratio"):
        normlab.build_model(tiny(scheme="mix", scheme_options={"mix_ratio": ratio}))
    with pytest.raises(ValueError, match="mix_ratio"):
        build_scheme("mix", 4, {"mix_ratio": ratio})


def test_every_scheme_carries_its_display_facts_and_the_report_reads_them_from_it():
    """A scheme's label, colour and place in lists live on its class: the report derives
    its own from the registry, so a new scheme needs no edit elsewhere (the report once lacked `residual`)."""
    from normlab.report import plots
    from normlab.study import sections as general

    schemes = dict(SCHEMES.items())
    assert all(s.label and s.facts.color.startswith("#") for s in schemes.values())
    assert len({s.facts.color for s in schemes.values()}) == len(schemes)  # one colour each, no two alike
    assert plots.SCHEME_COLORS == {n: s.facts.color for n, s in schemes.items()}
    assert plots.SCHEME_COLORS["post"] == "#d62728"
    assert general.SCHEME_ORDER == list(schemes) and general.SCHEME_ORDER[:2] == ["post", "pre"]
    assert schemes["residual"].label == "ResiDual" and schemes["peri"].label == "Peri-LN"
