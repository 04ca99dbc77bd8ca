"""Multi-head attention: causal or bidirectional self-attention, and cross-attention (encoder–decoder)."""
from __future__ import annotations

from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn


# From this T·head_size on, torch's CPU flash attention in bf16 is at least as fast as in fp32.
CPU_BF16_MIN_WORK = 256 * 64


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout_p: float,
                     is_causal: bool = True, scale: float | None = None) -> torch.Tensor:
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
                                               is_causal=is_causal, scale=scale)
        return y.to(q.dtype)
    return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=is_causal, scale=scale)


def softcapped_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout_p: float, is_causal: bool,
                         scale: float, cap: float) -> torch.Tensor:
    """softmax(cap · tanh(QKᵀ·scale / cap) + mask) V: attention-logit soft-capping (Gemma 2, arXiv 2408.00118
    §2), written out because SDPA has no hook between the scores and the softmax. Softmax in fp32."""
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale  # (B, nh, T, S)
    scores = torch.tanh(scores / cap) * cap
    if is_causal:
        T, S = scores.shape[-2:]
        scores = scores.masked_fill(torch.ones(T, S, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    weights = F.dropout(F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype), dropout_p)
    return torch.matmul(weights, v)


class Rotary(nn.Module):
    """Rotary position embedding (RoPE, Su et al. 2021, arXiv 2104.09864; LLaMA): q and k of each head are
    rotated by an angle proportional to their position, so q·k depends on positions only through their
    difference. Pairs are (i, i + r/2), the half-split layout of GPT-NeoX and Hugging Face's Llama, with
    frequencies θ^(−2i/r) over the first r = ⌊fraction · hs⌋ channels of a head; the rest pass unrotated
    (GPT-NeoX turns a quarter, arXiv 2204.06745 §2.1).
    """

    def __init__(self, head_dim: int, theta: float = 10000.0, fraction: float = 1.0):
        super().__init__()
        self.head_dim, self.theta = head_dim, theta
        self.rot_dim = int(head_dim * fraction)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The angles in fp32 whatever the model's dtype (a bf16 frequency is off by radians at position 1000)."""
        T = q.size(-2)
        exponents = torch.arange(0, self.rot_dim, 2, dtype=torch.int64, device=q.device).float() / self.rot_dim
        inv_freq = 1.0 / self.theta ** exponents  # (r/2,)
        angles = torch.outer(torch.arange(T, device=q.device, dtype=torch.float32), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)  # (T, r)
        cos, sin = angles.cos().to(q.dtype), angles.sin().to(q.dtype)
        return self._turn(q, cos, sin), self._turn(k, cos, sin)

    def _turn(self, t: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        if self.rot_dim == self.head_dim:
            return t * cos + _rotate_half(t) * sin
        turned, kept = t[..., :self.rot_dim], t[..., self.rot_dim:]
        return torch.cat((turned * cos + _rotate_half(turned) * sin, kept), dim=-1)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, rotated={self.rot_dim}, theta={self.theta:g}"


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class CausalSelfAttention(nn.Module):
    """softmax(QKᵀ/√d_head + causal mask) V, through `F.scaled_dot_product_attention`.

    `causal=False` drops the mask: an encoder's bidirectional self-attention.
    `inner_norm` sits between the head mixing and the output projection
    (Sub-LN / Magneto); it is an Identity in every other scheme.

    Options the Hugging Face families need, each off by default:
    `n_kv_head` < n_head: grouped-query attention (Ainslie et al. 2023, arXiv 2305.13245): each group of
    n_head / n_kv_head query heads shares one key and value head. `head_dim`: the head width when it is not
    d_model / n_head (Qwen3). `qk_norm`: (q_norm, k_norm, "per_head" | "full_width"), QK-norm (Dehghani et
    al. 2023, arXiv 2302.05442): q and k normalized per head (Qwen3, Gemma-3) or over their full width
    (OLMo-2), before the rotation; `v_norm`: v normalized the same way (HybridNorm's QKV-norm, arXiv 2503.04598,
    per head in its code). `rotary`: RoPE instead of learned positions. `scale`: the scores' factor
    when it is not 1/√d_head (Gemma 2's query_pre_attn_scalar^-½); `softcap`: attention-logit soft-capping.
    """

    def __init__(self, d_model: int, n_head: int, bias: bool, dropout: float,
                 inner_norm: nn.Module | None = None, causal: bool = True, *, n_kv_head: int | None = None,
                 head_dim: int | None = None, qkv_bias: bool | None = None,
                 qk_norm: tuple[nn.Module, nn.Module, str] | None = None, v_norm: nn.Module | None = None,
                 rotary: Rotary | None = None,
                 scale: float | None = None, softcap: float | None = None):
        super().__init__()
        self.n_head, self.d_model, self.dropout, self.causal = n_head, d_model, dropout, causal
        self.n_kv_head = n_kv_head or n_head
        self.head_dim = head_dim or d_model // n_head
        q_width, kv_width = n_head * self.head_dim, self.n_kv_head * self.head_dim
        self.sizes = (q_width, kv_width, kv_width)
        self.qkv = nn.Linear(d_model, sum(self.sizes), bias=bias if qkv_bias is None else qkv_bias)  # q, k, v
        self.qk_norm = qk_norm[2] if qk_norm else "none"
        if qk_norm:
            self.q_norm, self.k_norm = qk_norm[0], qk_norm[1]
        if v_norm is not None and not qk_norm:
            raise ValueError("v_norm is QKV-norm's third norm: it needs q_norm and k_norm (qk_norm) too")
        self.v_norm = v_norm  # None: a plain attribute, no module and no state-dict entry
        self.rotary = rotary
        self.scale, self.softcap = scale, softcap  # None: 1/√d_head, no soft-capping
        self.inner_norm = inner_norm if inner_norm is not None else nn.Identity()
        self.proj = nn.Linear(q_width, d_model, bias=bias)
        self.resid_dropout = nn.Dropout(dropout)

    def heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v of input x (B, T, C), each split into heads: (B, nh, T, hs); grouped k, v repeated to nh."""
        B, T, _ = x.shape
        q, k, v = self.qkv(x).split(self.sizes, dim=2)
        if self.qk_norm == "full_width":
            q, k, v = self._normalized(q, k, v)
        q, k, v = (t.reshape(B, T, -1, self.head_dim) for t in (q, k, v))  # (B, T, heads, hs)
        if self.qk_norm == "per_head":
            q, k, v = self._normalized(q, k, v)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, heads, T, hs)
        if self.rotary is not None:
            q, k = self.rotary(q, k)
        if self.n_kv_head != self.n_head:
            group = self.n_head // self.n_kv_head
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        return q, k, v

    def _normalized(self, q, k, v):
        """QK-norm, and QKV-norm where there is a v_norm."""
        return self.q_norm(q), self.k_norm(k), (v if self.v_norm is None else self.v_norm(v))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.heads(x)  # (B, nh, T, hs) each
        p = self.dropout if self.training else 0.0
        if self.softcap is None:
            y = causal_attention(q, k, v, p, self.causal, self.scale)  # (B, nh, T, hs)
        else:
            y = softcapped_attention(q, k, v, p, self.causal, self.scale or self.head_dim ** -0.5, self.softcap)
        y = y.transpose(1, 2).contiguous().view(B, T, -1)  # re-assemble heads side by side
        return self.resid_dropout(self.proj(self.inner_norm(y)))

    def projections(self) -> Iterator[tuple[str, torch.Tensor]]:
        """(role, weight) for init: q, k, v are row blocks of the fused qkv weight."""
        q, k, v = self.qkv.weight.split(self.sizes, dim=0)
        yield from (("q", q), ("k", k), ("v", v), ("out", self.proj.weight))

    def extra_repr(self) -> str:
        extra = "" if self.n_kv_head == self.n_head else f", n_kv_head={self.n_kv_head}"
        qk = "" if self.qk_norm == "none" else f", {'qk' if self.v_norm is None else 'qkv'}_norm={self.qk_norm}"
        return f"causal={self.causal}{extra}{qk}"


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
