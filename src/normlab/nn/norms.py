"""Normalizers, looked up by name in `NORMS`.

Every normalizer computes its statistics in fp32, also under bf16/fp16 autocast,
and returns the input's dtype. All take the same constructor arguments:
`(d, eps=..., affine=..., bias=..., **options)`; `options` are the few
normalizer-specific knobs (e.g. DyT's `alpha_init`), declared in `OPTIONS`.
"""
from __future__ import annotations

import math
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import nn

from normlab.registry import Registry, check_options

NORMS: Registry[type["Norm"]] = Registry("normalizer")


def _fp32_region(x: torch.Tensor):
    """Autocast off: statistics are computed in fp32 whatever the ambient autocast says."""
    if torch.is_autocast_enabled(x.device.type):
        return torch.autocast(device_type=x.device.type, enabled=False)
    return nullcontext()


class Norm(nn.Module):
    """Base class: records the options every normalizer shares."""

    name: str = ""
    formula: str = ""
    paper: str = ""
    OPTIONS: dict[str, float] = {}
    has_bias: bool = True  # whether `bias=True` means anything for this normalizer

    def __init__(self, d: int, eps: float = 1e-5, affine: bool = True, bias: bool = False):
        super().__init__()
        if bias and not self.has_bias:
            raise ValueError(f"normalizer {self.name!r} has no bias; set norm_bias = false")
        self.d, self.eps, self.affine = d, eps, affine
        self.weight = nn.Parameter(torch.ones(d)) if affine else None
        self.bias = nn.Parameter(torch.zeros(d)) if affine and bias else None

    def extra_repr(self) -> str:
        return f"{self.d}, eps={self.eps}, affine={self.affine}, bias={self.bias is not None}"

    def _affine(self, y: torch.Tensor) -> torch.Tensor:
        """y * weight + bias, in fp32."""
        if self.weight is not None:
            y = y * self.weight.float()
        if self.bias is not None:
            y = y + self.bias.float()
        return y


@NORMS.register("layernorm")
class LayerNorm(Norm):
    """LayerNorm (Ba et al. 2016, arXiv 1607.06450): centre, scale to unit variance, affine."""

    name = "layernorm"
    formula = "γ · (x − mean(x)) / sqrt(var(x) + ε) + β"
    paper = "arXiv 1607.06450"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with _fp32_region(x):
            w = None if self.weight is None else self.weight.float()
            b = None if self.bias is None else self.bias.float()
            y = F.layer_norm(x.float(), (self.d,), w, b, self.eps)  # fused native kernel
        return y.to(x.dtype)


@NORMS.register("rmsnorm")
class RMSNorm(Norm):
    """RMSNorm (Zhang & Sennrich 2019, arXiv 1910.07467): no mean subtraction, no bias by default."""

    name = "rmsnorm"
    formula = "γ · x / sqrt(mean(x²) + ε)"
    paper = "arXiv 1910.07467"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with _fp32_region(x):
            xf = x.float()
            y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
            y = self._affine(y)
        return y.to(x.dtype)


@NORMS.register("scalenorm")
class ScaleNorm(Norm):
    """ScaleNorm (Nguyen & Salazar 2019, arXiv 1910.05895): project onto a sphere of radius g.

    One scalar g, initialised to sqrt(d) so that the output has unit RMS like
    LayerNorm's; with `affine = false` g stays fixed at sqrt(d).
    """

    name = "scalenorm"
    formula = "g · x / sqrt(Σx² + ε),  g scalar, init √d"
    paper = "arXiv 1910.05895"
    has_bias = False

    def __init__(self, d: int, eps: float = 1e-5, affine: bool = True, bias: bool = False):
        super().__init__(d, eps, affine=False, bias=bias)
        self.affine = affine
        g = torch.tensor(math.sqrt(d))
        if affine:
            self.g = nn.Parameter(g)
        else:
            self.register_buffer("g", g)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with _fp32_region(x):
            xf = x.float()
            y = self.g.float() * xf * torch.rsqrt(xf.pow(2).sum(-1, keepdim=True) + self.eps)
        return y.to(x.dtype)


@NORMS.register("dyt")
class DyT(Norm):
    """Dynamic Tanh (Zhu et al. 2025, arXiv 2503.10622): an elementwise squashing in place of a norm.

    α is one learnable scalar (init `alpha_init`, 0.5 in the paper); γ, β per channel.
    """

    name = "dyt"
    formula = "γ · tanh(α · x) + β,  α scalar, init 0.5"
    paper = "arXiv 2503.10622"
    OPTIONS = {"alpha_init": 0.5}

    def __init__(self, d: int, eps: float = 1e-5, affine: bool = True, bias: bool = False,
                 alpha_init: float = 0.5):
        super().__init__(d, eps, affine, bias)
        self.alpha = nn.Parameter(torch.tensor(float(alpha_init)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with _fp32_region(x):
            y = self._affine(torch.tanh(self.alpha.float() * x.float()))
        return y.to(x.dtype)


@NORMS.register("none")
class NoNorm(Norm):
    """The control: identity, no parameters."""

    name = "none"
    formula = "x"
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
