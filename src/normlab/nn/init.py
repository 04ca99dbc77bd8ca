"""Weight initialisation: a base init from the config, then the scheme's override.

`init_weights` returns a record of what it did; the run directory keeps it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from normlab.nn.config import ModelConfig
from normlab.nn.schemes import Scheme

RESIDUAL_OUTPUTS = ("out", "ffn_out")  # projections that write into the residual stream


@dataclass(frozen=True)
class InitRecipe:
    """An init as a paper set it: the linears' base init, residual scaling, the embeddings' σ and forward scale."""

    linear: str  # "normal" (N(0, init_std)) or "xavier" (Xavier-normal, gain 1)
    residual_scaling: bool  # residual output projections ÷ √(2L)
    embed_std: str  # "init_std", or "d^-1/2"
    embed_scale: str  # "1", or "sqrt(d)": the token embedding is multiplied by it in the forward pass
    text: str  # the recipe and its paper, in words


INIT_RECIPES = {
    "gpt2": InitRecipe("normal", True, "init_std", "1",
                       "N(0, 0.02) for every linear and embedding, residual output projections ÷ √(2L), unscaled "
                       "embeddings (Radford et al. 2019, GPT-2, §2.3, and its released code)"),
    "xiong": InitRecipe("xavier", False, "d^-1/2", "sqrt(d)",
                        "Xavier-normal linears, no residual scaling, token and position embeddings N(0, d^-½) with "
                        "the token embedding scaled by √d in the forward pass (Xiong et al. 2020, arXiv "
                        "2002.04745, §3.1 and App. A: the fairseq Transformer)"),
}


def recipe_of(cfg: ModelConfig) -> InitRecipe:
    """The config's init as a recipe: a named one, or the base init with the config's own residual scaling."""
    if cfg.init in INIT_RECIPES:
        return INIT_RECIPES[cfg.init]
    return InitRecipe(cfg.init, cfg.init_residual_scaling, "init_std", "1", f"base init {cfg.init!r}")


def embed_scale(cfg: ModelConfig) -> float:
    """The token embedding's forward multiplier: √d under `xiong` (fairseq's embed_scale), else 1."""
    return math.sqrt(cfg.d_model) if recipe_of(cfg).embed_scale == "sqrt(d)" else 1.0


@torch.no_grad()
def init_weights(model: nn.Module, cfg: ModelConfig, scheme: Scheme,
                 encoder_scheme: Scheme | None = None) -> dict[str, object]:
    """Initialise `model` in place; return what was used.

    `model.projections()` are the block projections `scheme` initialises; an encoder–decoder passes its
    encoder's scheme too, for `model.encoder_projections()` (DeepNorm's β differs between the stacks).
    """
    std, recipe = cfg.init_std, recipe_of(cfg)
    emb_std = cfg.d_model ** -0.5 if recipe.embed_std == "d^-1/2" else std
    for emb in (model.wte, model.wpe, *([model.dec_wpe] if hasattr(model, "dec_wpe") else [])):
        nn.init.normal_(emb.weight, 0.0, emb_std)
    for module in model.modules():
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
    if not cfg.tie_weights:
        nn.init.normal_(model.lm_head.weight, 0.0, std)

    depth = cfg.n_layer + (cfg.resolved_n_dec_layer() if encoder_scheme is not None else 0)
    residual_std = std / math.sqrt(2 * depth) if recipe.residual_scaling else std
    stacks = [(scheme, list(model.projections()))]
    if encoder_scheme is not None:
        stacks.append((encoder_scheme, list(model.encoder_projections())))
    for _, projections in stacks:
        for role, w in projections:
            if recipe.linear == "xavier":
                nn.init.xavier_normal_(w)
            else:
                nn.init.normal_(w, 0.0, residual_std if role in RESIDUAL_OUTPUTS else std)
    record: dict[str, object] = {
        "recipe": cfg.init, "paper": recipe.text,
        "embeddings": f"normal(0, {emb_std:g})" + ("" if recipe.embed_std == "init_std" else " = d^-1/2"),
        "embed_scale": f"{embed_scale(cfg):g}" + (" = sqrt(d)" if recipe.embed_scale == "sqrt(d)" else ""),
        "linear": "xavier_normal(gain 1)" if recipe.linear == "xavier" else f"normal(0, {std:g})",
        "residual_outputs": (f"normal(0, {residual_std:g}) = {std:g}/sqrt(2*n_layer)"
                             if recipe.linear == "normal" and recipe.residual_scaling else "as linear"),
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
