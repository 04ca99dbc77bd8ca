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
def init_weights(model: nn.Module, cfg: ModelConfig, scheme: Scheme,
                 encoder_scheme: Scheme | None = None) -> dict[str, object]:
    """Initialise `model` in place; return what was used.

    `model.projections()` are the block projections `scheme` initialises; an encoder–decoder passes its
    encoder's scheme too, for `model.encoder_projections()` (DeepNorm's β differs between the stacks).
    """
    std = cfg.init_std
    for emb in (model.wte, model.wpe, *([model.dec_wpe] if hasattr(model, "dec_wpe") else [])):
        nn.init.normal_(emb.weight, 0.0, std)
    for module in model.modules():
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
    if not cfg.tie_weights:
        nn.init.normal_(model.lm_head.weight, 0.0, std)

    depth = cfg.n_layer + (cfg.resolved_n_dec_layer() if encoder_scheme is not None else 0)
    residual_std = std / math.sqrt(2 * depth) if cfg.init_residual_scaling else std
    stacks = [(scheme, list(model.projections()))]
    if encoder_scheme is not None:
        stacks.append((encoder_scheme, list(model.encoder_projections())))
    for _, projections in stacks:
        for role, w in projections:
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
    for name, (stack_scheme, projections) in zip(("decoder", "encoder"), stacks):
        gains = stack_scheme.init_gains()
        if gains is None:
            continue
        # the scheme replaces the block projections' init (DeepNorm, Sub-LN); the head keeps its own
        for role, w in projections:
            nn.init.xavier_normal_(w, gain=gains.gain(role))
        record["linear"] = record["residual_outputs"] = "replaced by scheme_override"
        override = {"init": "xavier_normal", "gain_q_k": gains.qk, "gain_v_out_ffn": gains.v_out_ffn, "why": gains.why}
        if encoder_scheme is None:
            record["scheme_override"] = override
        else:
            record.setdefault("scheme_override", {})[name] = override
    if encoder_scheme is not None:
        record["schemes"] = {"encoder": encoder_scheme.describe(), "decoder": scheme.describe()}
    return record
