"""The GPT: causality, parity with an independent nanoGPT-style reference, tying, init, config rules, dropout."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import normlab
from normlab.nn import ModelConfig
from normlab.nn.norms import Norm

ALL_SCHEMES = ["post", "pre", "sandwich", "peri", "deepnorm", "mix", "lns", "subln", "hc", "mhc", "attnres", "spannorm"]


def tiny(**overrides) -> dict:
    cfg = dict(vocab_size=23, block_size=16, n_layer=2, n_head=4, d_model=32)
    cfg.update(overrides)
    return cfg


def _std(w: torch.Tensor) -> float:
    return w.detach().float().std().item()


# ---------------------------------------------------------------------------
# 1. Causality (claim C16)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("norm,mlp,bias", [("layernorm", "gelu", False), ("rmsnorm", "swiglu", True)])
@pytest.mark.parametrize("scheme", ALL_SCHEMES)
def test_causality(scheme, norm, mlp, bias):
    torch.manual_seed(0)
    model = normlab.build_model(tiny(scheme=scheme, norm=norm, mlp=mlp, bias=bias, n_layer=3,
                                     dropout=0.2, scheme_options={"mix_ratio": 0.5} if scheme == "mix" else {}))
    model.eval()
    V, T = 23, 16
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, V, (2, T), generator=g)
    with torch.no_grad():
        base, _ = model(idx)
        assert torch.equal(base, model(idx)[0])  # eval mode is deterministic despite dropout > 0
        for t in (1, 6, 15):
            perturbed = idx.clone()
            # a different token at every position >= t (shift by 1..V-1 mod V)
            shift = torch.randint(1, V, (2, T - t), generator=g)
            perturbed[:, t:] = (idx[:, t:] + shift) % V
            assert (perturbed[:, t:] != idx[:, t:]).all()
            logits, _ = model(perturbed)
            torch.testing.assert_close(logits[:, :t], base[:, :t], atol=1e-6, rtol=0)
            # ... and the test can fail: position t itself sees the new token
            assert (logits[:, t] - base[:, t]).abs().max() > 1e-4
        # the batch rows do not mix: changing row 1 leaves row 0 alone
        perturbed = idx.clone()
        perturbed[1] = (idx[1] + 1) % V
        logits, _ = model(perturbed)
        assert torch.equal(logits[0], base[0])
        assert not torch.equal(logits[1], base[1])


def test_causality_with_prefix_of_different_length():
    """Running a prefix alone gives the same logits as the prefix inside a longer sequence."""
    torch.manual_seed(0)
    model = normlab.build_model(tiny(scheme="peri")).eval()
    idx = torch.randint(0, 23, (3, 16))
    with torch.no_grad():
        full, _ = model(idx)
        part, _ = model(idx[:, :7])
    torch.testing.assert_close(part, full[:, :7], atol=1e-6, rtol=0)


# ---------------------------------------------------------------------------
# 2. Parity with an independent nanoGPT-style Pre-LN reference
# ---------------------------------------------------------------------------

class RefBlock(nn.Module):
    def __init__(self, d: int, n_head: int, bias: bool):
        super().__init__()
        self.n_head = n_head
        self.ln1 = nn.LayerNorm(d, bias=bias)
        self.q = nn.Linear(d, d, bias=bias)
        self.k = nn.Linear(d, d, bias=bias)
        self.v = nn.Linear(d, d, bias=bias)
        self.o = nn.Linear(d, d, bias=bias)
        self.ln2 = nn.LayerNorm(d, bias=bias)
        self.fc1 = nn.Linear(d, 4 * d, bias=bias)
        self.fc2 = nn.Linear(4 * d, d, bias=bias)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        hs = C // self.n_head

        def heads(t):
            return t.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)

        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(hs)  # (B, nh, T, T)
        allowed = torch.tril(torch.ones(T, T, dtype=torch.bool))
        weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        y = (weights @ v).transpose(1, 2).reshape(B, T, C)
        return self.o(y)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln1(x))
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return x


class RefGPT(nn.Module):
    def __init__(self, vocab: int, block_size: int, n_layer: int, n_head: int, d: int, bias: bool):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(block_size, d)
        self.blocks = nn.ModuleList(RefBlock(d, n_head, bias) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d, bias=bias)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return logits, loss


def _name_map(n_layer: int, d: int, bias: bool) -> dict[str, tuple[str, slice | None]]:
    """reference parameter name -> (normlab state_dict key, row slice of it or None)."""
    m = {"wte.weight": ("wte.weight", None), "wpe.weight": ("wpe.weight", None)}
    suffixes = ["weight", "bias"] if bias else ["weight"]
    for i in range(n_layer):
        r, n = f"blocks.{i}.", f"blocks.{i}."
        for s in suffixes:
            m[r + f"ln1.{s}"] = (n + f"attn.in_norm.{s}", None)
            m[r + f"ln2.{s}"] = (n + f"mlp.in_norm.{s}", None)
            for j, part in enumerate("qkv"):
                m[r + f"{part}.{s}"] = (n + f"attn.sublayer.qkv.{s}", slice(j * d, (j + 1) * d))
            m[r + f"o.{s}"] = (n + f"attn.sublayer.proj.{s}", None)
            m[r + f"fc1.{s}"] = (n + f"mlp.sublayer.fc.{s}", None)
            m[r + f"fc2.{s}"] = (n + f"mlp.sublayer.proj.{s}", None)
    for s in suffixes:
        m[f"ln_f.{s}"] = (f"final_norm.{s}", None)
    return m


@pytest.mark.parametrize("bias", [False, True])
def test_parity_with_reference_pre_ln_gpt(bias):
    V, T, L, H, D = 29, 16, 2, 4, 32
    torch.manual_seed(0)
    model = normlab.build_model(dict(vocab_size=V, block_size=T, n_layer=L, n_head=H, d_model=D,
                                     scheme="pre", norm="layernorm", bias=bias, tie_weights=True, dropout=0.0))
    # Move every parameter away from its init so that wrong scalings, swapped q/k or
    # ignored norm gains/biases would show (at init attention is near-uniform and γ = 1).
    modules = dict(model.named_modules())
    with torch.no_grad():
        for name, p in model.named_parameters():
            if isinstance(modules[name.rsplit(".", 1)[0]], Norm) and name.endswith("weight"):
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / math.sqrt(p.shape[-1]))
    ref = RefGPT(V, T, L, H, D, bias)
    mapping = _name_map(L, D, bias)
    sd = model.state_dict()
    # the mapping covers both models exactly
    assert set(mapping) == {n for n, _ in ref.named_parameters()}
    assert {key for key, _ in mapping.values()} == set(sd) - {"lm_head.weight"}
    assert model.lm_head.weight is model.wte.weight
    with torch.no_grad():
        for ref_name, p in ref.named_parameters():
            key, rows = mapping[ref_name]
            src = sd[key] if rows is None else sd[key][rows]
            assert p.shape == src.shape, ref_name
            p.copy_(src)

    idx = torch.randint(0, V, (3, T))
    targets = torch.randint(0, V, (3, T))
    logits, loss = model(idx, targets)
    ref_logits, ref_loss = ref(idx, targets)
    assert logits.abs().max() > 0.5  # a non-trivial function, not near-zero logits
    torch.testing.assert_close(logits, ref_logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(loss, ref_loss, atol=1e-5, rtol=1e-5)

    loss.backward()
    ref_loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    for ref_name, p in ref.named_parameters():
        key, rows = mapping[ref_name]
        g = grads[key] if rows is None else grads[key][rows]
        assert p.grad is not None and p.grad.abs().max() > 0, ref_name
        torch.testing.assert_close(g, p.grad, atol=1e-5, rtol=1e-4, msg=lambda m: f"{ref_name}: {m}")


def test_parity_shorter_sequence():
    """Positions come from wpe[0:T] also when T < block_size."""
    V, L, H, D = 19, 1, 2, 16
    torch.manual_seed(1)
    model = normlab.build_model(dict(vocab_size=V, block_size=16, n_layer=L, n_head=H, d_model=D, scheme="pre"))
    ref = RefGPT(V, 16, L, H, D, bias=False)
    mapping, sd = _name_map(L, D, False), model.state_dict()
    with torch.no_grad():
        for ref_name, p in ref.named_parameters():
            key, rows = mapping[ref_name]
            p.copy_(sd[key] if rows is None else sd[key][rows])
    idx, targets = torch.randint(0, V, (2, 5)), torch.randint(0, V, (2, 5))
    logits, loss = model(idx, targets)
    ref_logits, ref_loss = ref(idx, targets)
    torch.testing.assert_close(logits, ref_logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(loss, ref_loss, atol=1e-5, rtol=1e-5)


def test_loss_at_init_is_near_uniform():
    torch.manual_seed(0)
    model = normlab.build_model(tiny(vocab_size=50))
    idx = torch.randint(0, 50, (4, 16))
    logits, loss = model(idx, torch.randint(0, 50, (4, 16)))
    assert loss.item() == pytest.approx(math.log(50), abs=0.1)
    assert model(idx)[1] is None


# ---------------------------------------------------------------------------
# 3. Weight tying
# ---------------------------------------------------------------------------

def test_tied_weights_share_storage():
    model = normlab.build_model(tiny(tie_weights=True))
    assert model.lm_head.weight is model.wte.weight
    assert model.lm_head.weight.data_ptr() == model.wte.weight.data_ptr()
    with torch.no_grad():
        model.wte.weight[3, 5] = 123.0
    assert model.lm_head.weight[3, 5].item() == 123.0
    ids = [id(p) for p in model.parameters()]
    assert len(ids) == len(set(ids))
    assert sum(p.numel() for p in model.parameters()) == model.num_params(non_embedding=False)
    assert model.num_params(non_embedding=False) - model.num_params() == 16 * 32


def test_untied_weights_are_separate():
    torch.manual_seed(0)
    tied = normlab.build_model(tiny(tie_weights=True))
    torch.manual_seed(0)
    model = normlab.build_model(tiny(tie_weights=False))
    assert model.lm_head.weight is not model.wte.weight
    assert model.lm_head.weight.data_ptr() != model.wte.weight.data_ptr()
    assert not torch.equal(model.lm_head.weight, model.wte.weight)
    before = model.lm_head.weight.clone()
    with torch.no_grad():
        model.wte.weight.add_(1.0)
    assert torch.equal(model.lm_head.weight, before)
    assert model.num_params(non_embedding=False) == tied.num_params(non_embedding=False) + 23 * 32
    # the untied head gets the normal init too
    assert 0.5 * 0.02 < _std(model.lm_head.weight) < 1.5 * 0.02


# ---------------------------------------------------------------------------
# 4. Init
# ---------------------------------------------------------------------------

WIDE = dict(vocab_size=64, block_size=16, n_layer=2, n_head=4, d_model=256, bias=True)


@pytest.mark.parametrize("init_std,scaling", [(0.02, True), (0.05, True), (0.02, False)])
def test_normal_init(init_std, scaling):
    torch.manual_seed(0)
    model = normlab.build_model(dict(WIDE, init="normal", init_std=init_std, init_residual_scaling=scaling))
    L = WIDE["n_layer"]
    resid = init_std / math.sqrt(2 * L) if scaling else init_std
    for emb in (model.wte.weight, model.wpe.weight):
        assert _std(emb) == pytest.approx(init_std, rel=0.05)
    for block in model.blocks:
        a, m = block.attn.sublayer, block.mlp.sublayer
        assert _std(a.qkv.weight) == pytest.approx(init_std, rel=0.05)
        assert _std(m.fc.weight) == pytest.approx(init_std, rel=0.05)
        assert _std(a.proj.weight) == pytest.approx(resid, rel=0.05)
        assert _std(m.proj.weight) == pytest.approx(resid, rel=0.05)
        for w in (a.qkv.weight, m.fc.weight, a.proj.weight, m.proj.weight):
            assert abs(w.mean().item()) < 0.05 * _std(w)
    _check_biases_and_norms(model)
    assert model.init_record["embeddings"] == f"normal(0, {init_std:g})"


def test_residual_scaling_literal():
    """0.02 / sqrt(2·2) = 0.01: a hard-coded number, not the formula again."""
    torch.manual_seed(0)
    model = normlab.build_model(dict(WIDE))
    assert _std(model.blocks[0].attn.sublayer.proj.weight) == pytest.approx(0.01, rel=0.05)
    assert _std(model.blocks[1].mlp.sublayer.proj.weight) == pytest.approx(0.01, rel=0.05)


@pytest.mark.parametrize("mlp", ["gelu", "swiglu"])
def test_xavier_init(mlp):
    torch.manual_seed(0)
    d = WIDE["d_model"]
    model = normlab.build_model(dict(WIDE, init="xavier", mlp=mlp))
    d_ff = model.cfg.resolved_d_ff()

    def xavier(fan_in, fan_out):
        return math.sqrt(2.0 / (fan_in + fan_out))

    for block in model.blocks:
        a, m = block.attn.sublayer, block.mlp.sublayer
        for part in a.qkv.weight.split(d, dim=0):  # q, k, v: three d×d projections
            assert _std(part) == pytest.approx(xavier(d, d), rel=0.05)
        assert _std(a.proj.weight) == pytest.approx(xavier(d, d), rel=0.05)
        for part in m.fc.weight.split(d_ff, dim=0):
            assert _std(part) == pytest.approx(xavier(d, d_ff), rel=0.05)
        assert _std(m.proj.weight) == pytest.approx(xavier(d_ff, d), rel=0.05)
    assert _std(model.blocks[0].attn.sublayer.proj.weight) == pytest.approx(0.0625, rel=0.05)  # sqrt(2/512)
    assert _std(model.wte.weight) == pytest.approx(0.02, rel=0.05)  # embeddings stay N(0, init_std)
    _check_biases_and_norms(model)


def _check_biases_and_norms(model):
    n_bias = 0
    for module in model.modules():
        if isinstance(module, nn.Linear) and module.bias is not None:
            assert torch.count_nonzero(module.bias) == 0
            n_bias += 1
        if isinstance(module, Norm):
            assert torch.equal(module.weight, torch.ones_like(module.weight))
            if module.bias is not None:
                assert torch.count_nonzero(module.bias) == 0
    assert n_bias == 4 * model.cfg.n_layer


# ---------------------------------------------------------------------------
# 5. Determinism and config rules
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("scheme", ["pre", "deepnorm", "subln"])
def test_same_seed_same_model(scheme):
    def build(seed):
        torch.manual_seed(seed)
        return normlab.build_model(tiny(scheme=scheme, mlp="swiglu", bias=True))

    a, b, c = build(7), build(7), build(8)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k
    assert any(not torch.equal(sa[k], sc[k]) for k in sa)
    idx = torch.randint(0, 23, (2, 16))
    assert torch.equal(a.eval()(idx)[0], b.eval()(idx)[0])


def _swiglu_rule(d: int) -> int:
    """8/3·d, rounded up to a multiple of 8 (LLaMA's rule with multiple_of = 8)."""
    return 8 * math.ceil((8 * d / 3) / 8)


@pytest.mark.parametrize("d,swiglu_lit", [(16, 48), (24, 64), (32, 88), (48, 128), (64, 176), (96, 256),
                                          (256, 688), (384, 1024), (768, 2048)])
def test_resolved_d_ff(d, swiglu_lit):
    assert _swiglu_rule(d) == swiglu_lit
    gelu = ModelConfig(vocab_size=5, d_model=d, n_head=1, mlp="gelu")
    swiglu = ModelConfig(vocab_size=5, d_model=d, n_head=1, mlp="swiglu")
    assert gelu.resolved_d_ff() == 4 * d
    assert swiglu.resolved_d_ff() == swiglu_lit
    assert ModelConfig(vocab_size=5, d_model=d, n_head=1, mlp="swiglu", d_ff=40).resolved_d_ff() == 40
    assert ModelConfig(vocab_size=5, d_model=d, n_head=1, mlp="gelu", d_ff=40).resolved_d_ff() == 40


@pytest.mark.parametrize("mlp,d_ff,fc_rows", [("gelu", None, 128), ("swiglu", None, 2 * 88),
                                              ("gelu", 40, 40), ("swiglu", 40, 80)])
def test_mlp_shapes_follow_d_ff(mlp, d_ff, fc_rows):
    model = normlab.build_model(tiny(mlp=mlp, d_ff=d_ff))
    hidden = fc_rows // (2 if mlp == "swiglu" else 1)
    for block in model.blocks:
        assert block.mlp.sublayer.fc.weight.shape == (fc_rows, 32)
        assert block.mlp.sublayer.proj.weight.shape == (32, hidden)


def test_sequence_longer_than_block_size_raises():
    model = normlab.build_model(tiny())
    model(torch.zeros(1, 16, dtype=torch.long))  # exactly block_size is fine
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 17, dtype=torch.long))


def test_vocab_size_none_raises():
    with pytest.raises(ValueError, match="vocab_size"):
        normlab.build_model({"block_size": 8, "n_layer": 1, "n_head": 1, "d_model": 8})
    with pytest.raises(ValueError, match="vocab_size"):
        normlab.build_model(ModelConfig(block_size=8, n_layer=1, n_head=1, d_model=8))


@pytest.mark.parametrize("bad", [dict(vocab_size=0), dict(d_model=30, n_head=4), dict(dropout=1.0),
                                 dict(n_layer=0), dict(unknown_field=1), dict(mlp="relu"),
                                 dict(norm="scalenorm", norm_bias=True)])
def test_invalid_configs_raise(bad):
    with pytest.raises(ValueError):
        normlab.build_model(tiny(**bad))


def test_build_model_accepts_dict_and_config_alike():
    torch.manual_seed(3)
    a = normlab.build_model(tiny())
    torch.manual_seed(3)
    b = normlab.build_model(ModelConfig(**tiny()))
    assert a.cfg == b.cfg
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and torch.equal(va, vb)


# ---------------------------------------------------------------------------
# 6. Dropout
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("scheme", ["pre", "post", "subln"])
def test_dropout_train_vs_eval(scheme):
    torch.manual_seed(0)
    model = normlab.build_model(tiny(scheme=scheme, dropout=0.3))
    idx = torch.randint(0, 23, (2, 16))
    model.train()
    with torch.no_grad():
        a, _ = model(idx)
        b, _ = model(idx)
    assert not torch.equal(a, b)
    model.eval()
    with torch.no_grad():
        c, _ = model(idx)
        d, _ = model(idx)
    assert torch.equal(c, d)
    assert not torch.equal(a, c)


def test_no_dropout_train_mode_is_deterministic():
    torch.manual_seed(0)
    model = normlab.build_model(tiny(dropout=0.0)).train()
    idx = torch.randint(0, 23, (2, 16))
    with torch.no_grad():
        a, _ = model(idx)
        model.eval()
        b, _ = model(idx)
    torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


def test_dropout_rate_reaches_every_dropout_site():
    model = normlab.build_model(tiny(dropout=0.25))
    rates = [m.p for m in model.modules() if isinstance(m, nn.Dropout)]
    assert rates and all(r == 0.25 for r in rates)
    # embeddings + per block: attention output and MLP output
    assert len(rates) == 1 + 2 * model.cfg.n_layer
    assert all(b.attn.sublayer.dropout == 0.25 for b in model.blocks)  # attention-weight dropout


@pytest.mark.parametrize("key, value", [("qk_norm", "per_head"), ("logit_softcap", 30.0), ("n_kv_head", 2),
                                        ("head_bias", True)])
def test_an_encoder_decoder_refuses_the_single_stack_options(key, value):
    """Its cross-attention and head know none of them: refused in one line, never silently dropped."""
    with pytest.raises(ValueError, match=f"{key} = .* is for decoder and encoder models"):
        ModelConfig(vocab_size=11, block_size=8, n_layer=1, n_head=4, d_model=16, arch="encoder-decoder",
                    **{key: value})
