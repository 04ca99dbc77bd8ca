"""Normalizers, looked up by name in `NORMS`.

Every normalizer computes its statistics in fp32, also under bf16/fp16 autocast,
and returns the input's dtype. All take the same constructor arguments:
`(d, eps=..., affine=..., bias=..., **options)`; `options` are the few
normalizer-specific knobs (e.g. DyT's `alpha_init`), declared in `OPTIONS`; `role` says where a norm
sits, for the one init that depends on it (DyT's width rule).

LayerNorm and RMSNorm run fused C++ kernels on CPU where they are faster
(`normlab.nn.kernels`, NORMLAB_NORM_IMPL=auto|fast|reference); their
`reference_forward` is the plain torch code, which runs everywhere else.
"""
from __future__ import annotations

import math
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import nn

from normlab.nn import kernels
from normlab.registry import Registry, check_options

NORMS: Registry[type["Norm"]] = Registry("normalizer")


def _fp32_region(x: torch.Tensor):
    """Autocast off: statistics are computed in fp32 whatever the ambient autocast says."""
    if torch.is_autocast_enabled(x.device.type):
        return torch.autocast(device_type=x.device.type, enabled=False)
    return nullcontext()


def _fp32_up(t: torch.Tensor) -> torch.Tensor:
    """At least fp32: bf16/fp16 go up to fp32, fp64 stays fp64."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


class Norm(nn.Module):
    """Base class: records the options every normalizer shares.

    Statistics are computed in at least fp32 (fp64 input stays fp64).
    """

    name: str = ""
    formula: str = ""
    paper: str = ""
    OPTIONS: dict[str, float] = {}
    has_bias: bool = True  # whether `bias=True` means anything for this normalizer
    reads_role: bool = False  # whether the init depends on where the norm sits (make_norm's `role`)
    # how the report draws its runs' loss curves (a matplotlib linestyle; the colour is the scheme's): solid, as
    # LayerNorm's, unless a normalizer declares its own
    linestyle: str | tuple = "-"

    def __init__(self, d: int, eps: float = 1e-5, affine: bool = True, bias: bool = False):
        super().__init__()
        if bias and not self.has_bias:
            raise ValueError(f"normalizer {self.name!r} has no bias; set norm_bias = false")
        if bias and not affine:
            raise ValueError(f"normalizer {self.name!r}: a bias needs norm_affine = true")
        self.d, self.eps, self.affine = d, eps, affine
        self.weight = nn.Parameter(torch.ones(d)) if affine else None
        self.bias = nn.Parameter(torch.zeros(d)) if affine and bias else None

    def extra_repr(self) -> str:
        return f"{self.d}, eps={self.eps}, affine={self.affine}, bias={self.bias is not None}"

    # the fused CPU kernel of this formula (normlab.nn.kernels), where one exists: (x, weight, bias, eps) → y
    fused = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused is not None and kernels.use_fast(self.name, x):
            return type(self).fused(x, self.weight, self.bias, self.eps)
        return self.reference_forward(x)

    def reference_forward(self, x: torch.Tensor) -> torch.Tensor:
        """The plain torch code: `normalize` on x in at least fp32, autocast off, back in x's dtype."""
        with _fp32_region(x):
            y = self.normalize(_fp32_up(x))
        return y.to(x.dtype)

    def normalize(self, xf: torch.Tensor) -> torch.Tensor:
        """The formula, on xf already in at least fp32."""
        raise NotImplementedError

    def _affine(self, y: torch.Tensor) -> torch.Tensor:
        """y * weight + bias, in y's (at least fp32) dtype."""
        if self.weight is not None:
            y = y * self.weight.to(y.dtype)
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        return y


@NORMS.register("layernorm")
class LayerNorm(Norm):
    """LayerNorm (Ba et al. 2016, arXiv 1607.06450): centre, scale to unit variance, affine."""

    name, formula, paper = "layernorm", "γ · (x − mean(x)) / sqrt(var(x) + ε) + β", "arXiv 1607.06450"

    fused = staticmethod(kernels.fast_layer_norm)

    def normalize(self, xf: torch.Tensor) -> torch.Tensor:
        w = None if self.weight is None else self.weight.to(xf.dtype)
        b = None if self.bias is None else self.bias.to(xf.dtype)
        if w is not None and w.dim() > 1:  # a stack's (K, 1, d) gains (normlab.nn.stacked): affine after
            return self._affine(F.layer_norm(xf, (self.d,), None, None, self.eps))
        return F.layer_norm(xf, (self.d,), w, b, self.eps)  # fused native kernel


@NORMS.register("rmsnorm")
class RMSNorm(Norm):
    """RMSNorm (Zhang & Sennrich 2019, arXiv 1910.07467): no mean subtraction, no bias by default."""

    name, formula, paper = "rmsnorm", "γ · x / sqrt(mean(x²) + ε)", "arXiv 1910.07467"
    linestyle = "--"

    fused = staticmethod(kernels.fast_rms_norm)

    def normalize(self, xf: torch.Tensor) -> torch.Tensor:
        return self._affine(xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps))


@NORMS.register("scalenorm")
class ScaleNorm(Norm):
    """ScaleNorm (Nguyen & Salazar 2019, arXiv 1910.05895): project onto a sphere of radius g.

    One scalar g, initialised to sqrt(d) so that the output has unit RMS like
    LayerNorm's; with `affine = false` g stays fixed at sqrt(d).
    """

    name, formula, paper = "scalenorm", "g · x / sqrt(Σx² + ε),  g scalar, init √d", "arXiv 1910.05895"
    linestyle = ":"
    has_bias = False

    def __init__(self, d: int, eps: float = 1e-5, affine: bool = True, bias: bool = False):
        super().__init__(d, eps, affine=False, bias=bias)
        self.affine = affine
        g = torch.tensor(math.sqrt(d))
        if affine:
            self.g = nn.Parameter(g)
        else:
            self.register_buffer("g", g)

    def normalize(self, xf: torch.Tensor) -> torch.Tensor:
        return self.g.to(xf.dtype) * xf * torch.rsqrt(xf.pow(2).sum(-1, keepdim=True) + self.eps)


# DyT's α0 for LLaMA models by width: (width, α0 of the norm before attention, α0 of every other norm: before the
# FFN and the final one). The paper's width table (Zhu et al. 2025, arXiv 2503.10622, §7 "Initialization of α",
# its table of α0 by LLaMA width and depth: 1.0/1.0 at width 1024, 1.0/0.5 at 2048, 0.8/0.2 at 4096, 0.2/0.05 at
# 8192, the same at every depth it lists) and the DyT repository's LLaMA 2 13B launcher for 5120
# (jiachenzhu/DyT other_tasks/LLaMA/README.md: 0.6/0.15; its 7B and 70B launchers agree with the 4096 and 8192
# rows). Width, not depth, sets α0: smaller for wider models, and larger before attention.
DYT_LLAMA_ALPHA0 = ((1024, 1.0, 1.0), (2048, 1.0, 0.5), (4096, 0.8, 0.2), (5120, 0.6, 0.15), (8192, 0.2, 0.05))
ROLES = ("attention", "other")


def dyt_llama_alpha0(d: int, role: str = "other") -> float:
    """α0 for a DyT norm of width d by DyT's LLaMA width table (`DYT_LLAMA_ALPHA0`).

    The row of the widest listed width ≤ d. A model narrower than 1024 (the table's narrowest) takes the 1024 row,
    1.0 / 1.0: the table's trend is that narrower models need an α0 no smaller, so its narrowest row is the value
    it supports; anything larger would be an extrapolation the paper does not make.
    """
    if role not in ROLES:
        raise ValueError(f"normalizer 'dyt': role must be one of {', '.join(ROLES)}; got {role!r}")
    rows = [r for r in DYT_LLAMA_ALPHA0 if r[0] <= d] or [DYT_LLAMA_ALPHA0[0]]
    _, attention, other = rows[-1]
    return attention if role == "attention" else other


@NORMS.register("dyt")
class DyT(Norm):
    """Dynamic Tanh (Zhu et al. 2025, arXiv 2503.10622): an elementwise squashing in place of a norm.

    α is one learnable scalar (init `alpha_init`, 0.5 in the paper), learnable
    also with `affine = false`, which drops only the per-channel γ, β.

    `alpha_init_rule = 1` takes α0 from the width instead, as DyT trains language models (`dyt_llama_alpha0`:
    its paper's LLaMA width table, 1.0 / 1.0 at width ≤ 1024, 0.8 before attention and 0.2 elsewhere at 4096,
    down to 0.2 / 0.05 at 8192).
    The position comes from make_norm's `role` ("attention" or "other", default "other"). The default,
    `alpha_init_rule = 0`, is α0 = `alpha_init`, as before.
    """

    name, formula, paper = "dyt", "γ · tanh(α · x) + β,  α scalar, init 0.5", "arXiv 2503.10622"
    linestyle = "-."
    OPTIONS = {"alpha_init": 0.5, "alpha_init_rule": 0.0}
    reads_role = True

    def __init__(self, d: int, eps: float = 1e-5, affine: bool = True, bias: bool = False,
                 alpha_init: float | None = None, alpha_init_rule: float = 0.0, role: str = "other"):
        super().__init__(d, eps, affine, bias)
        self.alpha = nn.Parameter(torch.tensor(self._alpha0(d, alpha_init, alpha_init_rule, role)))

    @staticmethod
    def _alpha0(d: int, alpha_init: float | None, rule: float, role: str) -> float:
        if rule not in (0, 1):
            raise ValueError(f"normalizer 'dyt': alpha_init_rule must be 0 (α0 = alpha_init) or 1 (α0 from the "
                             f"width, DyT's LLaMA width table); got {rule}")
        if rule == 0:
            return 0.5 if alpha_init is None else float(alpha_init)
        if alpha_init is not None:
            raise ValueError("normalizer 'dyt': alpha_init and alpha_init_rule = 1 both set α0; set one of them")
        return dyt_llama_alpha0(d, role)

    def normalize(self, xf: torch.Tensor) -> torch.Tensor:
        return self._affine(torch.tanh(self.alpha.to(xf.dtype) * xf))


@NORMS.register("derf")
class Derf(Norm):
    """Dynamic erf (Chen et al. 2025, arXiv 2512.10938, Eq. 10): DyT with erf and a learnable shift.

    α and s are one learnable scalar each ("α and s are learnable scalars", the paper's repository
    github.com/zlab-princeton/Derf), with its `Dynamic_erf` defaults α0 = 0.5, s0 = 0 (`alpha_init`,
    `shift_init`); γ (init 1) and β (init 0, with `norm_bias = true`) per channel as in DyT. Both
    scalars stay learnable with `affine = false`, which drops only γ, β. erf itself is bounded and
    zero-centred; α ≤ 0 would flip or flatten it, so it is refused.
    """

    name, formula, paper = "derf", "γ · erf(α · x + s) + β,  α, s scalars, init 0.5, 0", "arXiv 2512.10938"
    linestyle = (0, (5, 1, 1, 1))
    OPTIONS = {"alpha_init": 0.5, "shift_init": 0.0}

    def __init__(self, d: int, eps: float = 1e-5, affine: bool = True, bias: bool = False,
                 alpha_init: float = 0.5, shift_init: float = 0.0):
        super().__init__(d, eps, affine, bias)
        if not (math.isfinite(alpha_init) and alpha_init > 0) or not math.isfinite(shift_init):
            raise ValueError(f"normalizer 'derf': alpha_init must be finite and > 0 and shift_init finite; "
                             f"got alpha_init = {alpha_init}, shift_init = {shift_init}")
        self.alpha = nn.Parameter(torch.tensor(float(alpha_init)))
        self.shift = nn.Parameter(torch.tensor(float(shift_init)))

    def normalize(self, xf: torch.Tensor) -> torch.Tensor:
        return self._affine(torch.erf(self.alpha.to(xf.dtype) * xf + self.shift.to(xf.dtype)))


@NORMS.register("seednorm")
class SeeDNorm(Norm):
    """SeeDNorm (Cai, Zhu et al. 2025, arXiv 2510.22777 §3): RMSNorm whose gain depends on the input.

        SeeDNorm(x) = [tanh(x·βᵀ) · α + γ] ⊙ x / RMS(x),   RMS(x) = √(mean(x²) + ε),  α, β, γ ∈ ℝᵈ

    x·βᵀ is one scalar per token, so the gain moves with the input's norm and direction, which RMSNorm
    throws away. `heads = n` is the paper's multi-head variant (x and β cut into n slices of d/n, each
    slice's dot product scales its own d/n channels; the paper uses it for vision, where one head diverged).
    Init: γ = 1, β = 0, so SeeDNorm *is* RMSNorm at init, α = 1 (`alpha_init`; as read from the paper's
    language-model runs and its α ablation, 0.1 converging slower and 10 unstable). UNVERIFIED: these values were
    not checked against a primary source (no official code was found, and the paper's text was not at hand to
    confirm them); docs/frontier.md lists them as such. The paper's β is the parameter
    `beta`, a projection, not an additive bias: SeeDNorm has none. `affine = false` fixes γ at 1; α and β,
    the self-rescaling, stay learnable. Not reproduced here: the paper's weight decay on α and β (normlab's
    AdamW decays matrices only) and its ViT-only dropout on the dynamic term.
    """

    name, formula = "seednorm", "[tanh(x·βᵀ) · α + γ] ⊙ x / sqrt(mean(x²) + ε),  β init 0, α init 1"
    paper = "arXiv 2510.22777"
    linestyle = (0, (3, 1, 1, 1, 1, 1))
    OPTIONS = {"alpha_init": 1.0, "heads": 1.0}
    has_bias = False

    def __init__(self, d: int, eps: float = 1e-5, affine: bool = True, bias: bool = False,
                 alpha_init: float = 1.0, heads: float = 1.0):
        super().__init__(d, eps, affine, bias)
        if heads != int(heads) or heads < 1 or d % int(heads):
            raise ValueError(f"normalizer 'seednorm': heads must be a whole number ≥ 1 that divides the width "
                             f"{d}; got {heads}")
        if not math.isfinite(alpha_init):
            raise ValueError(f"normalizer 'seednorm': alpha_init must be finite; got {alpha_init}")
        self.heads = int(heads)
        self.alpha = nn.Parameter(torch.full((d,), float(alpha_init)))
        self.beta = nn.Parameter(torch.zeros(d))

    def normalize(self, xf: torch.Tensor) -> torch.Tensor:
        beta = self.beta.to(xf.dtype)  # (d,), or (K, 1, d) in a stack
        seed = (xf.unflatten(-1, (self.heads, -1)) * beta.unflatten(-1, (self.heads, -1))).sum(-1)  # (..., heads)
        scale = torch.tanh(seed).repeat_interleave(self.d // self.heads, dim=-1)  # (..., d)
        gamma = 1.0 if self.weight is None else self.weight.to(xf.dtype)
        gain = scale * self.alpha.to(xf.dtype) + gamma  # (..., d)
        return gain * xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)


@NORMS.register("l2")
class L2Norm(Norm):
    """The projection onto the unit sphere, x / ‖x‖₂: nGPT's Norm (Loshchilov et al. 2024, arXiv 2410.01131
    §2.1), with no gain and no bias. ‖x‖ is floored at ε, so a zero vector stays zero. Unlike RMSNorm's output
    (norm √d) its output has norm 1: a unit vector, which nGPT's update on the sphere needs."""

    name, formula, paper = "l2", "x / max(‖x‖₂, ε)", "arXiv 2410.01131"
    has_bias = False

    def __init__(self, d: int, eps: float = 1e-5, affine: bool = True, bias: bool = False):
        super().__init__(d, eps, affine=False, bias=bias)

    def normalize(self, xf: torch.Tensor) -> torch.Tensor:
        return F.normalize(xf, dim=-1, eps=self.eps)


@NORMS.register("none")
class NoNorm(Norm):
    """The control: identity, no parameters."""

    name, formula = "none", "x"
    linestyle = (0, (1, 1))
    has_bias = False

    def __init__(self, d: int, eps: float = 1e-5, affine: bool = True, bias: bool = False):
        super().__init__(d, eps, affine=False, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def make_norm(name: str, d: int, eps: float = 1e-5, affine: bool = True, bias: bool = False,
              options: dict[str, float] | None = None, role: str = "other") -> Norm:
    """Build the normalizer registered as `name`; `options` are checked against its OPTIONS.

    `role` is where the norm sits, "attention" (the input norm of an attention sub-layer) or "other";
    only a normalizer whose init depends on it (`reads_role`: DyT's width rule) reads it.
    """
    cls = NORMS.get(name)
    options = dict(options or {})
    check_options("normalizer", name, options, cls.OPTIONS)
    if role not in ROLES:
        raise ValueError(f"a norm's role is one of {', '.join(ROLES)}; got {role!r}")
    placed = {"role": role} if cls.reads_role else {}
    return cls(d, eps=eps, affine=affine, bias=bias, **options, **placed)
