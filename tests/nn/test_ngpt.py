"""nGPT (arXiv 2410.01131): the built model against a direct transcription of the paper's equations, the weights
on the unit sphere after init and after every training step, and the settings the paper fixes."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from normlab.nn import ModelConfig, build_model
from normlab.rundir.load import load_model
from normlab.train import train
from tests.conftest import tiny_config


def unit(x):
    return x / x.norm(dim=-1, keepdim=True)


def rope(t, theta=10000.0):
    """RoPE in the half-split layout, written out: channel i pairs with i + hs/2 (B, nh, T, hs)."""
    T, hs = t.shape[-2:]
    freq = theta ** (-torch.arange(0, hs, 2, dtype=torch.float64) / hs)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * freq[None]  # (T, hs/2)
    cos, sin = ang.cos().to(t.dtype), ang.sin().to(t.dtype)
    a, b = t[..., : hs // 2], t[..., hs // 2:]
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)


def paper_forward(m, idx, d, n_head):
    """nGPT's forward from its equations, reading the model's parameters and nothing of its code: Eq. 10–11
    (h ← Norm(h + α(Norm(F(h)) − h))), 15–16 (q, k on the sphere, × s_qk, scores × √d_k), 20–21 (u ⊙ SiLU(v),
    v × s_v√d), 23 (z = s_z ⊙ E h), each s read as parameter · init / scale (§2.5)."""
    hs = d // n_head
    h = m.wte.weight[idx]  # (B, T, d): the rows are unit vectors
    B, T, _ = h.shape
    causal = torch.ones(T, T, dtype=torch.bool).triu(1)
    for block in m.blocks:
        att, mlp = block.attn.sublayer, block.mlp.sublayer
        q, k, v = (h @ att.qkv.weight.T).split(d, dim=-1)
        q, k, v = (t.view(B, T, n_head, hs).transpose(1, 2) for t in (q, k, v))
        s_qk = att.s_qk.weight * (1.0 / d ** -0.5)  # (nh, 1, hs)
        q, k = unit(rope(q)) * s_qk, unit(rope(k)) * s_qk
        scores = (q @ k.transpose(-1, -2)) * math.sqrt(hs)
        y = torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1) @ v
        h_a = unit(y.transpose(1, 2).reshape(B, T, d) @ att.proj.weight.T)
        alpha_a = block.attn.eigen_lr.weight * (0.05 / d ** -0.5)
        h = unit(h + alpha_a * (h_a - h))
        d_ff = mlp.proj.weight.shape[1]
        v_in, u_in = (h @ mlp.fc.weight.T).split(d_ff, dim=-1)
        u, v_ = u_in * mlp.s_u.weight, v_in * mlp.s_v.weight * math.sqrt(d)
        h_m = unit((u * F.silu(v_)) @ mlp.proj.weight.T)
        alpha_m = block.mlp.eigen_lr.weight * (0.05 / d ** -0.5)
        h = unit(h + alpha_m * (h_m - h))
    return (h @ m.lm_head.weight.T) * (m.logit_scale.weight * (1.0 / d ** -0.5))


def tiny_ngpt(**extra):
    return ModelConfig(vocab_size=40, block_size=12, n_layer=2, n_head=2, d_model=16, scheme="ngpt", **extra)


def test_forward_matches_the_papers_equations():
    torch.manual_seed(0)
    m = build_model(tiny_ngpt()).double()
    with torch.no_grad():  # every scaling vector away from its init, so a misplaced one shows
        for name, p in m.named_parameters():
            if name.endswith("weight") and p.dim() <= 3 and ("s_" in name or "eigen" in name or "logit" in name):
                p.mul_(torch.empty_like(p).uniform_(0.5, 1.5))
    idx = torch.randint(0, 40, (2, 12))
    logits, _ = m(idx)
    assert torch.allclose(logits, paper_forward(m, idx, 16, 2), atol=1e-10)


def test_a_misplaced_scale_is_caught():
    """The transcription can fail: v scaled by √d on the wrong half of the MLP gives other logits."""
    torch.manual_seed(0)
    m = build_model(tiny_ngpt()).double()
    idx = torch.randint(0, 40, (2, 12))
    ref = paper_forward(m, idx, 16, 2)
    mlp = m.blocks[0].mlp.sublayer
    mlp.activate = lambda h: F.silu(h.chunk(2, -1)[1] * mlp.sqrt_d) * h.chunk(2, -1)[0]  # u and v swapped
    assert not torch.allclose(m(idx)[0], ref, atol=1e-6)


def sphere_norms(m):
    """Every embedding-dimension vector's norm: embedding rows, stream-reading rows, stream-writing columns."""
    out = [m.wte.weight.norm(dim=1)]
    for block in m.blocks:
        out += [block.attn.sublayer.qkv.weight.norm(dim=1), block.attn.sublayer.proj.weight.norm(dim=0),
                block.mlp.sublayer.fc.weight.norm(dim=1), block.mlp.sublayer.proj.weight.norm(dim=0)]
    return torch.cat(out)


def test_weights_start_on_the_sphere_under_every_init():
    for init in ("normal", "xavier", "gpt2", "xiong"):
        m = build_model(tiny_ngpt(init=init))
        assert torch.allclose(sphere_norms(m), torch.ones(1), atol=1e-6), init
        assert m.init_record["sphere"].startswith("then every embedding-dimension vector")


def test_weights_stay_on_the_sphere_after_training_steps(tmp_path):
    cfg = tiny_config(model={"scheme": "ngpt"}, train={"steps": 12, "lr": 1e-2, "warmup_steps": 0})
    result = train(cfg, tmp_path / "run")
    assert result.status == "completed"
    m = load_model(tmp_path / "run").model
    norms = sphere_norms(m)
    assert torch.allclose(norms, torch.ones(1), atol=1e-5)
    # and the steps moved them: the weights are not the step-0 ones
    fresh = build_model(m.cfg)
    assert not torch.allclose(fresh.wte.weight, m.wte.weight)


def test_the_trainer_is_what_keeps_them_there(tmp_path, monkeypatch):
    """One AdamW step takes the weights off the sphere (so the test above can fail), and the trainer projects
    them back after every one of its steps."""
    torch.manual_seed(0)
    m = build_model(tiny_ngpt())
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    m(torch.randint(0, 40, (2, 12)), torch.randint(0, 40, (2, 12)))[1].backward()
    opt.step()
    assert not torch.allclose(sphere_norms(m), torch.ones(1), atol=1e-3)

    from normlab.nn.model import GPT

    calls = []
    real = GPT.project_weights
    monkeypatch.setattr(GPT, "project_weights", lambda self: (calls.append(1), real(self)))
    train(tiny_config(model={"scheme": "ngpt"}, train={"steps": 7, "warmup_steps": 0}), tmp_path / "run")
    assert len(calls) >= 7 + 1  # at build, then after each of the 7 steps


def test_the_papers_settings_fill_in_and_others_are_refused():
    cfg = tiny_ngpt()
    assert (cfg.norm, cfg.positions, cfg.mlp, cfg.bias, cfg.qk_norm, cfg.embed_scale) == \
        ("l2", "rope", "swiglu", False, "none", 1.0)
    assert cfg.resolved_final_norm() is False and not cfg.stackable
    with pytest.raises(ValueError, match="scheme 'ngpt' cannot be used with normalizer 'rmsnorm': it normalizes "
                                         "with 'l2' only"):
        tiny_ngpt(norm="rmsnorm")
    for key, bad in (("positions", "learned"), ("mlp", "gelu"), ("bias", True), ("qk_norm", "per_head")):
        with pytest.raises(ValueError, match=f"scheme 'ngpt' needs {key} = .* \\(got {bad!r}\\)"):
            tiny_ngpt(**{key: bad})
    for arch in ("encoder", "encoder-decoder"):
        with pytest.raises(ValueError, match="nGPT .* defines a decoder-only"):
            build_model(tiny_ngpt(arch=arch))


def test_l2_is_the_unit_projection():
    from normlab.nn.norms import make_norm

    x = torch.randn(3, 5, 16, dtype=torch.float64) * 7
    y = make_norm("l2", 16)(x)
    assert torch.allclose(y, x / x.norm(dim=-1, keepdim=True))
    assert torch.equal(make_norm("l2", 16)(torch.zeros(2, 16)), torch.zeros(2, 16))
    assert not list(make_norm("l2", 16).parameters())
