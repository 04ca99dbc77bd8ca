"""A Transformer block: attention then MLP, each wrapped around the residual by the scheme."""
from __future__ import annotations

import functools

import torch
from torch import nn

from normlab.nn.attention import CausalSelfAttention
from normlab.nn.config import ModelConfig
from normlab.nn.mlp import MLPS
from normlab.nn.norms import make_norm
from normlab.nn.schemes import Scheme


def norm_factory(cfg: ModelConfig, d: int):
    """A zero-argument function that builds one of the config's normalizers of width d."""
    return functools.partial(make_norm, cfg.norm, d, eps=cfg.norm_eps, affine=cfg.norm_affine,
                             bias=cfg.resolved_norm_bias(), options=cfg.norm_options)


class Block(nn.Module):
    """x → attn-residual → mlp-residual; where the norms go is the scheme's business.

        x ─► Residual(attention) ─► Residual(MLP) ─► x'
    """

    def __init__(self, cfg: ModelConfig, layer: int, scheme: Scheme):
        super().__init__()
        self.layer = layer
        d_ff = cfg.resolved_d_ff()
        attn_inner = norm_factory(cfg, cfg.d_model)() if scheme.inner_norms else None
        mlp_inner = norm_factory(cfg, d_ff)() if scheme.inner_norms else None
        attention = CausalSelfAttention(cfg.d_model, cfg.n_head, cfg.bias, cfg.dropout, attn_inner)
        mlp = MLPS.get(cfg.mlp)(cfg.d_model, d_ff, cfg.bias, cfg.dropout, mlp_inner)
        self.attn = scheme.residual(attention, layer, norm_factory(cfg, cfg.d_model))
        self.mlp = scheme.residual(mlp, layer, norm_factory(cfg, cfg.d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.attn(x))  # (B, T, C)
