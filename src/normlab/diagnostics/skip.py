"""Effective depth by layer-skip ablation: the loss with layer l replaced by the identity.

Works on any stack of layers (normlab blocks, Hugging Face layers): a forward hook
hands the layer's input on as its output, keeping any extra outputs (tuples).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Sequence

from torch import nn

SKIP_THRESHOLD = 0.01  # a layer counts as essential if skipping it raises the loss by > 1 %


@contextmanager
def skipped(layer: nn.Module):
    """Within the block, `layer` acts as the identity on its hidden-state input."""
    def identity(module, args, kwargs, out):
        x = args[0] if args else kwargs["hidden_states"]
        return (x, *out[1:]) if isinstance(out, tuple) else x

    handle = layer.register_forward_hook(identity, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


def layer_skip(layers: Sequence[nn.Module], compute_loss: Callable[[], float],
               threshold: float = SKIP_THRESHOLD) -> dict[str, object]:
    """ΔL(l) = loss with layer l skipped − full loss, for every l, and the effective-depth summary.

    `effective_depth` is the number of layers whose removal raises the loss by more than
    `threshold` (relative); `effective_depth_fraction` divides it by the depth.
    """
    base = compute_loss()
    deltas = []
    for layer in layers:
        with skipped(layer):
            deltas.append(compute_loss() - base)
    relative = [d / base for d in deltas]
    essential = sum(r > threshold for r in relative)
    return {"base_loss": base, "delta_loss": deltas, "relative_delta": relative, "threshold": threshold,
            "effective_depth": essential, "effective_depth_fraction": essential / max(len(deltas), 1)}
