"""Weight initialisation: a base init from the config, then the scheme's override.

`init_weights` returns a record of what it did; the run directory keeps it.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from normlab.nn.config import ModelConfig
from normlab.nn.schemes import Scheme

RESIDUAL_OUTPUTS = ("out", "ffn_out")  # projections that write into the residual stream


@torch.no_grad()
def init_weights(model: nn.Module, cfg: ModelConfig, scheme: Scheme) -> dict[str, object]:
    """Initialise `model` (a `normlab.nn.model.GPT`) in place; return what was used."""
    std = cfg.init_std
    for emb in (model.wte, model.wpe):
        nn.init.normal_(emb.weight, 0.0, std)
    for module in model.modules():
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
    if not cfg.tie_weights:
        nn.init.normal_(model.lm_head.weight, 0.0, std)

    residual_std = std / math.sqrt(2 * cfg.n_layer) if cfg.init_residual_scaling else std
    for role, w in model.projections():
        if cfg.init == "xavier":
            nn.init.xavier_normal_(w)
        else:
            nn.init.normal_(w, 0.0, residual_std if role in RESIDUAL_OUTPUTS else std)
    record: dict[str, object] = {
        "embeddings": f"normal(0, {std:g})",
        "linear": "xavier_normal(gain 1)" if cfg.init == "xavier" else f"normal(0, {std:g})",
        "residual_outputs": (f"normal(0, {residual_std:g}) = {std:g}/sqrt(2*n_layer)"
                             if cfg.init == "normal" and cfg.init_residual_scaling else "as linear"),
    }

    gains = scheme.init_gains()
    if gains is not None:  # the scheme replaces the block projections' init (DeepNorm, Sub-LN); the head keeps its own
        for role, w in model.projections():
            nn.init.xavier_normal_(w, gain=gains.gain(role))
        record["linear"] = record["residual_outputs"] = "replaced by scheme_override"
        record["scheme_override"] = {
            "init": "xavier_normal", "gain_q_k": gains.qk, "gain_v_out_ffn": gains.v_out_ffn, "why": gains.why,
        }
    return record
