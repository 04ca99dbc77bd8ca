"""Multi-head causal self-attention."""
from __future__ import annotations

from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    """softmax(QKᵀ/√d_head + causal mask) V, through `F.scaled_dot_product_attention`.

    `inner_norm` sits between the head mixing and the output projection
    (Sub-LN / Magneto); it is an Identity in every other scheme.
    """

    def __init__(self, d_model: int, n_head: int, bias: bool, dropout: float,
                 inner_norm: nn.Module | None = None):
        super().__init__()
        self.n_head, self.d_model, self.dropout = n_head, d_model, dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)  # q, k, v stacked on the out dim
        self.inner_norm = inner_norm if inner_norm is not None else nn.Identity()
        self.proj = nn.Linear(d_model, d_model, bias=bias)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble heads side by side
        return self.resid_dropout(self.proj(self.inner_norm(y)))

    def projections(self) -> Iterator[tuple[str, torch.Tensor]]:
        """(role, weight) for init: q, k, v are row blocks of the fused qkv weight."""
        q, k, v = self.qkv.weight.split(self.d_model, dim=0)
        yield from (("q", q), ("k", k), ("v", v), ("out", self.proj.weight))
