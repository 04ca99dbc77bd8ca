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
    """An init as a paper set it: the linears' base init, residual scaling, the embeddings' σ and forward scale,
    and what it keeps when the width changes.

    `paper_width` W: the width at which `init_std` is the paper's σ. At width d a recipe that has one draws its
    linears (and an untied head) with σ·√(W/d), so σ·√d, a linear's output RMS per unit input RMS, is the
    paper's; its embeddings keep the stream's RMS at init as at W: σ itself (an embedding row's RMS does not
    depend on the width), or σ·√(W/d) where a √d scalar multiplies them (DyT's and Derf's `shared_scale`), since
    the stream is then σ·√d. None: σ = init_std for everything at every width."""

    linear: str  # "normal" (N(0, σ)) or "xavier" (Xavier-normal, gain 1)
    residual_scaling: bool  # residual output projections ÷ √(2L)
    embed_std: str  # σ of the embeddings: "init_std" (the recipe's embedding σ), or "d^-1/2"
    embed_scale: str  # "1", or "sqrt(d)": the token embedding is multiplied by it in the forward pass
    text: str  # the recipe and its paper, in words
    keeps: str  # what stays as the paper had it when the width changes
    paper_width: int | None = None


GPT2_WIDTH = 768  # GPT-2 small's n_embd (openai/gpt-2 src/model.py default_hparams; nanoGPT's GPTConfig)
LLAMA_WIDTH = 4096  # LLaMA-7B's width: foundation-model-stack's 7B config (DyT's trainer), OLMo 2 7B's d_model

INIT_RECIPES = {
    "gpt2": InitRecipe("normal", True, "init_std", "1",
                       f"N(0, σ) for every linear and embedding, σ = init_std at GPT-2 small's width {GPT2_WIDTH}, "
                       "residual output projections ÷ √(2L), unscaled embeddings (Radford et al. 2019, GPT-2, §2.3; "
                       "nanoGPT's model.py scales c_proj so, the released openai/gpt-2 model.py draws it at 0.02); "
                       "at width d the linears draw σ·√(768/d)",
                       f"a linear's output RMS per unit input (σ·√d = 0.02·√{GPT2_WIDTH} ≈ 0.55), the stream's RMS "
                       "at init and so each block's gain, as at GPT-2's width; not the tied head's initial logit "
                       "RMS, σ·√d of the embedding (benchmarks/init_regime.py)", paper_width=GPT2_WIDTH),
    "gpt2-fixed-std": InitRecipe("normal", True, "init_std", "1",
                                 "GPT-2's recipe with σ = init_std at every width (0.02 carried as a number: "
                                 "normlab's `gpt2` before 2026-11-28)",
                                 "σ itself: σ·√d shrinks with the width (0.16 at width 64, 0.55 at 768)"),
    "llama": InitRecipe("normal", False, "init_std", "1",
                        f"N(0, σ) for every linear and embedding, σ = init_std at LLaMA-7B's width {LLAMA_WIDTH}, no "
                        "residual scaling (foundation-model-stack's LLaMA, which DyT's trainer builds: "
                        "fms/modules/attention.py, feedforward.py, embedding.py; OLMo 2's init_fn normal); at "
                        f"width d the linears draw σ·√({LLAMA_WIDTH}/d)",
                        f"a linear's output RMS per unit input (σ·√d = 0.02·√{LLAMA_WIDTH} = 1.28) and the stream's "
                        "RMS at init, with DyT's √d embedding scalar (1.28) or without one (0.02), as at LLaMA-7B's "
                        "width", paper_width=LLAMA_WIDTH),
    "xiong": InitRecipe("xavier", False, "d^-1/2", "sqrt(d)",
                        "Xavier-normal linears, no residual scaling, token and position embeddings (and an untied "
                        "head) N(0, σ = d^-½) with the token embedding scaled by √d in the forward pass (Xiong et "
                        "al. 2020, arXiv 2002.04745: §4.1 for the analysis's Xavier init, §3.2 for the fairseq "
                        "Transformer it trained)",
                        "everything, by construction: Xavier keeps a linear's output RMS at its input's, and "
                        "d^-½·√d keeps the stream's RMS at 1, at every width"),
}
BASE_INIT_KEEPS = "σ itself (a base init, from no paper): σ·√d changes with the width"


def recipe_of(cfg: ModelConfig) -> InitRecipe:
    """The config's init as a recipe: a named one, or the base init with the config's own residual scaling."""
    if cfg.init in INIT_RECIPES:
        return INIT_RECIPES[cfg.init]
    return InitRecipe(cfg.init, cfg.init_residual_scaling, "init_std", "1", f"base init {cfg.init!r}", BASE_INIT_KEEPS)


def recipe_std(cfg: ModelConfig) -> float:
    """σ of the recipe's linears at the config's width: init_std, scaled as σ·√(W/d) from the recipe's paper
    width W where it has one (`gpt2`: 0.02 at 768 is 0.069 at 64)."""
    width = recipe_of(cfg).paper_width
    return cfg.init_std * math.sqrt(width / cfg.d_model) if width else cfg.init_std


def _width_scaled_stream(cfg: ModelConfig) -> bool:
    """Whether the stream at init is the embedding σ times √d (a learned √d scalar on a width-keeping recipe)."""
    return bool(recipe_of(cfg).paper_width) and cfg.learned_embed_scale


def embed_scale(cfg: ModelConfig) -> float:
    """The token embedding's forward multiplier (its initial value where it is learned): the config's own, else
    √d where it is learned (DyT's and Derf's `shared_scale`) or under `xiong` (fairseq's embed_scale), else 1."""
    if cfg.embed_scale is not None:
        return cfg.embed_scale
    if cfg.learned_embed_scale:
        return math.sqrt(cfg.d_model)
    return math.sqrt(cfg.d_model) if recipe_of(cfg).embed_scale == "sqrt(d)" else 1.0


def embedding_std(cfg: ModelConfig) -> float:
    """σ of the token and position embeddings: d^-½ under `xiong`; under a width-keeping recipe init_std, or its
    linears' σ where a √d scalar multiplies the embedding (the stream is then σ·√d, kept); else init_std."""
    if recipe_of(cfg).embed_std == "d^-1/2":
        return cfg.d_model ** -0.5
    return recipe_std(cfg) if _width_scaled_stream(cfg) else cfg.init_std


def head_std(cfg: ModelConfig) -> float:
    """σ of an untied head: a linear under a width-keeping recipe (its logits' RMS, σ·√d, kept), else the
    embeddings' (fairseq's untied output projection is N(0, d^-½))."""
    return recipe_std(cfg) if recipe_of(cfg).paper_width else embedding_std(cfg)


@torch.no_grad()
def init_weights(model: nn.Module, cfg: ModelConfig, scheme: Scheme,
                 encoder_scheme: Scheme | None = None) -> dict[str, object]:
    """Initialise `model` in place; return what was used.

    `model.projections()` are the block projections `scheme` initialises; an encoder–decoder passes its
    encoder's scheme too, for `model.encoder_projections()` (DeepNorm's β differs between the stacks).
    The order of the draws is fixed (embeddings, head, decoder stack, encoder stack): one seed, one model.
    """
    recipe = recipe_of(cfg)
    _init_tables(model, cfg)
    depth = cfg.n_layer + (cfg.resolved_n_dec_layer() if encoder_scheme is not None else 0)
    std = recipe_std(cfg)
    residual_std = std / math.sqrt(2 * depth) if recipe.residual_scaling else std
    stacks = [("decoder", scheme, list(model.projections()))]
    if encoder_scheme is not None:
        stacks.append(("encoder", encoder_scheme, list(model.encoder_projections())))
    for _, _, projections in stacks:
        for role, w in projections:
            if recipe.linear == "xavier":
                nn.init.xavier_normal_(w)
            else:
                nn.init.normal_(w, 0.0, residual_std if role in RESIDUAL_OUTPUTS else std)
    record = _record(cfg, residual_std)
    _apply_scheme_gains(record, stacks, encoder_decoder=encoder_scheme is not None)
    if encoder_scheme is not None:
        record["schemes"] = {"encoder": encoder_scheme.record(), "decoder": scheme.record()}
    return record


def _init_tables(model: nn.Module, cfg: ModelConfig) -> None:
    """Embeddings, biases and an untied head (`embedding_std`, `head_std`)."""
    emb_std = embedding_std(cfg)
    for emb in (model.wte, model.wpe, *([model.dec_wpe] if hasattr(model, "dec_wpe") else [])):
        if emb is not None:  # rotary positions: no position table
            nn.init.normal_(emb.weight, 0.0, emb_std)
    for module in model.modules():
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
    if not cfg.tie_weights:
        nn.init.normal_(model.lm_head.weight, 0.0, head_std(cfg))


def _record(cfg: ModelConfig, residual_std: float) -> dict[str, object]:
    """What the recipe did, in words: run.json keeps it as "init"."""
    std, recipe, emb_std = recipe_std(cfg), recipe_of(cfg), embedding_std(cfg)
    scaled = recipe.linear == "normal" and recipe.residual_scaling
    residual = f"normal(0, {residual_std:g}) = {std:g}/sqrt(2*n_layer)" if scaled else "as linear"
    if cfg.init in INIT_RECIPES:  # the recipe fixes the scaling; say that the config's flag was not read
        residual += (f" ({cfg.init}: {'always scaled' if recipe.residual_scaling else 'no residual scaling'}; "
                     "init_residual_scaling does not apply)")
    return {
        "recipe": cfg.init, "paper": recipe.text, "keeps": recipe.keeps,
        "std": (f"{std:g} = {cfg.init_std:g}*sqrt({recipe.paper_width}/{cfg.d_model})" if recipe.paper_width
                else f"{std:g}"),
        "embeddings": f"normal(0, {emb_std:g})" + ("" if recipe.embed_std == "init_std" else " = d^-1/2"),
        "embed_scale": (f"learned, init {embed_scale(cfg):g} = sqrt(d)" if cfg.learned_embed_scale else
                        f"{embed_scale(cfg):g}" + (" = sqrt(d)" if recipe.embed_scale == "sqrt(d)" else "")),
        "head": "tied to wte" if cfg.tie_weights else f"normal(0, {head_std(cfg):g})",
        "linear": "xavier_normal(gain 1)" if recipe.linear == "xavier" else f"normal(0, {std:g})",
        "residual_outputs": residual,
    }


def _apply_scheme_gains(record: dict[str, object], stacks: list, encoder_decoder: bool) -> None:
    """The scheme replaces the block projections' init (DeepNorm's β, Sub-LN's γ); the head keeps its own."""
    for name, stack_scheme, projections in stacks:
        gains = stack_scheme.init_gains()
        if gains is None:
            continue
        for role, w in projections:
            nn.init.xavier_normal_(w, gain=gains.gain(role))
        record["linear"] = record["residual_outputs"] = "replaced by scheme_override"
        override = {"init": "xavier_normal", "gain_q_k": gains.qk, "gain_v_out_ffn": gains.v_out_ffn, "why": gains.why}
        if encoder_decoder:
            record.setdefault("scheme_override", {})[name] = override
        else:
            record["scheme_override"] = override
