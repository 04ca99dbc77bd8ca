"""Effective depth by layer-skip ablation: the loss with layer l replaced by the identity.

Works on any stack of layers (normlab blocks, Hugging Face layers): a forward hook
hands the layer's input on as its output, keeping any extra outputs (tuples).
"""
from __future__ import annotations

import math
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from torch import nn

from normlab.config import DiagnosticsConfig

SKIP_THRESHOLD = 0.01  # a layer counts as essential if skipping it raises the loss by > 1 %
# layers the ablation skips at most: every one up to 100, then 100 evenly spaced (a run sets its own:
# diagnostics.layer_skip_most)
SKIP_MOST = DiagnosticsConfig.model_fields["layer_skip_most"].default
NEAR_ZERO = 0.01  # nats: a loss this small gives no scale of its own to be 1 % of (MiniLM's InfoNCE: 0.0006)


@contextmanager
def skipped(layer: nn.Module):
    """Within the block, `layer` acts as the identity on its hidden-state input, or on the stream it stands for:
    an Inkling-2 layer at an Attention Residuals block boundary hands on zeros, since its model files the layer's
    input as a completed source itself (modeling_inkling2.py:1433-1434) and the new block's partial sum then
    starts empty, so the sum of the sources is unchanged."""
    def identity(module, args, kwargs, out):
        x = args[0] if args else kwargs["hidden_states"]
        if getattr(module, "is_block_boundary", False):
            x = torch.zeros_like(x)
        return (x, *out[1:]) if isinstance(out, tuple) else x

    handle = layer.register_forward_hook(identity, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


def sampled_layers(n: int, most: int | None) -> list[int]:
    """Which of n layers to skip: all, or `most` evenly spaced ones, the first and the last among them."""
    if most is None or n <= most:
        return list(range(n))
    return sorted({round(i * (n - 1) / max(most - 1, 1)) for i in range(most)})


def spread(layers: list[int]) -> list[int]:
    """`layers` in an order whose every prefix is spread over them: the first, the last, the middle, then the
    quarters, and so on. Why: an ablation cut short (interrupted, or out of budget) then keeps an evenly spread
    sample of the stack, not its bottom."""
    if len(layers) <= 2:
        return list(layers)
    order, halves = [0, len(layers) - 1], deque([(0, len(layers) - 1)])
    while halves:
        lo, hi = halves.popleft()
        if hi - lo >= 2:
            mid = (lo + hi) // 2
            order.append(mid)
            halves.extend([(lo, mid), (mid, hi)])
    return [layers[i] for i in order]


@dataclass(frozen=True)
class SkipPlan:
    """What an ablation measures: which layers (in the order measured), over how many val batches, and why."""

    layers: list[int]
    batches: int
    why: str
    whole: bool = False  # everything asked for: `most` layers over every val batch


def plan_layer_skip(n_layer: int, most: int | None, batches: int, batch_s: float, budget_s: float) -> SkipPlan:
    """The most of the ablation that fits `budget_s` seconds when one val batch takes `batch_s`. It costs
    (1 + layers) evaluations (the full model, then each layer skipped) of `batches` each. Kept first: `most`
    evenly spaced layers (all, if fewer) over all `batches`; then fewer batches per evaluation, down to one;
    then fewer layers, the first and the last among them; else none (`layers` empty)."""
    want = sampled_layers(n_layer, most)
    afford = math.floor(budget_s / batch_s) if batch_s > 0 else (1 + len(want)) * batches
    paid = f"one val batch takes {batch_s:.2g} s, {max(budget_s, 0):.2g} s pay for {max(afford, 0)}"
    if afford >= (1 + len(want)) * batches:
        return SkipPlan(spread(want), batches, f"whole: {len(want)} of {n_layer} layers over {batches} val batches",
                        whole=True)
    if afford // (1 + len(want)) >= 1:
        fewer = afford // (1 + len(want))
        return SkipPlan(spread(want), fewer, f"{len(want)} of {n_layer} layers over {fewer} of {batches} val "
                                             f"batches: {paid}")
    if afford - 1 >= min(2, n_layer):
        layers = sampled_layers(n_layer, afford - 1)
        return SkipPlan(spread(layers), 1, f"{len(layers)} of {n_layer} layers, evenly spaced ({len(want)} asked "
                                           f"for), over 1 of {batches} val batches: {paid}")
    return SkipPlan([], 0, f"{paid}, too few for the full model and two layers skipped")


def layer_skip(layers: Sequence[nn.Module], compute_loss: Callable[[], float],
               threshold: float = SKIP_THRESHOLD, chance: tuple[float, str] | None = None,
               most: int | None = None) -> dict[str, object]:
    """ΔL(l) = loss with layer l skipped − full loss, for every l, and the effective-depth summary (`summarize`).

    `most`: skip at most this many layers, evenly spaced (`sampled_layers`), the others' ΔL None.
    A 1,000-layer stack then costs 100 evaluations, not 1,000.
    """
    base = compute_loss()
    deltas: list[float | None] = [None] * len(layers)
    for index in sampled_layers(len(layers), most):
        with skipped(layers[index]):
            deltas[index] = compute_loss() - base
    return summarize(base, deltas, threshold, chance)


def summarize(base: float, deltas: list[float | None], threshold: float = SKIP_THRESHOLD,
              chance: tuple[float, str] | None = None) -> dict[str, object]:
    """The effective depth from the ΔL measured (None: a layer not skipped).

    `effective_depth` is the number of layers whose removal raises the loss by more than
    `threshold` of a scale: with `chance` = (loss, what) — the loss of a model that knows nothing,
    e.g. log V — the gap from the model's loss up to it (how much of what it learned is lost);
    without, the loss itself. A loss under NEAR_ZERO with no chance level gives no scale: the
    depth is then None and `judged` says why. `effective_depth_fraction` divides it by the depth.
    With layers left out, the fraction is the measured layers', and the depth that fraction of all
    layers (an estimate: `skipped` says how many were measured).
    """
    measured = sum(d is not None for d in deltas)
    if chance is not None and chance[0] > base:
        scale, relative_to = chance[0] - base, f"its gap to chance ({chance[1]} = {chance[0]:.4g} nats)"
    elif base >= NEAR_ZERO:
        scale, relative_to = base, "the model's loss"
    else:
        scale, relative_to = None, None
    out = {"base_loss": base, "delta_loss": deltas, "threshold": threshold, "relative_to": relative_to,
           "skipped": measured}
    if scale is None:
        return {**out, "relative_delta": [None] * len(deltas), "effective_depth": None,
                "effective_depth_fraction": None,
                "judged": f"cannot judge: the loss {base:.2g} is near 0 and no chance level was given to scale ΔL by"}
    relative = [None if d is None else d / scale for d in deltas]
    essential = sum(r > threshold for r in relative if r is not None)
    fraction = essential / max(measured, 1)
    depth = essential if measured == len(deltas) else round(fraction * len(deltas))
    return {**out, "relative_delta": relative, "effective_depth": depth, "effective_depth_fraction": fraction,
            "judged": "judged" if measured == len(deltas) else
            f"judged on {measured} evenly spaced layers of {len(deltas)}: the depth is an estimate"}


def depth_sentence(depth: dict[str, object], n_layer: int) -> str:
    """`4 of 6 layers raise the loss by more than 1% of … when skipped`, or why it could not be judged."""
    if depth.get("effective_depth") is None:
        return str(depth.get("judged"))
    estimate = "" if depth.get("judged") == "judged" else f" ({depth.get('judged')})"
    return (f"{depth['effective_depth']} of {n_layer} layers raise the loss by more than {depth['threshold']:.0%} of "
            f"{depth['relative_to']} when skipped{estimate}")
