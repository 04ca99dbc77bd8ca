"""A Transformer block: attention then MLP, each wrapped around the residual by the scheme."""
from __future__ import annotations

import functools

import torch
from torch import nn

from normlab.nn.attention import CausalSelfAttention, CrossAttention, Rotary
from normlab.nn.config import ModelConfig
from normlab.nn.mlp import MLPS
from normlab.nn.norms import make_norm
from normlab.nn.schemes import Scheme
from normlab.nn.sphere import SphereAttention, SphereSwiGLU


def norm_factory(cfg: ModelConfig, d: int, role: str = "other"):
    """A zero-argument function that builds one of the config's normalizers of width d; `role` "attention":
    a norm around the attention sub-layer (DyT's width rule inits it apart)."""
    return functools.partial(make_norm, cfg.norm, d, eps=cfg.norm_eps, affine=cfg.norm_affine,
                             bias=cfg.resolved_norm_bias(), options=cfg.norm_options, role=role)


def self_attention(cfg: ModelConfig, inner_norm: nn.Module | None, causal: bool,
                   qkv_norm: bool = False) -> CausalSelfAttention:
    """The config's self-attention: heads, grouped k/v, QK-norm and rotary positions as it names them;
    `qkv_norm`: q, k and v each normalized per head (a scheme's QKV-norm, `Scheme.qkv_norm`; such a scheme
    requires qk_norm = 'none', which the config checked)."""
    mode = "per_head" if qkv_norm else cfg.qk_norm
    qk_norm = v_norm = None
    if mode != "none":
        q_width = cfg.head_dim if mode == "per_head" else cfg.n_head * cfg.head_dim
        k_width = cfg.head_dim if mode == "per_head" else (cfg.n_kv_head or cfg.n_head) * cfg.head_dim
        qk_norm = (norm_factory(cfg, q_width)(), norm_factory(cfg, k_width)(), mode)
        v_norm = norm_factory(cfg, k_width)() if qkv_norm else None
    rotary = Rotary(cfg.head_dim, cfg.rope_theta, cfg.rope_fraction) if cfg.positions == "rope" else None
    return CausalSelfAttention(cfg.d_model, cfg.n_head, cfg.bias, cfg.dropout, inner_norm, causal=causal,
                               n_kv_head=cfg.n_kv_head, head_dim=cfg.d_head, qkv_bias=cfg.qkv_bias,
                               qk_norm=qk_norm, v_norm=v_norm, rotary=rotary, scale=cfg.attn_scale,
                               softcap=cfg.attn_softcap)


class Block(nn.Module):
    """x → attn-residual [→ cross-attn-residual] → mlp-residual; where the norms go is the scheme's business,
    told which sub-layer it wraps, and so is how the residuals combine (`scheme.combine`: one after another, or
    side by side in a parallel block).

        x ─► Residual(attention) ─► [Residual(cross-attention to m)] ─► Residual(MLP) ─► x'

    `causal=False`: bidirectional self-attention (an encoder). `cross=True`: a decoder block of an
    encoder–decoder, whose second sub-layer attends to the encoder's output m.
    """

    def __init__(self, cfg: ModelConfig, layer: int, scheme: Scheme, causal: bool = True, cross: bool = False):
        super().__init__()
        self.layer = layer
        d_ff = cfg.resolved_d_ff()
        inner = norm_factory(cfg, cfg.d_model) if scheme.inner_norms else lambda: None
        mlp_inner = norm_factory(cfg, d_ff)() if scheme.inner_norms else None
        if scheme.on_sphere:  # its sub-layers carry the scaling vectors (`facts.requires`: rope, swiglu)
            attention = SphereAttention(cfg.d_model, cfg.n_head, cfg.dropout, norm_factory(cfg, cfg.head_dim)(),
                                        causal, n_kv_head=cfg.n_kv_head, head_dim=cfg.d_head,
                                        rotary=Rotary(cfg.head_dim, cfg.rope_theta, cfg.rope_fraction))
            mlp = SphereSwiGLU(cfg.d_model, d_ff, cfg.dropout)
        else:
            attention = self_attention(cfg, inner(), causal, scheme.qkv_norm)
            mlp = MLPS.get(cfg.mlp)(cfg.d_model, d_ff, cfg.bias, cfg.dropout, mlp_inner, cfg.gelu_approximate)
        self.attn = scheme.residual(attention, layer, norm_factory(cfg, cfg.d_model, role="attention"), "attention")
        self.cross = (scheme.residual(CrossAttention(cfg.d_model, cfg.n_head, cfg.bias, cfg.dropout, inner()),
                                      layer, norm_factory(cfg, cfg.d_model), "cross_attention") if cross else None)
        self.mlp = scheme.residual(mlp, layer, norm_factory(cfg, cfg.d_model), "mlp")
        self.combine = scheme.combine  # a plain function of (x, attn, cross, mlp, memory): no state, no parameters

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None) -> torch.Tensor:
        return self.combine(x, self.attn, self.cross, self.mlp, memory)  # (B, T, C)

    def sublayers(self) -> list[nn.Module]:
        """The sub-layers' residual wrappers, in order (attention, cross-attention if any, MLP)."""
        return [r for r in (self.attn, self.cross, self.mlp) if r is not None]
