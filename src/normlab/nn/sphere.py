"""nGPT's pieces (Loshchilov et al. 2024, "nGPT: Normalized Transformer with Representation Learning on the
Hypersphere", arXiv 2410.01131): the learned scaling vectors, the attention and MLP that carry them, and the
projection of the weights back onto the unit sphere after every optimizer step.

The scheme itself (`ngpt` in `normlab.nn.schemes`) owns the residual update on the sphere; this module holds what
it puts inside the sub-layers and around the head:

    q, k  ← Norm(RoPE(q)) ⊙ s_qk,  Norm(RoPE(k)) ⊙ s_qk;  scores × √d_head (§2.3.2, Eq. 15–16)
    u, v  ← (h W_u) ⊙ s_u,  (h W_v) ⊙ s_v · √d_model;  MLP(h) = (u ⊙ SiLU(v)) W_o (§2.4.2, Eq. 20–21)
    z     ← (E_out h) ⊙ s_z (§2.5, Eq. 23)

Every s is stored as its `scale` times ones and read as stored · (init / scale) (§2.5: "s_init and s_scale"),
so that Adam's steps on it are `scale`-sized; the paper's values are each module's defaults.
"""
from __future__ import annotations

import math
from typing import ClassVar, Iterable

import torch
import torch.nn.functional as F
from torch import nn

from normlab.nn.attention import CausalSelfAttention
from normlab.nn.mlp import SwiGLU


class Scale(nn.Module):
    """A learned scaling vector s of `shape`, nGPT's parameterization (arXiv 2410.01131 §2.5): the parameter
    starts at `scale` everywhere and is read as parameter · (init / scale), so s = init at step 0.

    Never weight-decayed, whatever its shape (`no_weight_decay`): decay would pull every s toward 0, which
    nGPT's parameterization does not mean (the paper drops weight decay altogether, §2.6, and its code's
    `configure_optimizers` decays 2-D tensors only, which all its s are not). s_qk is (heads, 1, head_dim)
    here, so a rule by dimension alone would decay it."""

    no_weight_decay: ClassVar[bool] = True
    """Read by the optimizer (`normlab.train.optim.build_optimizer`): this module's parameters are not decayed."""

    def __init__(self, shape: int | tuple[int, ...], init: float, scale: float):
        super().__init__()
        if not (init > 0 and scale > 0):
            raise ValueError(f"a scaling vector needs init > 0 and scale > 0; got init = {init}, scale = {scale}")
        self.init, self.scale = float(init), float(scale)
        self.weight = nn.Parameter(torch.full(shape if isinstance(shape, tuple) else (shape,), self.scale))

    def value(self) -> torch.Tensor:
        return self.weight * (self.init / self.scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.value().to(x.dtype)

    def extra_repr(self) -> str:
        return f"{tuple(self.weight.shape)}, init={self.init:g}, scale={self.scale:g}"


class SphereAttention(CausalSelfAttention):
    """nGPT's self-attention (arXiv 2410.01131 §2.3.2): each head's q and k are rotated, put on the unit sphere
    by `unit` and scaled by s_qk (init 1, scale 1/√d_model, one value per head and channel); their dot product
    is a cosine, so the scores are multiplied by √d_head, not divided (Eq. 16)."""

    def __init__(self, d_model: int, n_head: int, dropout: float, unit: nn.Module, causal: bool = True, *,
                 n_kv_head: int | None = None, head_dim: int | None = None, rotary=None):
        super().__init__(d_model, n_head, False, dropout, None, causal, n_kv_head=n_kv_head, head_dim=head_dim,
                         rotary=rotary, scale=(head_dim or d_model // n_head) ** 0.5)
        self.unit = unit
        self.s_qk = Scale((n_head, 1, self.head_dim), 1.0, d_model ** -0.5)  # broadcast over (B, nh, T, hs)

    def heads(self, x):
        q, k, v = super().heads(x)  # (B, nh, T, hs), rotated
        return self.s_qk(self.unit(q)), self.s_qk(self.unit(k)), v


class SphereSwiGLU(SwiGLU):
    """nGPT's MLP (arXiv 2410.01131 §2.4.2, Eq. 20–21): SwiGLU with u scaled by s_u and v, SiLU's input, by
    s_v · √d_model (both init 1, scale 1), which keeps SiLU out of its linear regime for inputs from unit
    vectors. The paper scales v alone; its reference code scales u by √d_model too, which the normalization of
    the MLP's output undoes."""

    def __init__(self, d_model: int, d_ff: int, dropout: float):
        super().__init__(d_model, d_ff, False, dropout)
        self.s_u, self.s_v = Scale(d_ff, 1.0, 1.0), Scale(d_ff, 1.0, 1.0)
        self.sqrt_d = math.sqrt(d_model)

    def activate(self, h):
        v, u = h.chunk(2, dim=-1)  # SwiGLU's gate (SiLU's input) is the first half of fc
        return F.silu(self.s_v(v) * self.sqrt_d) * self.s_u(u)


# the projections nGPT normalizes along their input dimension (each row a d_model vector) and those it normalizes
# along their output dimension (each column one): the model's embedding dimension in both cases (its code's
# `normalize_matrices`)
READS_STREAM, WRITES_STREAM = ("q", "k", "v", "ffn_in"), ("out", "ffn_out")


@torch.no_grad()
def project(tables: Iterable[torch.Tensor], projections: Iterable[tuple[str, torch.Tensor]]) -> None:
    """Put every embedding-dimension vector back on the unit sphere: the rows of the embedding tables and of
    the stream-reading projections, the columns of the stream-writing ones (arXiv 2410.01131 §2.6, step 3 of
    its recipe: "normalize all matrices after each batch pass")."""
    for w in tables:
        w.copy_(F.normalize(w.float(), dim=-1).to(w.dtype))
    for role, w in projections:
        dim = 1 if role in READS_STREAM else 0 if role in WRITES_STREAM else None
        if dim is None:
            raise ValueError(f"nGPT: no rule for a projection of role {role!r}; known: "
                             f"{', '.join(READS_STREAM + WRITES_STREAM)}")
        w.copy_(F.normalize(w.float(), dim=dim).to(w.dtype))
