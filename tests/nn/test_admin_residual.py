"""Admin and ResiDual pinned against hand-written references of their papers' formulas, on normlab's own
sub-layers and norms (so only the wiring around them is under test)."""
from __future__ import annotations

import math

import pytest
import torch

import normlab
from normlab.nn.config import ModelConfig
from normlab.nn.schemes import AdminResidual, profile_model


def tiny(scheme, **kw):
    return ModelConfig(vocab_size=17, block_size=8, n_layer=3, n_head=2, d_model=16, scheme=scheme, **kw)


def _embed(model, idx):
    return model.wte(idx) + model.wpe(torch.arange(idx.size(1)))


def test_residual_matches_the_papers_two_streams():
    """ResiDual (arXiv 2304.14802 §3): x_a ← LN(x_a + F(x_a)); x_d ← x_d + F(x_a), x_d⁰ = x⁰;
    output y = x_a + LN(x_d) before the head."""
    torch.manual_seed(0)
    model = normlab.build_model(tiny("residual"))
    idx = torch.randint(17, (2, 8))
    x_a = _embed(model, idx)
    x_d = x_a
    for block in model.blocks:
        for r in (block.attn, block.mlp):
            h = r.sublayer(x_a)
            x_d = x_d + h
            x_a = r.post_norm(x_a + h)
    y = x_a + model.final_norm.norm(x_d)
    want = model.lm_head(y)
    got, _ = model(idx)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    # a second forward starts a new dual stream (nothing carried over from the first)
    torch.testing.assert_close(model(idx)[0], got, rtol=0, atol=0)
    # and it is not Post-LN: dropping the dual stream changes the output (the check above can fail)
    assert (model.lm_head(x_a + model.final_norm.norm(x_a)) - got).abs().max() > 1e-3


def test_residual_refuses_to_drop_its_final_module():
    with pytest.raises(ValueError, match="needs its final module"):
        tiny("residual", final_norm=False)


def test_admin_matches_the_papers_formula_with_profiled_omega():
    """Admin (arXiv 2004.08249 §4.3): x_i = LN(ω_i ⊙ x_{i−1} + F_i(x_{i−1})), ω_i = √(Var x₀ + Σ_{j<i} Var F_j)
    from one profiling pass with ω = 1 (normlab counts the embedding as the 0-th term)."""
    torch.manual_seed(0)
    model = normlab.build_model(tiny("admin"))
    idx = torch.randint(17, (4, 8))
    # the profiling pass by hand: ω = 1 is Post-LN; record Var x₀ and each branch's Var F_i in order
    x = _embed(model, idx)
    total, omegas = x.var().item(), []
    with torch.no_grad():
        for block in model.blocks:
            for r in (block.attn, block.mlp):
                h = r.sublayer(x)
                omegas.append(math.sqrt(total))
                total += h.var().item()
                x = r.post_norm(x + h)
    record = profile_model(model, lambda: model(idx))
    assert record["decoder"] == pytest.approx(omegas, rel=1e-5)
    residuals = [m for m in model.modules() if isinstance(m, AdminResidual)]
    assert [r.omega.detach().unique().tolist() for r in residuals] == [[pytest.approx(w, rel=1e-5)] for w in omegas]
    assert all(r.omega.requires_grad and r.omega.shape == (16,) for r in residuals)
    # the forward with profiled ω, by hand
    x = _embed(model, idx)
    for r in residuals:
        x = r.post_norm(r.omega * x + r.sublayer(x))
    torch.testing.assert_close(model(idx)[0], model.lm_head(x), rtol=1e-6, atol=1e-6)
    assert omegas == sorted(omegas) and omegas[0] < omegas[-1]  # ω grows as the branch variances add up


def test_admin_profiles_each_stack_of_an_encoder_decoder_apart():
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=17, block_size=8, n_layer=2, n_dec_layer=3, n_head=2, d_model=16,
                      scheme="admin", arch="encoder-decoder")
    model = normlab.build_model(cfg)
    src, tgt = torch.randint(15, (2, 8)), torch.randint(15, (2, 8))
    record = profile_model(model, lambda: model(src, tgt))
    assert len(record["encoder"]) == 2 * 2 and len(record["decoder"]) == 3 * 3  # attn, mlp | attn, cross, mlp
    assert record["encoder"] == sorted(record["encoder"]) and record["decoder"] == sorted(record["decoder"])


def test_a_fresh_admin_run_is_profiled_and_records_omega(tmp_path):
    from normlab.config import validate_config
    from normlab.rundir import RunDir
    from normlab.train.loop import train

    cfg = validate_config({"model": {"n_layer": 2, "d_model": 16, "n_head": 2, "block_size": 16, "scheme": "admin"},
                           "train": {"steps": 2, "eval_interval": 2, "eval_batches": 1, "batch_size": 2,
                                     "device": "cpu", "warmup_steps": 0},
                           "diagnostics": {"interval": "off", "layer_skip": False}})
    assert train(cfg, str(tmp_path / "a")).status == "completed"
    omega = RunDir(tmp_path / "a").read_meta()["model"]["admin_omega"]["decoder"]
    assert len(omega) == 4 and omega[0] < omega[-1]


@pytest.mark.parametrize("scheme", ["admin", "residual"])
def test_diagnostics_see_admin_and_residual_branches(tmp_path, scheme):
    """The probe taps each branch at out_norm; a residual that bypassed it crashed every measured step."""
    from normlab.config import validate_config
    from normlab.rundir.diagnostics_store import DiagnosticsStore
    from normlab.train.loop import train

    cfg = validate_config({"model": {"n_layer": 2, "d_model": 16, "n_head": 2, "block_size": 16, "scheme": scheme},
                           "train": {"steps": 2, "eval_interval": 2, "eval_batches": 1, "batch_size": 2,
                                     "device": "cpu", "warmup_steps": 0},
                           "diagnostics": {"interval": 1, "layer_skip": True}})
    assert train(cfg, str(tmp_path / "a")).status == "completed"
    ratios = DiagnosticsStore(tmp_path / "a").query("contribution_ratio", "attn", 0)[0]
    assert len(ratios) == 2 and all(r > 0 for r in ratios)
