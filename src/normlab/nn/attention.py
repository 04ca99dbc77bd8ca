"""Multi-head attention: causal or bidirectional self-attention, and cross-attention (encoder–decoder)."""
from __future__ import annotations

from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn


# From this T·head_size on, torch's CPU flash attention in bf16 is at least as fast as in fp32.
CPU_BF16_MIN_WORK = 256 * 64


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout_p: float,
                     is_causal: bool = True) -> torch.Tensor:
    """SDPA (causal unless told otherwise). On CPU, small bf16 attention (bf16 autocast) runs in fp32 and
    returns bf16.

    Why: torch's CPU flash-attention *backward* in bf16 is slow for short sequences (torch
    2.13, fwd+bwd, 1 thread, bf16 vs bf16 cast to fp32: (12, 4, T=64, hs=32) 6.9 vs 1.7 ms,
    (8, 8, 128, 64) 21 vs 14 ms, (8, 4, 192, 64) equal, (16, 6, 256, 64) 51 vs 65 ms,
    (4, 4, 1024, 64) 57 vs 97 ms); it was half of a bf16 step of the nanoGPT CPU recipe.
    The projections around it keep bf16's fast matmuls either way. Re-measure with
    benchmarks/bf16_attention.py (at 2 threads the break-even came out lower, T·hs ≈ 8–12k).
    """
    if q.device.type == "cpu" and q.dtype == torch.bfloat16 and q.size(-2) * q.size(-1) < CPU_BF16_MIN_WORK:
        with torch.autocast("cpu", enabled=False):
            y = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), dropout_p=dropout_p,
                                               is_causal=is_causal)
        return y.to(q.dtype)
    return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=is_causal)


class CausalSelfAttention(nn.Module):
    """softmax(QKᵀ/√d_head + causal mask) V, through `F.scaled_dot_product_attention`.

    `causal=False` drops the mask: an encoder's bidirectional self-attention.
    `inner_norm` sits between the head mixing and the output projection
    (Sub-LN / Magneto); it is an Identity in every other scheme.
    """

    def __init__(self, d_model: int, n_head: int, bias: bool, dropout: float,
                 inner_norm: nn.Module | None = None, causal: bool = True):
        super().__init__()
        self.n_head, self.d_model, self.dropout, self.causal = n_head, d_model, dropout, causal
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)  # q, k, v stacked on the out dim
        self.inner_norm = inner_norm if inner_norm is not None else nn.Identity()
        self.proj = nn.Linear(d_model, d_model, bias=bias)
        self.resid_dropout = nn.Dropout(dropout)

    def heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v of input x (B, T, C), each split into heads: (B, nh, T, hs)."""
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        return tuple(t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.heads(x)  # (B, nh, T, hs) each
        p = self.dropout if self.training else 0.0
        y = causal_attention(q, k, v, p, self.causal)  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble heads side by side
        return self.resid_dropout(self.proj(self.inner_norm(y)))

    def projections(self) -> Iterator[tuple[str, torch.Tensor]]:
        """(role, weight) for init: q, k, v are row blocks of the fused qkv weight."""
        q, k, v = self.qkv.weight.split(self.d_model, dim=0)
        yield from (("q", q), ("k", k), ("v", v), ("out", self.proj.weight))

    def extra_repr(self) -> str:
        return f"causal={self.causal}"


class CrossAttention(nn.Module):
    """softmax(Q(x)K(m)ᵀ/√d_head) V(m): the decoder's stream x attends to the encoder's output m (no mask).

    A sub-layer like the others: the scheme wraps it around the decoder's residual stream, normalizing x
    where it normalizes any sub-layer's input; m arrives as the encoder stack left it (after its final norm).
    """

    def __init__(self, d_model: int, n_head: int, bias: bool, dropout: float,
                 inner_norm: nn.Module | None = None):
        super().__init__()
        self.n_head, self.d_model, self.dropout = n_head, d_model, dropout
        self.q = nn.Linear(d_model, d_model, bias=bias)
        self.kv = nn.Linear(d_model, 2 * d_model, bias=bias)  # k, v stacked on the out dim
        self.inner_norm = inner_norm if inner_norm is not None else nn.Identity()
        self.proj = nn.Linear(d_model, d_model, bias=bias)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        S = memory.size(1)
        hs = C // self.n_head
        q = self.q(x).view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k, v = (t.view(B, S, self.n_head, hs).transpose(1, 2) for t in self.kv(memory).split(C, dim=2))
        p = self.dropout if self.training else 0.0
        y = causal_attention(q, k, v, p, is_causal=False)  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.proj(self.inner_norm(y)))

    def projections(self) -> Iterator[tuple[str, torch.Tensor]]:
        k, v = self.kv.weight.split(self.d_model, dim=0)
        yield from (("q", self.q.weight), ("k", k), ("v", v), ("out", self.proj.weight))
