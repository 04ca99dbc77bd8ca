"""Where a NaN starts: the first module that *produced* a non-finite value.

A module produced it when its output is non-finite while everything it was given
(its inputs, in the forward pass; the gradient of its output, in the backward pass) was
finite. Modules that only passed a NaN on are not blamed. Hooks fire innermost first,
so the culprit is the smallest module around the offending operation.
"""
from __future__ import annotations

from contextlib import ExitStack
from typing import Any, Callable

import torch
from torch import nn


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def _finite(value: Any) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in _tensors(value) if t.is_floating_point())


def find_nonfinite_origin(model: nn.Module, compute_loss: Callable[[], torch.Tensor]) -> dict[str, Any] | None:
    """Run `compute_loss` (and its backward) with hooks on every module of `model`.

    Returns {"module", "phase" ("forward" | "backward"), "nonfinite_parameters"} for the first
    producer, or None when everything stays finite.
    """
    found: list[dict[str, Any]] = []

    def blame(name: str, module: nn.Module, phase: str) -> None:
        if not found:
            bad = [n for n, p in module.named_parameters(recurse=False) if not torch.isfinite(p).all()]
            found.append({"module": name or "(model)", "phase": phase, "nonfinite_parameters": bad})

    with ExitStack() as hooks:
        for name, module in model.named_modules():
            def forward_hook(m, args, out, name=name):
                if not _finite(out) and _finite(args):
                    blame(name, m, "forward")

            def backward_hook(m, grad_input, grad_output, name=name):
                if not _finite(grad_input) and _finite(grad_output):
                    blame(name, m, "backward")

            hooks.callback(module.register_forward_hook(forward_hook).remove)
            hooks.callback(module.register_full_backward_hook(backward_hook).remove)
        loss = compute_loss()
        if not found and loss.requires_grad:
            loss.backward()
    if not found:
        bad_grads = [n for n, p in model.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()]
        if bad_grads:  # non-finite only in a parameter's own gradient
            found.append({"module": bad_grads[0].rsplit(".", 1)[0], "phase": "backward",
                          "nonfinite_parameters": [], "nonfinite_gradients": bad_grads})
    model.zero_grad(set_to_none=True)
    return found[0] if found else None
