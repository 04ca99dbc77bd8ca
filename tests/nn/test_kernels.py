"""Tests of the fused CPU norm kernels in `normlab.nn.kernels` (and their use by norms.py).

The first test that needs the extension compiles it (about 25 s on an idle 2-core
machine, a minute when it is busy); later runs load it from torch's extension cache.

What is tested
--------------
1. The fused path against an fp64 reference written here from the formulas: forward,
   input grad, weight grad, bias grad; rmsnorm and layernorm; fp32 and bf16 input; odd
   widths (1, 7, 129) that leave a remainder after the vectorized lanes; a few huge outlier
   channels; a large offset with a small spread (layernorm's two-pass variance).
2. gradcheck in fp64 through the fused path (strict default tolerances).
3. The switch: NORMLAB_NORM_IMPL / set_norm_impl / norm_impl pick the path; tensors the
   kernels do not handle (fp16, non-CPU) take the reference path.
4. The fallback: a failed build logs one line on logger 'normlab' and the reference code
   gives the (correct) result.

Tolerances: as in test_norms.py. fp32: rtol = atol = 1e-5 (fp32 statistics vs fp64).
bf16: the reference is computed in fp64 from the same bf16 input and upstream grad, so the
only error is the final rounding to bf16: rtol = one bf16 ulp (2^-7). Parameter grads are
fp32 (the parameters are), so they keep the fp32 tolerance for bf16 input too.
"""
from __future__ import annotations

import logging

import pytest
import torch

from normlab.nn import kernels
from normlab.nn.norms import make_norm

FP32_TOL = dict(rtol=1e-5, atol=1e-5)
BF16_TOL = dict(rtol=torch.finfo(torch.bfloat16).eps, atol=1e-5)
SHAPES = [(4, 7), (3, 5, 129), (64, 768), (2, 3), (1, 33)]
NORMS = ["rmsnorm", "layernorm"]


@pytest.fixture(scope="module")
def ext():
    """The compiled extension (built on first use); skips, saying why, where it cannot be built."""
    e = kernels.extension()
    if e is None:
        pytest.skip(f"fused kernels unavailable: {kernels._ext_error}")
    return e


@pytest.fixture
def fast(ext):
    with kernels.norm_impl("fast"):
        yield


def reference(name, x, w, b, eps=1e-5):
    """The formulas in fp64, independent of normlab."""
    x = x.double()
    if name == "layernorm":
        x = x - x.mean(-1, keepdim=True)
    y = x / torch.sqrt((x**2).mean(-1, keepdim=True) + eps)
    return y * w + (b if b is not None else 0)


def make(name, d, bias, seed=0):
    m = make_norm(name, d, bias=bias)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        m.weight.copy_(1 + 0.5 * torch.randn(d, generator=gen))
        if m.bias is not None:
            m.bias.copy_(0.5 * torch.randn(d, generator=gen))
    return m


def check_against_fp64(name, m, x, gout):
    """Forward and every gradient through `m` (fused path) vs the fp64 formulas."""
    x = x.detach().requires_grad_()
    y = m(x)
    assert y.grad_fn is not None and "FusedNorm" in y.grad_fn.name()
    y.backward(gout)
    xr = x.detach().double().requires_grad_()
    wr = m.weight.detach().double().requires_grad_()
    br = None if m.bias is None else m.bias.detach().double().requires_grad_()
    yr = reference(name, xr, wr, br, m.eps)
    yr.backward(gout.double())
    tol = FP32_TOL if x.dtype == torch.float32 else BF16_TOL
    assert y.dtype == x.dtype and x.grad.dtype == x.dtype
    torch.testing.assert_close(y.double(), yr.detach(), **tol)
    torch.testing.assert_close(x.grad.double(), xr.grad, **tol)
    torch.testing.assert_close(m.weight.grad.double(), wr.grad, **FP32_TOL)
    if br is not None:
        torch.testing.assert_close(m.bias.grad.double(), br.grad, **FP32_TOL)


def randn(*shape, seed=1):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


# --------------------------------------------------------------------------- 1. vs fp64


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", NORMS)
def test_fused_matches_fp64(fast, name, shape, bias, dtype):
    m = make(name, shape[-1], bias)
    x = (1.5 * randn(*shape, seed=2) + 0.3).to(dtype)
    check_against_fp64(name, m, x, randn(*shape, seed=3).to(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", NORMS)
def test_outlier_channels(fast, name, dtype):
    """A few channels 10⁴ larger than the rest (as in trained LLMs): the row statistics are
    dominated by them and x² reaches 10⁸, still well inside fp32 (and bf16's exponent)."""
    x = randn(32, 257, seed=4)
    x[:, [3, 100, 200]] *= 1e4
    m = make(name, 257, bias=True)
    check_against_fp64(name, m, x.to(dtype), randn(32, 257, seed=5).to(dtype))


def test_layernorm_large_offset(fast):
    """1000 + 0.01·noise: a one-pass E[x²] − E[x]² in fp32 would lose every digit; the fused
    kernel takes two passes over the cached row. Tolerance as in test_norms.py: the fp32
    mean itself is known only to ~ulp(1000), i.e. ~1% of σ."""
    x = (1000 + 0.01 * randn(16, 384, seed=6)).requires_grad_()
    m = make("layernorm", 384, bias=True)
    y = m(x)
    yr = reference("layernorm", x.detach(), m.weight.detach().double(), m.bias.detach().double())
    ulp = torch.finfo(torch.float32).eps * 1000
    atol = 4 * ulp * m.weight.abs().max().item() / 0.01
    torch.testing.assert_close(y.double(), yr, rtol=0, atol=atol)


def test_noncontiguous_and_empty(fast):
    m = make("rmsnorm", 24, bias=False)
    x = randn(24, 10, seed=7).t()  # (10, 24), not contiguous
    torch.testing.assert_close(m(x).double(), reference("rmsnorm", x, m.weight.double(), None).detach(),
                               **FP32_TOL)
    empty = torch.zeros(0, 24, requires_grad=True)
    m(empty).sum().backward()
    assert empty.grad.shape == (0, 24) and m.weight.grad.abs().sum() == 0


def test_no_affine(fast):
    for name in NORMS:
        m = make_norm(name, 9, affine=False)
        x = randn(5, 9, seed=8).requires_grad_()
        y = m(x)
        assert "FusedNorm" in y.grad_fn.name()
        xr = x.detach().double().requires_grad_()
        yr = reference(name, xr, 1.0, None)
        g = randn(5, 9, seed=9)
        y.backward(g)
        yr.backward(g.double())
        torch.testing.assert_close(x.grad.double(), xr.grad, **FP32_TOL)


def test_frozen_weight_and_bf16_parameters(fast):
    """Only the gradients asked for come back (the weight frozen, the bias not), and bf16
    parameters get bf16 gradients (the kernels use them in fp32)."""
    m = make("layernorm", 40, bias=True)
    m.weight.requires_grad_(False)
    x = randn(6, 40, seed=15).requires_grad_()
    m(x).sum().backward()
    assert m.weight.grad is None and m.bias.grad is not None and x.grad is not None
    torch.testing.assert_close(m.bias.grad, torch.full((40,), 6.0))
    mb = make("rmsnorm", 40, bias=False).to(torch.bfloat16)
    xb = randn(6, 40, seed=16).to(torch.bfloat16).requires_grad_()
    mb(xb).sum().backward()
    assert mb.weight.grad.dtype == torch.bfloat16 and xb.grad.dtype == torch.bfloat16


def test_no_double_backward(fast):
    m = make("rmsnorm", 8, bias=False)
    x = randn(3, 8, seed=17).requires_grad_()
    with pytest.raises(RuntimeError, match="no double backward"):
        torch.autograd.grad(m(x).square().sum(), x, create_graph=True)


# --------------------------------------------------------------------------- 2. gradcheck


@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("name", NORMS)
def test_gradcheck_fp64(ext, name, bias):
    """fp64 input runs the kernels in fp64 (statistics too), so gradcheck's strict defaults hold."""
    fn = kernels.fast_layer_norm if name == "layernorm" else kernels.fast_rms_norm
    x = randn(3, 4, 37, seed=10).double().requires_grad_()
    w = (1 + 0.5 * randn(37, seed=11)).double().requires_grad_()
    b = (0.5 * randn(37, seed=12)).double().requires_grad_() if bias else None
    inputs = (x, w, b) if bias else (x, w)
    assert torch.autograd.gradcheck(lambda *a: fn(*a, eps=1e-5), inputs)


# --------------------------------------------------------------------------- 3. the switch


def test_switch_picks_the_path(ext):
    m = make("rmsnorm", 16, bias=False)
    x = randn(4, 16).requires_grad_()
    with kernels.norm_impl("reference"):
        assert "FusedNorm" not in m(x).grad_fn.name()
    with kernels.norm_impl("fast"):
        assert "FusedNorm" in m(x).grad_fn.name()
        # fp16 and non-CPU tensors are not the kernels' business
        assert not kernels.use_fast("rmsnorm", x.half())
        assert not kernels.use_fast("rmsnorm", torch.empty(4, 16, device="meta"))
    with kernels.norm_impl("auto"):
        assert kernels.use_fast("rmsnorm", x)
        assert not kernels.use_fast("layernorm", x)  # fp32: torch's F.layer_norm is as fast
        assert kernels.use_fast("layernorm", x.bfloat16())
    with pytest.raises(ValueError, match="valid: auto, fast, reference"):
        kernels.set_norm_impl("turbo")


def test_bad_environment_variable_is_reported(monkeypatch):
    monkeypatch.setattr(kernels, "_impl", "turbo")  # as read from NORMLAB_NORM_IMPL=turbo
    with pytest.raises(ValueError, match="NORMLAB_NORM_IMPL='turbo'"):
        make_norm("rmsnorm", 4)(torch.ones(2, 4))


def test_fast_and_reference_agree(ext):
    for name in NORMS:
        m = make(name, 129, bias=True)
        x = randn(8, 129, seed=13)
        with kernels.norm_impl("fast"):
            y_fast = m(x)
        torch.testing.assert_close(y_fast, m.reference_forward(x), **FP32_TOL)


# --------------------------------------------------------------------------- 4. fallback


@pytest.fixture
def broken_build(monkeypatch):
    """The compiler fails: simulated by a loader that raises, on a fresh kernels state."""
    def fail():
        raise RuntimeError("Error building extension 'normlab_norm_kernels': simulated compiler failure")

    monkeypatch.setattr(kernels, "_load", fail)
    kernels.reset_for_tests()
    yield
    kernels.reset_for_tests()  # the next user loads the real extension again (from the cache)


def test_build_failure_falls_back_with_one_log_line(broken_build, caplog):
    m = make("rmsnorm", 32, bias=True)
    x = randn(6, 32, seed=14).requires_grad_()
    with caplog.at_level(logging.INFO, logger="normlab"), kernels.norm_impl("fast"):
        y1, y2 = m(x), m(x)  # a second call must not log again
    records = [r for r in caplog.records if r.name == "normlab"]
    assert len(records) == 1, [r.getMessage() for r in records]
    msg = records[0].getMessage()
    assert "rmsnorm" in msg and "reference" in msg and "simulated compiler failure" in msg
    assert "FusedNorm" not in y1.grad_fn.name()
    y1.backward(torch.ones_like(y1))
    yr = reference("rmsnorm", x.detach(), m.weight.detach().double(), m.bias.detach().double())
    torch.testing.assert_close(y2.double(), yr, **FP32_TOL)
    with pytest.raises(RuntimeError, match="unavailable"):
        kernels.fast_rms_norm(x, m.weight)  # called directly, it says why it cannot run
