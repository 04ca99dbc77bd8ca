"""Position-wise feed-forward networks: GELU MLP and SwiGLU."""
from __future__ import annotations

from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from normlab.registry import Registry

MLPS: Registry[type[nn.Module]] = Registry("mlp")


class _MLPBase(nn.Module):
    """d → hidden (→ inner_norm) → d. `inner_norm` is Sub-LN's norm after the activation."""

    n_in: int = 1  # how many d → hidden projections `fc` stacks

    def __init__(self, d_model: int, d_ff: int, bias: bool, dropout: float,
                 inner_norm: nn.Module | None = None, gelu_approximate: str = "none"):
        super().__init__()
        self.d_ff, self.gelu_approximate = d_ff, gelu_approximate
        self.fc = nn.Linear(d_model, self.n_in * d_ff, bias=bias)
        self.inner_norm = inner_norm if inner_norm is not None else nn.Identity()
        self.proj = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.activate(self.fc(x))  # (B, T, d_ff)
        return self.dropout(self.proj(self.inner_norm(h)))

    def projections(self) -> Iterator[tuple[str, torch.Tensor]]:
        for w in self.fc.weight.split(self.d_ff, dim=0):
            yield "ffn_in", w
        yield "ffn_out", self.proj.weight


@MLPS.register("gelu")
class GeluMLP(_MLPBase):
    """GELU(x W₁) W₂ (Hendrycks & Gimpel 2016, arXiv 1606.08415): the exact erf form (BERT, nanoGPT), or
    `gelu_approximate = "tanh"`, the tanh approximation GPT-2 was trained with (HF's `gelu_new`)."""

    def activate(self, h: torch.Tensor) -> torch.Tensor:
        return F.gelu(h, approximate=self.gelu_approximate)


@MLPS.register("swiglu")
class SwiGLU(_MLPBase):
    """(SiLU(x W₁) ⊙ x W₃) W₂ (Shazeer 2020, arXiv 2002.05202; LLaMA)."""

    n_in = 2

    def activate(self, h: torch.Tensor) -> torch.Tensor:
        gate, up = h.chunk(2, dim=-1)
        return F.silu(gate) * up


@MLPS.register("geglu")
class GeGLU(_MLPBase):
    """(GELU(x W₁) ⊙ x W₃) W₂ (Shazeer 2020, arXiv 2002.05202; Gemma, with GELU's tanh form)."""

    n_in = 2

    def activate(self, h: torch.Tensor) -> torch.Tensor:
        gate, up = h.chunk(2, dim=-1)
        return F.gelu(gate, approximate=self.gelu_approximate) * up
