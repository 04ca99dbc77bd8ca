"""Tests of the normalizers in `normlab.nn.norms` (NORMS / make_norm).

What is tested
--------------
1. Every normalizer against an independent float64 reference written here from the
   formulas (plain torch ops, no normlab code): forward, the gradient w.r.t. the input and
   the gradient w.r.t. every parameter, with random non-trivial γ/β/α/g, over several
   shapes and input dtypes float32, bfloat16 and float16.
2. layernorm against torch.nn.LayerNorm and rmsnorm against torch.nn.RMSNorm.
3. Hard inputs: a large offset with a small spread (a naive low-precision mean/var, or a
   one-pass E[x²]−E[x]², fails there) and a few huge outlier channels (x² overflows fp16).
4. CPU bf16 autocast: the output keeps the input dtype and the statistics are not done in
   bf16 (fp32 input under autocast must still match to fp32 accuracy).
5. torch.autograd.gradcheck, input and parameter gradients.
6. Constructor options: affine, bias, DyT's alpha_init and width rule, Derf's and SeeDNorm's options,
   unknown options / names, each refused with a message that names it.
7. Default initialisation: unit-RMS (and, for layernorm, zero-mean) outputs; SeeDNorm is RMSNorm at init.
8. Derf and SeeDNorm pinned twice: the paper's expression written out here, and literal values on a
   tiny tensor computed by hand (math.erf / math.tanh).

Tolerances (why they are what they are)
---------------------------------------
* float32 input: the library computes in fp32, the reference in fp64, so results agree to
  a few fp32 roundings: rtol = atol = 1e-5 (fp32 unit roundoff is 6e-8; the 768-wide
  reductions and sums over all elements for the scalar α/g gradients need the headroom).
* bfloat16 / float16 input: the reference is computed in fp64 *from the same
  low-precision input* (and the same low-precision upstream gradient), so the only
  legitimate error is the final rounding of the fp32 result to the input dtype, which is at
  most half an ulp: rtol = torch.finfo(dtype).eps (= one ulp, 2^-7 for bf16, 2^-10 for fp16)
  plus a tiny atol for the fp32 work before it. Parameter gradients stay fp32 (parameters are
  fp32), so they keep the fp32 tolerance even for low-precision inputs: any statistic
  computed in bf16/fp16 would miss these bounds by orders of magnitude.
* Large-offset input (1000 + 0.01·noise) in fp32, layernorm only: the fp32 mean itself is
  only known to about an ulp of 1000 (6e-5), i.e. ~1% of the spread σ ≈ 0.01, so the output
  may be off by (ulp/σ)·|γ|; atol = 4 ulps·max|γ|/σ (≈0.05, outputs are O(1)) allows that
  but not a one-pass or low-precision variance (error O(1) or NaN).

float64 input is computed in float64 (statistics are computed in *at least* fp32), so
`test_gradcheck_fp64_strict` runs gradcheck at its default, strict tolerances.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import pytest
import torch
from torch.func import functional_call

from normlab.nn.norms import DYT_LLAMA_ALPHA0, NORMS, dyt_llama_alpha0, make_norm
from normlab.registry import UnknownNameError

SHAPES = [(4, 8), (2, 3, 16), (1, 5, 768)]
LOW = [torch.bfloat16, torch.float16]
EPS = 1e-5
FP32_TOL = dict(rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- the normalizers, one entry each


def _layernorm(x, p, eps):
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps)  # biased variance


def _seednorm(x, p, eps):  # Cai et al. 2025: [σ(x·βᵀ)·α + γ] ⊙ x / RMS(x), σ = tanh, no bias
    return seednorm_formula(x, p["alpha"], p["beta"], p.get("weight", 1), eps)


@dataclass(frozen=True)
class Case:
    """One normalizer as these tests know it, written independently of normlab: its formula in fp64 (`formula(x,
    params, eps)`, before γ and β where `gain` says the class applies them after it), its parameters without a bias,
    whether it takes a bias, what stays learnable with `affine = false`, and how to set a parameter no other
    normalizer has to a random, non-trivial value (`values`: name → (shape, generator, d) → tensor)."""

    formula: Callable
    params: frozenset[str]
    bias: bool = False
    not_affine: frozenset[str] = frozenset()
    gain: bool = True
    values: dict[str, Callable] = field(default_factory=dict)


CASES = {  # the one list of normalizers (test_schemes and test_cli read its names)
    "layernorm": Case(_layernorm, frozenset({"weight"}), bias=True),
    "rmsnorm": Case(lambda x, p, eps: x / torch.sqrt((x**2).mean(-1, keepdim=True) + eps), frozenset({"weight"}),
                    bias=True),
    "scalenorm": Case(lambda x, p, eps: p["g"] * x / torch.sqrt((x**2).sum(-1, keepdim=True) + eps),
                      frozenset({"g"}), gain=False,
                      values={"g": lambda shape, gen, d: torch.full(shape, math.sqrt(d) * (
                          0.5 + torch.rand((), generator=gen).item()))}),
    "dyt": Case(lambda x, p, eps: torch.tanh(p["alpha"] * x), frozenset({"weight", "alpha"}), bias=True,
                not_affine=frozenset({"alpha"})),
    # Chen et al. 2025, Eq. 10: γ·erf(αx + s) + β
    "derf": Case(lambda x, p, eps: torch.erf(p["alpha"] * x + p["shift"]), frozenset({"weight", "alpha", "shift"}),
                 bias=True, not_affine=frozenset({"alpha", "shift"}),
                 values={"shift": lambda shape, gen, d: torch.full(shape,
                                                                   0.3 * torch.randn((), generator=gen).item())}),
    "seednorm": Case(_seednorm, frozenset({"weight", "alpha", "beta"}), not_affine=frozenset({"alpha", "beta"}),
                     gain=False,  # x·β of order one for x of order one
                     values={"beta": lambda shape, gen, d: torch.randn(shape, generator=gen) / math.sqrt(d)}),
    # nGPT's Norm: x / ‖x‖₂, the norm floored at ε
    "l2": Case(lambda x, p, eps: x / torch.clamp(torch.sqrt((x**2).sum(-1, keepdim=True)), min=eps), frozenset(),
               gain=False),
    "none": Case(lambda x, p, eps: x, frozenset(), gain=False),
}
NAMES = list(CASES)
WITH_BIAS = [n for n, c in CASES.items() if c.bias]  # normalizers that accept bias=True
# the values any normalizer's common parameters are set to (`build`): γ near 1, β near 0, α (a scalar, or per
# channel as SeeDNorm's) away from 0
VALUES = {"weight": lambda shape, gen, d: 1 + 0.5 * torch.randn(shape, generator=gen),
          "bias": lambda shape, gen, d: 0.5 * torch.randn(shape, generator=gen),
          "alpha": lambda shape, gen, d: 0.3 + torch.rand(shape, generator=gen)}


# --------------------------------------------------------------------------- helpers


def reference(name: str, x: torch.Tensor, params: dict[str, torch.Tensor], eps: float = EPS):
    """The formulas, in float64, written independently of normlab. `params` are fp64."""
    case, x = CASES[name], x.double()
    y = case.formula(x, params, eps)
    if case.gain and params.get("weight") is not None:
        y = y * params["weight"]
    if case.gain and params.get("bias") is not None:
        y = y + params["bias"]
    return y


def seednorm_formula(x, alpha, beta, gamma, eps, heads=1):
    """The paper's expression as written, x (…, D), α, β, γ (1×D): x·βᵀ is a matrix product; with n heads
    x and β are cut into n slices and each slice's product scales its own slice of α."""
    rms = torch.sqrt((x**2).mean(-1, keepdim=True) + eps)
    xs, bs, als = x.chunk(heads, -1), beta.chunk(heads, -1), alpha.chunk(heads, -1)
    rescale = torch.cat([torch.tanh(xh @ bh.reshape(-1, 1)) * ah for xh, bh, ah in zip(xs, bs, als)], -1)
    return (rescale + gamma) * x / rms


def build(name: str, d: int, *, bias: bool = False, affine: bool = True, seed: int = 0,
          eps: float = EPS):
    """A normalizer whose parameters are set to random, non-trivial values."""
    m = make_norm(name, d, eps=eps, affine=affine, bias=bias)
    gen, values = torch.Generator().manual_seed(seed), {**VALUES, **CASES[name].values}
    with torch.no_grad():
        for pname, p in m.named_parameters():
            assert pname in values, f"unexpected parameter {pname}: give its value in CASES[{name!r}].values"
            p.copy_(values[pname](p.shape, gen, d))
    return m


def fp64_state(m: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The module's parameters (as fp64 leaves that record gradients) and buffers, in fp64."""
    out = {k: v.detach().double().requires_grad_() for k, v in m.named_parameters()}
    out.update({k: v.detach().double() for k, v in m.named_buffers()})
    return out


def run_both(name, m, x, gout):
    """Forward + backward through `m` and through the fp64 reference on the same values."""
    x = x.detach().requires_grad_()
    y = m(x)
    y.backward(gout)
    xr = x.detach().double().requires_grad_()
    pr = fp64_state(m)
    yr = reference(name, xr, pr, m.eps)
    yr.backward(gout.double())
    return (y, x.grad, dict(m.named_parameters())), (yr, xr.grad, pr)


def low_tol(dtype) -> dict:
    """One ulp of the output dtype (the final rounding is at most half of one), see docstring."""
    return dict(rtol=torch.finfo(dtype).eps, atol=1e-5)


def randn(*shape, seed=1, dtype=torch.float32):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


# --------------------------------------------------------------------------- 1. fp64 reference


NAME_BIAS = [(n, False) for n in NAMES] + [(n, True) for n in WITH_BIAS]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name,bias", NAME_BIAS, ids=[f"{n}-{'bias' if b else 'nobias'}" for n, b in NAME_BIAS])
@pytest.mark.parametrize("dtype", [torch.float32, *LOW], ids=str)
def test_matches_fp64_reference(name, shape, bias, dtype):
    d = shape[-1]
    m = build(name, d, bias=bias)
    x = (1.5 * randn(*shape, seed=2) + 0.3).to(dtype)  # non-zero mean, non-unit scale
    gout = randn(*shape, seed=3, dtype=dtype)
    (y, gx, params), (yr, gxr, pr) = run_both(name, m, x, gout)

    assert y.dtype == dtype and y.shape == x.shape and gx.dtype == dtype
    tol = FP32_TOL if dtype == torch.float32 else low_tol(dtype)
    torch.testing.assert_close(y.double(), yr.detach(), **tol)
    torch.testing.assert_close(gx.double(), gxr, **tol)
    if name == "none":
        assert not params
    for pname, p in params.items():  # parameters are fp32: fp32 tolerance whatever x's dtype
        assert p.grad is not None, pname
        tol = FP32_TOL
        if pname == "beta":
            # SeeDNorm's ∂L/∂β_j = Σ_t tanh′(x_t·β)·(Σ_c g·α·x̂)_t·x_tj: the token sum cancels for some j, leaving
            # an element far smaller than the terms that carry the 768-wide fp32 reductions' error; so the
            # error is measured against the gradient's scale (max ≈ 120 at 768: atol ≈ 1.2e-4, seen 4e-5).
            # A bf16 x·β would be off by ~1e-2 of it.
            tol = dict(rtol=1e-5, atol=1e-6 * pr[pname].grad.abs().max().item())
        torch.testing.assert_close(p.grad.double(), pr[pname].grad, **tol, msg=pname)
    # the set of parameters is exactly the one the formula uses
    assert set(params) == CASES[name].params | ({"bias"} if bias else set())


@pytest.mark.parametrize("eps", [1e-5, 1e-2])
@pytest.mark.parametrize("name", NAMES)
def test_eps_where_the_formula_puts_it(name, eps):
    """Tiny inputs (mean square 1e-6 < ε): ε dominates, so its value and place (inside the
    square root, added to the variance / mean square / sum of squares) are visible."""
    m = build(name, 16, bias=name in WITH_BIAS, eps=eps)
    x = 1e-3 * randn(4, 16, seed=5)
    torch.testing.assert_close(m(x).double(), reference(name, x, fp64_state(m), eps).detach(),
                               **FP32_TOL)


@pytest.mark.parametrize("name", [n for n in NAMES if n != "none"])
def test_bf16_module_and_input(name):
    """Parameters cast to bf16 too (model.to(bf16)): bf16 out, still one bf16 ulp off fp64."""
    m = build(name, 16, bias=name in WITH_BIAS).to(torch.bfloat16)
    x = randn(3, 16, dtype=torch.bfloat16)
    y = m(x)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y.double(), reference(name, x, fp64_state(m)).detach(),
                               **low_tol(torch.bfloat16))


# --------------------------------------------------------------------------- 2. vs torch.nn


@pytest.mark.parametrize("affine,bias", [(True, True), (True, False), (False, False)])
def test_layernorm_matches_torch(affine, bias):
    d, x = 32, 2 * randn(3, 5, 32) - 1
    ours = build("layernorm", d, affine=affine, bias=bias)
    theirs = torch.nn.LayerNorm(d, eps=EPS, elementwise_affine=affine, bias=bias)
    _compare_with_torch(ours, theirs, x)


@pytest.mark.parametrize("affine", [True, False])
def test_rmsnorm_matches_torch(affine):
    d, x = 32, 2 * randn(3, 5, 32) + 1
    ours = build("rmsnorm", d, affine=affine)
    theirs = torch.nn.RMSNorm(d, eps=EPS, elementwise_affine=affine)
    _compare_with_torch(ours, theirs, x)


def _compare_with_torch(ours, theirs, x):
    theirs.load_state_dict(ours.state_dict())  # strict: same parameter names and shapes
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = ours(xa), theirs(xb)
    torch.testing.assert_close(ya, yb, **FP32_TOL)
    gout = randn(*x.shape, seed=7)
    ya.backward(gout)
    yb.backward(gout)
    torch.testing.assert_close(xa.grad, xb.grad, **FP32_TOL)
    pa, pb = dict(ours.named_parameters()), dict(theirs.named_parameters())
    assert pa.keys() == pb.keys()
    for k in pa:
        torch.testing.assert_close(pa[k].grad, pb[k].grad, **FP32_TOL, msg=k)


# --------------------------------------------------------------------------- 3. hard inputs


def offset_input(shape, dtype=torch.float32):
    """1000 + 0.01·noise: variance 1e-4 (> ε), mean 1000."""
    return (1000 + 1e-2 * randn(*shape, seed=11, dtype=torch.float64)).to(dtype)


def outlier_input(shape, dtype=torch.float32):
    """~N(0,1) with two channels at 1e4 (x² = 1e8 overflows fp16)."""
    x = randn(*shape, seed=12, dtype=torch.float64)
    x[..., 1] = 1e4
    x[..., -3] = -1e4
    return x.to(dtype)


HARD = {"offset": offset_input, "outlier": outlier_input}
HARD_SHAPES = [(4, 16), (2, 768)]


@pytest.mark.parametrize("shape", HARD_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("kind", HARD)
@pytest.mark.parametrize("name", NAMES)
def test_hard_inputs_fp32(name, kind, shape):
    m = build(name, shape[-1], bias=name in WITH_BIAS)
    x = HARD[kind](shape)
    y = m(x)
    yr = reference(name, x, fp64_state(m)).detach()
    tol = FP32_TOL
    if (kind, name) == ("offset", "layernorm"):
        # An fp32 mean of values near 1000 is uncertain by an ulp or two there (ulp = 6.1e-5,
        # a fused kernel is not correctly rounded), and that error is divided by σ ≈ 0.01:
        # allow 4 ulps of mean error, scaled by max|γ|/σ. A one-pass E[x²]−E[x]² (ulp of 1e6 is
        # 0.06 ≫ var = 1e-4) or a bf16/fp16 mean (ulp at 1000 is 4 / 0.5) is off by O(1) or NaN.
        sigma = torch.sqrt(x.double().var(-1, unbiased=False) + EPS).min().item()
        ulp = 1000 * torch.finfo(torch.float32).eps / 2  # spacing of fp32 in [512, 1024)
        tol = dict(rtol=1e-5, atol=4 * ulp * m.weight.abs().max().item() / sigma)
    torch.testing.assert_close(y.double(), yr, **tol)
    if name == "layernorm":  # a variance this small relative to the mean must not be lost
        assert y.std().item() > 0.1


@pytest.mark.parametrize("kind", HARD)
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_hard_inputs_low_precision(name, kind, dtype):
    m = build(name, 16, bias=name in WITH_BIAS)
    x = HARD[kind]((4, 16), dtype).requires_grad_()
    y = m(x)
    y.backward(torch.ones_like(y))
    assert y.dtype == dtype
    assert torch.isfinite(y).all() and torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in m.parameters())
    yr = reference(name, x.detach(), fp64_state(m)).detach()
    torch.testing.assert_close(y.double(), yr, **low_tol(dtype))


# --------------------------------------------------------------------------- 4. autocast


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("in_dtype", [torch.float32, torch.bfloat16], ids=str)
def test_cpu_bf16_autocast(name, in_dtype):
    """Statistics stay fp32 under autocast: fp32 input keeps fp32 accuracy, bf16 input one ulp."""
    d = 64
    m = build(name, d, bias=name in WITH_BIAS)
    # mean 4, std 0.5: a bf16 mean/variance would be off by several percent
    x = (4 + 0.5 * randn(3, 7, d, seed=21)).to(in_dtype).requires_grad_()
    gout = randn(3, 7, d, seed=22, dtype=in_dtype)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = m(x)
    assert y.dtype == in_dtype
    y.backward(gout)
    assert x.grad.dtype == in_dtype

    xr, pr = x.detach().double().requires_grad_(), fp64_state(m)
    yr = reference(name, xr, pr)
    yr.backward(gout.double())
    tol = FP32_TOL if in_dtype == torch.float32 else low_tol(in_dtype)
    torch.testing.assert_close(y.double(), yr.detach(), **tol)
    torch.testing.assert_close(x.grad.double(), xr.grad, **tol)
    for pname, p in m.named_parameters():
        torch.testing.assert_close(p.grad.double(), pr[pname].grad, **FP32_TOL, msg=pname)


# --------------------------------------------------------------------------- 5. gradcheck


def _gradcheck(name, **kw):
    m = build(name, 6, bias=name in WITH_BIAS).double()
    x = randn(2, 3, 6, seed=31, dtype=torch.float64).requires_grad_()
    names = [k for k, _ in m.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_() for _, p in m.named_parameters())

    def f(x, *ps):
        return functional_call(m, dict(zip(names, ps)), (x,))

    return torch.autograd.gradcheck(f, (x, *params), **kw)


@pytest.mark.parametrize("name", NAMES)
def test_gradcheck_fp64_strict(name):
    assert _gradcheck(name)


@pytest.mark.parametrize("name", NAMES)
def test_gradcheck_loose(name):
    """gradcheck with eps=1e-3 (coarse finite differences): a wrong or missing gradient term is O(0.1)."""
    assert _gradcheck(name, eps=1e-3, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("name", NAMES)
def test_fp64_input_is_computed_in_fp64(name):
    """An fp64 input is not squeezed through fp32: it matches the fp64 formula to ~1e-12."""
    m = build(name, 8, bias=name in WITH_BIAS).double()
    x = randn(4, 8, dtype=torch.float64)
    y = m(x)
    assert y.dtype == torch.float64
    torch.testing.assert_close(y, reference(name, x, fp64_state(m)).detach(), rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- 6. options


def test_registry_names():
    assert sorted(NORMS.names()) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_affine_false_has_no_elementwise_parameters(name):
    m = make_norm(name, 12, affine=False)
    params = dict(m.named_parameters())
    # DyT's α (Derf's α, s) belongs to the squashing, not to the affine γ·(.)+β, and SeeDNorm's α, β are its
    # self-rescaling: they stay learnable
    assert set(params) == CASES[name].not_affine
    assert getattr(m, "weight", None) is None and getattr(m, "bias", None) is None
    x = 3 * randn(5, 12) + 1
    torch.testing.assert_close(m(x).double(), reference(name, x, fp64_state(m)).detach(), **FP32_TOL)


def test_scalenorm_g_parameter_or_buffer():
    d = 12
    fixed = make_norm("scalenorm", d, affine=False)
    assert dict(fixed.named_buffers()).keys() == {"g"}
    assert not isinstance(fixed.g, torch.nn.Parameter) and not fixed.g.requires_grad
    assert fixed.g.item() == pytest.approx(math.sqrt(d))
    assert "g" in fixed.state_dict()
    learnt = make_norm("scalenorm", d, affine=True)
    assert dict(learnt.named_parameters()).keys() == {"g"}
    assert learnt.g.shape == () and learnt.g.item() == pytest.approx(math.sqrt(d))


@pytest.mark.parametrize("name", WITH_BIAS)
def test_bias_true_adds_zero_initialised_bias(name):
    d = 10
    m = make_norm(name, d, bias=True)
    assert isinstance(m.bias, torch.nn.Parameter) and m.bias.shape == (d,)
    assert torch.equal(m.bias.detach(), torch.zeros(d))
    assert make_norm(name, d, bias=False).bias is None


@pytest.mark.parametrize("name", ["scalenorm", "seednorm", "none"])
def test_bias_true_refused(name):
    with pytest.raises(ValueError, match=name):
        make_norm(name, 8, bias=True)


@pytest.mark.parametrize("alpha", [0.5, 0.05, 2.0])
def test_dyt_alpha_init(alpha):
    m = make_norm("dyt", 8, options={"alpha_init": alpha} if alpha != 0.5 else None)
    assert isinstance(m.alpha, torch.nn.Parameter) and m.alpha.shape == ()
    assert m.alpha.item() == pytest.approx(alpha)
    x = 4 * randn(3, 8)
    torch.testing.assert_close(m(x), torch.tanh(alpha * x), **FP32_TOL)  # γ=1, no β at init


@pytest.mark.parametrize("name,options,bad,valid", [
    ("dyt", {"alpha": 1.0}, "alpha", "alpha_init"),
    ("dyt", {"alpha_init": 1.0, "beta": 2.0}, "beta", "alpha_init"),
    ("derf", {"alpha": 1.0}, "alpha", "shift_init"),
    ("seednorm", {"num_heads": 2.0}, "num_heads", "heads"),
    ("layernorm", {"alpha_init": 1.0}, "alpha_init", "takes none"),
    ("rmsnorm", {"eps": 1e-3}, "eps", "takes none"),
])
def test_unknown_option_raises(name, options, bad, valid):
    """The message names the offending option and the valid ones (or says there are none)."""
    with pytest.raises(ValueError) as err:
        make_norm(name, 8, options=options)
    msg = str(err.value)
    assert valid in msg and repr(bad) in msg and name in msg, msg


@pytest.mark.parametrize("bad", ["layernrom", "LayerNorm", "batchnorm", ""])
def test_unknown_name_raises(bad):
    with pytest.raises(UnknownNameError) as err:
        make_norm(bad, 8)
    assert isinstance(err.value, ValueError)
    msg = str(err.value)
    assert all(n in msg for n in NAMES), msg
    assert repr(bad) in msg


def test_unknown_name_suggests_closest():
    with pytest.raises(UnknownNameError, match="Did you mean 'layernorm'"):
        make_norm("layernrom", 8)


# --------------------------------------------------------------------------- 7. initialisation


@pytest.mark.parametrize("d", [16, 384])
@pytest.mark.parametrize("name", ["layernorm", "rmsnorm", "scalenorm", "seednorm"])
def test_default_init_unit_rms(name, d):
    m = make_norm(name, d)
    x = 5 * randn(6, 4, d) + 3
    y = m(x)
    rms = y.pow(2).mean(-1).sqrt()
    torch.testing.assert_close(rms, torch.ones_like(rms), rtol=0, atol=1e-4)
    if name == "layernorm":
        mean = y.mean(-1)
        torch.testing.assert_close(mean, torch.zeros_like(mean), rtol=0, atol=1e-5)


def test_default_init_values():
    d = 8
    for name in ["layernorm", "rmsnorm", "dyt", "derf"]:
        m = make_norm(name, d, bias=True)
        assert torch.equal(m.weight.detach(), torch.ones(d)), name
        assert torch.equal(m.bias.detach(), torch.zeros(d)), name
    assert make_norm("dyt", d).alpha.item() == 0.5
    derf = make_norm("derf", d)
    assert derf.alpha.shape == derf.shift.shape == () and (derf.alpha.item(), derf.shift.item()) == (0.5, 0.0)
    seed = make_norm("seednorm", d)
    assert torch.equal(seed.weight.detach(), torch.ones(d)) and torch.equal(seed.alpha.detach(), torch.ones(d))
    assert torch.equal(seed.beta.detach(), torch.zeros(d)) and seed.heads == 1


def test_none_is_identity():
    m = make_norm("none", 8)
    assert not list(m.parameters()) and not list(m.buffers())
    x = randn(3, 8, dtype=torch.float16)
    assert m(x) is x or torch.equal(m(x), x)


def test_seednorm_is_rmsnorm_at_init():
    """β = 0 makes tanh(x·βᵀ) = 0: the default SeeDNorm is RMSNorm, to the last bit of the formula."""
    x = 3 * randn(4, 5, 16) + 1
    torch.testing.assert_close(make_norm("seednorm", 16)(x), make_norm("rmsnorm", 16)(x), rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------- 8. the papers' formulas, twice


def test_derf_literal_value():
    """α = 0.5, s = 0.25, γ = 1 on x = (0, 1, −2): erf(0.25), erf(0.75), erf(−0.75) (math.erf)."""
    m = make_norm("derf", 3, options={"shift_init": 0.25})
    y = m(torch.tensor([[0.0, 1.0, -2.0]]))
    expected = torch.tensor([[0.2763263901682369, 0.7111556336535151, -0.7111556336535151]])
    torch.testing.assert_close(y, expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("heads, expected", [
    (1, [1.9507485326409444, 0.1995009782393703]),  # x·β = 1.1: gain (1 + 2·tanh 1.1, 1 − tanh 1.1)
    (2, [1.1869689186773864, 0.3359632297321509]),  # per head 0.3 and 0.8: (1 + 2·tanh 0.3, 1 − tanh 0.8)
])
def test_seednorm_literal_value(heads, expected):
    """x = (3, 4), ε = 3.5 so RMS(x) = √(12.5 + 3.5) = 4 and x/RMS = (0.75, 1); β = (0.1, 0.2), α = (2, −1)."""
    m = make_norm("seednorm", 2, eps=3.5, options={"heads": heads})
    with torch.no_grad():
        m.beta.copy_(torch.tensor([0.1, 0.2]))
        m.alpha.copy_(torch.tensor([2.0, -1.0]))
    torch.testing.assert_close(m(torch.tensor([[3.0, 4.0]])), torch.tensor([expected]), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_seednorm_multi_head_matches_the_formula(dtype):
    """Multi-head SeeDNorm against the expression written above, with its per-head x·βᵀ; bf16 input under
    bf16 autocast still lands within one bf16 ulp of the fp64 formula (the dot products are fp32)."""
    d, heads = 32, 4
    m = make_norm("seednorm", d, options={"heads": heads})
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        m.beta.copy_(torch.randn(d, generator=gen))
        m.alpha.copy_(torch.randn(d, generator=gen))
        m.weight.copy_(1 + 0.5 * torch.randn(d, generator=gen))
    x = (4 + 0.5 * randn(3, 5, d, seed=9)).to(dtype)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = m(x)
    p = fp64_state(m)
    yr = seednorm_formula(x.double(), p["alpha"], p["beta"], p["weight"], EPS, heads).detach()
    assert y.dtype == dtype
    torch.testing.assert_close(y.double(), yr, **(FP32_TOL if dtype == torch.float32 else low_tol(dtype)))


# --------------------------------------------------------------------------- options of the new normalizers


@pytest.mark.parametrize("d, attention, other", [
    (1024, 1.0, 1.0), (2048, 1.0, 0.5), (4096, 0.8, 0.2), (8192, 0.2, 0.05),  # DyT's paper, its width table (§7)
    (5120, 0.6, 0.15),  # the DyT repository's LLaMA 2 13B launcher
    (6144, 0.6, 0.15), (1536, 1.0, 1.0),  # between rows: the widest listed width ≤ d
    (64, 1.0, 1.0), (16, 1.0, 1.0),  # narrower than the table: its narrowest row (narrower needs no smaller α0)
])
def test_dyt_width_rule(d, attention, other):
    rule = {"alpha_init_rule": 1.0}
    assert make_norm("dyt", d, options=rule, role="attention").alpha.item() == pytest.approx(attention)
    assert make_norm("dyt", d, options=rule, role="other").alpha.item() == pytest.approx(other)
    assert make_norm("dyt", d, options=rule).alpha.item() == pytest.approx(other)  # role defaults to "other"
    assert make_norm("dyt", d, role="attention").alpha.item() == 0.5  # the default ignores the role


@pytest.mark.parametrize("name, options, role, message", [
    ("dyt", {"alpha_init_rule": 2.0}, "other", "alpha_init_rule must be 0"),
    ("dyt", {"alpha_init_rule": 1.0, "alpha_init": 0.3}, "other", "alpha_init and alpha_init_rule = 1"),
    ("dyt", {}, "ffn", "role is one of attention, other"),
    ("layernorm", {}, "mlp", "role is one of attention, other"),
    ("derf", {"alpha_init": 0.0}, "other", "alpha_init must be finite and > 0"),
    ("derf", {"alpha_init": -0.5}, "other", "alpha_init must be finite and > 0"),
    ("derf", {"shift_init": float("nan")}, "other", "shift_init finite"),
    ("seednorm", {"heads": 1.5}, "other", "heads must be a whole number"),
    ("seednorm", {"heads": 0.0}, "other", "heads must be a whole number"),
    ("seednorm", {"heads": 3.0}, "other", "divides the width 8"),
    ("seednorm", {"alpha_init": float("inf")}, "other", "alpha_init must be finite"),
])
def test_bad_option_values_refused(name, options, role, message):
    """A value the normalizer cannot use is one ValueError that names the option and what it must be."""
    with pytest.raises(ValueError, match=message):
        make_norm(name, 8, options=options, role=role)


def test_dyt_width_rule_gives_the_attention_norm_its_own_alpha_in_a_built_model():
    import normlab

    """DyT's width table at width 2048: α0 = 1.0 before attention, 0.5 everywhere else."""
    model = normlab.build_model(dict(vocab_size=11, block_size=8, n_layer=2, n_head=16, d_model=2048, scheme="pre",
                                     norm="dyt", norm_options={"alpha_init_rule": 1.0}))
    for block in model.blocks:
        assert block.attn.in_norm.alpha.item() == pytest.approx(1.0)
        assert block.mlp.in_norm.alpha.item() == pytest.approx(0.5)
    assert model.final_norm.alpha.item() == pytest.approx(0.5)


def test_dyt_alpha0_does_not_grow_with_width():
    """The table's trend, on every width from 16 to 16384: a wider model never gets a larger α0 (attention or
    other), and the attention norm's is never the smaller."""
    widths = [16 * 2 ** k for k in range(11)] + [r[0] for r in DYT_LLAMA_ALPHA0]
    for role in ("attention", "other"):
        values = [dyt_llama_alpha0(d, role) for d in sorted(widths)]
        assert values == sorted(values, reverse=True), role
    assert all(dyt_llama_alpha0(d, "attention") >= dyt_llama_alpha0(d, "other") for d in widths)
