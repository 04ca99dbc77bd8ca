"""The residual design of a model, and the measures in its own language.

A one-stream model needs none of this. The residual designs of 2026 are read here:

- **hyper-connections** (normlab's `hc` and `mhc`; DeepSeek-V4, GLM-5-Next, HY-V4, Qwen4-exp): n streams. Measured:
  each stream's RMS entering each layer; every sub-layer's stream mixing H_res, in the paper's convention
  out_i = Σ_j H_res[i, j]·x_j; how far each H_res is from doubly stochastic; and the composite gain of the
  mixing across depth, mHC's Amax (arXiv 2512.24880 §3.1, Fig. 3): of P_l = H_res^(l)·…·H_res^(1), the
  largest absolute row sum (forward) and column sum (backward), averaged over tokens.
- **Attention Residuals** (normlab's `attnres`; Inkling-2): a stack of sources. Measured: each sub-layer's
  depth weights (softmax over the sources), averaged over tokens.

Both designs are compared with Pre-LN's one stream through the stream they stand for: the sum of the streams
(hyper-connections leave that way) or of the sources (what a Pre-LN stream would hold: the embedding plus every
sub-layer's output). The per-layer contribution ratio and the layer-skip ΔL read that sum (`Views`).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from normlab.nn.residual import DepthAttention, DepthResidual, HyperResidual, ManifoldMixing, collapsed


@dataclass(frozen=True)
class Design:
    """What the residual stream of a model is."""

    kind: str  # "one" | "hyper" | "depth"
    text: str  # how the output names it
    streams: int = 1  # n: hyper-connections' streams
    mixing: str = ""  # hyper: "learned" (HC), "sinkhorn" (mHC), "identity" (no H_res: HY-V4, Qwen4-exp)
    flat: bool = False  # the streams are stored side by side, (B, T, n·C) (Qwen4-exp)
    block: int | None = None  # depth: layers per AttnRes block (None: Full AttnRes)

    def record(self) -> dict[str, Any]:
        return {"kind": self.kind, "design": self.text, "streams": self.streams, "mixing": self.mixing or None,
                "attnres_block_layers": self.block}


ONE_STREAM = Design("one", "one residual stream")
SINKHORN, LEARNED, IDENTITY = "sinkhorn", "learned", "identity"


def design_of(model: nn.Module, config: Any = None) -> Design:
    """The model's residual design, from its modules (normlab) or its config (Hugging Face): hc_mult or hc_count
    name hyper-connections, n_layers_per_attn_res_block Attention Residuals."""
    if hasattr(model, "residual_state"):  # a normlab model: its scheme built the modules
        return _normlab_design(model)
    cfg = getattr(config, "text_config", None) or config
    n = getattr(cfg, "hc_mult", None) or getattr(cfg, "hc_count", None)
    if n:
        iters = getattr(cfg, "hc_sinkhorn_iters", None)
        if iters:  # DeepSeek-V4, GLM-5-Next
            return Design("hyper", f"mHC: {n} streams, H_res Sinkhorn-projected ({iters} iterations)", int(n), SINKHORN)
        flat = getattr(cfg, "hc_count", None) is not None  # Qwen4-exp keeps the streams side by side
        return Design("hyper", f"hyper-connections: {n} streams, input-dependent H_pre and H_post, no stream mixing "
                               "(H_res = I)", int(n), IDENTITY, flat)
    block = getattr(cfg, "n_layers_per_attn_res_block", None)
    if block:
        every = "every layer" if int(block) == 1 else f"every {block} layers"
        return Design("depth", f"Block Attention Residuals: a new source {every}", block=int(block))
    return ONE_STREAM


def _normlab_design(model: nn.Module) -> Design:
    hyper = [m for m in model.modules() if isinstance(m, HyperResidual)]
    if hyper:
        n = model.residual_state.n
        if isinstance(hyper[0].mixing, ManifoldMixing):
            return Design("hyper", f"mHC: {n} streams, H_res Sinkhorn-projected ({hyper[0].mixing.iters} "
                                   "iterations)", n, SINKHORN)
        return Design("hyper", f"hyper-connections: {n} streams, learned H_pre, H_post and H_res", n, LEARNED)
    depth = [m for m in model.modules() if isinstance(m, DepthResidual)]
    if depth:
        size = getattr(model.scheme, "block_layers", 0) or None
        every = "every block" if size == 1 else f"every {size} blocks"
        text = (f"Block Attention Residuals: a new source {every}" if size else
                "Full Attention Residuals: every sub-layer's output its own source")
        return Design("depth", text, block=size)
    return ONE_STREAM


# -- what one forward pass shows ------------------------------------------------------------------------------------


@dataclass
class Taps:
    """What the mixing modules showed in one forward pass, in order."""

    mixes: list[torch.Tensor] = field(default_factory=list)  # H_res per sub-layer, (…, n, n), paper convention
    depth: list[torch.Tensor] = field(default_factory=list)  # depth weights per sub-layer, (B, T, m)


@contextmanager
def tapped(model: nn.Module, design: Design) -> Iterator[Taps]:
    """Within the block, every forward pass of `model` records its mixings (`Taps`); hooks only read."""
    taps, handles = Taps(), []
    if design.kind != "one":
        for module in model.modules():
            hook = _tap_for(module, taps)
            if hook is not None:
                handles.append(module.register_forward_hook(hook))
    try:
        yield taps
    finally:
        for h in handles:
            h.remove()


def _tap_for(module: nn.Module, taps: Taps):
    name = type(module).__name__
    if isinstance(module, HyperResidual):
        return lambda m, args, out: taps.mixes.append(m.mix.float())
    if isinstance(module, DepthAttention):
        return lambda m, args, out: taps.depth.append(m.weights.float())
    if name.endswith("HyperConnection"):  # DeepSeek-V4, GLM-5-Next: (post, comb, collapsed); HY-V4: (post, collapsed)
        def mix(m, args, out):
            if isinstance(out, tuple) and len(out) == 3:  # comb is applied as combᵀ·x (modeling_deepseek_v4.py:1190)
                taps.mixes.append(out[1].detach().float().transpose(-1, -2))
        return mix
    if name.endswith("BlockAttentionResidual"):  # Inkling-2: (block_states, partial) → its query's weights
        return lambda m, args, out: taps.depth.append(_inkling_weights(m, *args[:2]))
    return None


@torch.no_grad()
def _inkling_weights(module: nn.Module, block_states: torch.Tensor, partial: torch.Tensor) -> torch.Tensor:
    """Inkling-2's depth weights as its module computes them (modeling_inkling2.py:843-857): RMS-normalized
    sources against the first query, scaled by C^-½."""
    stacked = torch.cat([block_states, partial.unsqueeze(-2)], -2).float()
    keys = F.rms_norm(stacked, (stacked.shape[-1],))
    query = module.query.float().reshape(-1, stacked.shape[-1])[0]
    return (keys @ query * stacked.shape[-1] ** -0.5).softmax(-1)


# -- the measures ---------------------------------------------------------------------------------------------------


def composite_gains(mixes: list[torch.Tensor]) -> list[dict[str, float]]:
    """mHC's Amax gain of the composite mapping P_l = H_l·…·H_1 after each sub-layer l: the largest absolute row
    sum (forward) and column sum (backward) of P_l, averaged over tokens."""
    out, product = [], None
    for h in mixes:
        product = h if product is None else h @ product
        a = product.abs()
        out.append({"forward": a.sum(-1).amax(-1).mean().item(), "backward": a.sum(-2).amax(-1).mean().item()})
    return out


def stochastic_distance(h: torch.Tensor) -> dict[str, float]:
    """How far H_res is from doubly stochastic, averaged over tokens: the largest |row sum − 1| and |column sum
    − 1|, and its smallest entry (a doubly stochastic matrix has none below 0)."""
    rows, cols = (h.sum(-1) - 1).abs().amax(-1), (h.sum(-2) - 1).abs().amax(-1)
    return {"row_sum_error": rows.mean().item(), "column_sum_error": cols.mean().item(),
            "min_entry": h.amin((-1, -2)).mean().item()}


def per_stream_rms(x: torch.Tensor, design: Design) -> list[float] | None:
    """Each stream's RMS in a layer's input (None for one stream)."""
    streams = _streams(x, design)
    if streams is None:
        return None
    return streams.float().pow(2).mean(dim=tuple(range(streams.dim() - 2)) + (-1,)).sqrt().tolist()


def _streams(x: torch.Tensor, design: Design) -> torch.Tensor | None:
    if design.kind != "hyper":
        return None
    return x.unflatten(-1, (design.streams, -1)) if design.flat else x


def collapse(x: torch.Tensor, design: Design) -> torch.Tensor:
    """A layer's stream as the one stream it stands for, (B, T, C): streams or sources summed."""
    return collapsed(_streams(x, design) if design.kind == "hyper" else x)


class Views:
    """A layer's input and output as the one stream they stand for. Inkling-2's layers take the current block's
    partial sum and the completed blocks apart (modeling_inkling2.py:1421-1434): there the stream is the
    completed blocks plus the partial, and a boundary layer's input joins the completed blocks."""

    def __init__(self, design: Design):
        self.design = design

    def __call__(self, layer: nn.Module, args: tuple, kwargs: dict, x: torch.Tensor,
                 out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        blocks = args[1] if len(args) > 1 and torch.is_tensor(args[1]) else kwargs.get("block_states")
        if self.design.kind == "depth" and blocks is not None and x.dim() == 3:
            done = blocks.sum(-2) if blocks.shape[-2] else torch.zeros_like(x)
            after = done + x + out if getattr(layer, "is_block_boundary", False) else done + out
            return done + x, after
        return collapse(x, self.design), collapse(out, self.design)


def measures(design: Design, taps: Taps, inputs: dict[int, torch.Tensor]) -> dict[str, Any]:
    """The design's record with its measures: per-stream RMS per layer, the mixing per sub-layer with the
    composite gain, the depth weights per sub-layer."""
    result: dict[str, Any] = design.record()
    if design.kind == "hyper":
        result["per_stream_rms"] = [per_stream_rms(inputs[i], design) for i in sorted(inputs)]
        if design.mixing == IDENTITY:
            result["mixing_note"] = "no H_res: the streams pass on unmixed, so the composite gain is 1 by construction"
        gains = composite_gains(taps.mixes)
        result["sublayers"] = [{"sublayer": k, **stochastic_distance(h), "composite_forward_gain": g["forward"],
                                "composite_backward_gain": g["backward"]}
                               for k, (h, g) in enumerate(zip(taps.mixes, gains))]
        if gains:
            result["composite_gain"] = {"forward": gains[-1]["forward"], "backward": gains[-1]["backward"],
                                        "max_forward": max(g["forward"] for g in gains),
                                        "max_backward": max(g["backward"] for g in gains)}
    if design.kind == "depth":
        result["depth_weights"] = [w.reshape(-1, w.shape[-1]).mean(0).tolist() for w in taps.depth]
    return result


def describe(residual: dict[str, Any]) -> list[str]:
    """The measures as lines of text (the terminal and the page say the same): nothing for one stream."""
    if residual.get("kind", "one") == "one":
        return []
    lines = [f"residual design: {residual['design']}"]
    for i, row in enumerate(residual.get("per_stream_rms") or []):
        lines.append(f"  layer {i} input, RMS per stream: " + ", ".join(f"{v:.4g}" for v in row))
    if residual.get("mixing_note"):
        lines.append(f"  {residual['mixing_note']}")
    subs = residual.get("sublayers") or []
    if subs:
        worst = max(max(s["row_sum_error"], s["column_sum_error"]) for s in subs)
        lines.append(f"  H_res over {len(subs)} sub-layers: largest |row or column sum − 1| {worst:.3g}, "
                     f"smallest entry {min(s['min_entry'] for s in subs):.3g}")
        gain = residual["composite_gain"]
        lines.append(f"  composite gain of the mixing (mHC's Amax) after the last sub-layer: forward "
                     f"{gain['forward']:.4g}, backward {gain['backward']:.4g}; largest along depth "
                     f"{gain['max_forward']:.4g} / {gain['max_backward']:.4g}")
    for k, weights in enumerate(residual.get("depth_weights") or []):
        lines.append(f"  depth weights {k}: " + ", ".join(f"{w:.3f}" for w in weights))
    return lines
