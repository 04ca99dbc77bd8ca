"""Normalizers, looked up by name in `NORMS`.

Every normalizer computes its statistics in fp32, also under bf16/fp16 autocast,
and returns the input's dtype. All take the same constructor arguments:
`(d, eps=..., affine=..., bias=..., **options)`; `options` are the few
normalizer-specific knobs (e.g. DyT's `alpha_init`), declared in `OPTIONS`.

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


@NORMS.register("dyt")
class DyT(Norm):
    """Dynamic Tanh (Zhu et al. 2025, arXiv 2503.10622): an elementwise squashing in place of a norm.

    α is one learnable scalar (init `alpha_init`, 0.5 in the paper), learnable
    also with `affine = false`, which drops only the per-channel γ, β.
    """

    name, formula, paper = "dyt", "γ · tanh(α · x) + β,  α scalar, init 0.5", "arXiv 2503.10622"
    OPTIONS = {"alpha_init": 0.5}

    def __init__(self, d: int, eps: float = 1e-5, affine: bool = True, bias: bool = False,
                 alpha_init: float = 0.5):
        super().__init__(d, eps, affine, bias)
        self.alpha = nn.Parameter(torch.tensor(float(alpha_init)))

    def normalize(self, xf: torch.Tensor) -> torch.Tensor:
        return self._affine(torch.tanh(self.alpha.to(xf.dtype) * xf))


@NORMS.register("none")
class NoNorm(Norm):
    """The control: identity, no parameters."""

    name, formula = "none", "x"
    has_bias = False

    def __init__(self, d: int, eps: float = 1e-5, affine: bool = True, bias: bool = False):
        super().__init__(d, eps, affine=False, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def make_norm(name: str, d: int, eps: float = 1e-5, affine: bool = True, bias: bool = False,
              options: dict[str, float] | None = None) -> Norm:
    """Build the normalizer registered as `name`; `options` are checked against its OPTIONS."""
    cls = NORMS.get(name)
    options = dict(options or {})
    check_options("normalizer", name, options, cls.OPTIONS)
    return cls(d, eps=eps, affine=affine, bias=bias, **options)
