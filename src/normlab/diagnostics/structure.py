"""Read a model's normalization layout from the model itself (any nn.Module, HF models included).

- `find_layers`: the stack of Transformer layers = the longest ModuleList of same-class modules.
- `norm_modules`: the normalization modules (normlab's, torch's, and any class named *LayerNorm/*RMSNorm).
- `classify_norm`: LayerNorm vs RMSNorm by behaviour: LayerNorm is invariant to adding a constant
  to every channel, RMSNorm is not (both are invariant to scaling).
- `detect_placement`: one forward pass with hooks. A norm whose input *is* the layer's input
  tensor marks a pre-norm layer; a layer whose output *is* a norm's output is post-norm; four
  norms per pre-norm layer is sandwich (peri when the embeddings are normalized too); a
  pre-norm layer with a norm on a wider hidden (the FFN's) is Sub-LN; a layer whose norms
  neither take its input nor give its output normalizes each sub-layer's output before the
  residual add (OLMo 2; Swin v2's res-post-norm): `post-sublayer`; a norm after the last
  layer is the final norm. DeepNorm reads as post and LayerNorm Scaling as pre: the residual
  multiplier and the 1/√ℓ are not visible in the structure.
- QK-norm (Gemma 3, Qwen3, OLMo 2, ViT-22B) normalizes queries and keys inside attention: a norm
  named q_norm/k_norm (q_layernorm, query_norm, ...) or one applied per head (its input has a
  heads axis). It is reported as `qk_norm` and left out of the placement, which is about the
  residual stream (Gemma 3 is sandwich + QK-norm, Qwen3 pre + QK-norm).
"""
from __future__ import annotations

import re
from contextlib import ExitStack
from typing import Callable

import torch
from torch import nn

from normlab.nn.norms import NoNorm, Norm

_NORM_NAME = re.compile(r"(LayerNorm|RMSNorm|ScaleNorm|DyT)$", re.IGNORECASE)
_QK_NAME = re.compile(r"(^|\.)(q|k|query|key)_?(norm|layernorm|ln)$", re.IGNORECASE)


def is_qk_norm(name: str, norm_input: torch.Tensor) -> bool:
    """A norm on queries or keys: named so (HF's q_norm, k_norm, ...), or applied per head (a 4-d input)."""
    return bool(_QK_NAME.search(name)) or norm_input.dim() >= 4


def find_layers(model: nn.Module) -> tuple[str, nn.ModuleList]:
    """(name, layers) of the longest ModuleList whose children all share one class."""
    best: tuple[str, nn.ModuleList] | None = None
    for name, module in model.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) > 0:
            if len({type(m) for m in module}) == 1 and (best is None or len(module) > len(best[1])):
                best = (name, module)
    if best is None:
        raise ValueError(f"{type(model).__name__} has no stack of identical layers (no ModuleList found)")
    return best


def find_stacks(model: nn.Module) -> list[tuple[str, nn.ModuleList]]:
    """Every stack of identical layers, outermost only, in module order: one for a decoder or an encoder,
    two for an encoder–decoder (normlab's `encoder`/`decoder`, T5's `encoder.block`/`decoder.block`, ...)."""
    found: list[tuple[str, nn.ModuleList]] = []
    for name, module in model.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) > 0 and len({type(m) for m in module}) == 1:
            if not any(name.startswith(other + ".") for other, _ in found):
                found.append((name, module))
    return found


def is_norm(module: nn.Module) -> bool:
    if isinstance(module, NoNorm):
        return False
    return isinstance(module, (Norm, nn.LayerNorm, nn.RMSNorm)) or bool(_NORM_NAME.search(type(module).__name__))


def norm_modules(model: nn.Module) -> dict[str, nn.Module]:
    return {name: m for name, m in model.named_modules() if is_norm(m)}


@torch.no_grad()
def classify_norm(module: nn.Module) -> str:
    """'layernorm', 'rmsnorm', 'scalenorm' or 'other', from how the module treats probe inputs."""
    if isinstance(module, Norm):
        return module.name
    d = _width(module)
    if d is None:
        return "other"
    p = next(module.parameters(), None)
    dtype, device = (p.dtype, p.device) if p is not None else (torch.float32, "cpu")
    x = torch.randn(4, d, generator=torch.Generator().manual_seed(0)).to(device, dtype)
    y = module(x)
    tol = 1e-3 if torch.finfo(dtype).bits >= 32 else 5e-2  # bf16 keeps 8 bits of mantissa: ~4e-3 per rounding
    scale_invariant = torch.allclose(module(3.0 * x), y, rtol=tol, atol=tol)
    if not scale_invariant:
        return "other"
    return "layernorm" if torch.allclose(module(x + 5.0), y, rtol=tol, atol=tol) else "rmsnorm"


def _width(module: nn.Module) -> int | None:
    for attr in ("normalized_shape", "d"):
        shape = getattr(module, attr, None)
        if shape is not None:
            return int(shape[-1]) if isinstance(shape, (tuple, list, torch.Size)) else int(shape)
    weight = getattr(module, "weight", None)
    return int(weight.shape[-1]) if isinstance(weight, torch.Tensor) else None


def first_tensor(value):
    """A layer's hidden-state output: the tensor itself, or the first element of HF's tuples."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], torch.Tensor):
        return value[0]
    return None


def layer_input(args, kwargs) -> torch.Tensor:
    """The hidden states a layer was called with (positional, or HF's `hidden_states=`)."""
    return args[0] if args else kwargs["hidden_states"]


@torch.no_grad()
def detect_placement(model: nn.Module, run_forward: Callable[[], object],
                     stack: tuple[str, nn.ModuleList] | None = None) -> dict[str, object]:
    """Placement, normalizer, final/embedding norm, and norms per layer, from one forward pass, of `stack`
    (name, layers), by default the model's longest stack of identical layers."""
    layers_name, layers = stack or find_layers(model)
    norms = norm_modules(model)
    layer_of = {}
    for name in norms:
        prefix = layers_name + "."
        if name.startswith(prefix):
            layer_of[name] = int(name[len(prefix):].split(".")[0])
    calls: list[tuple[str, torch.Tensor, torch.Tensor]] = []
    layer_io: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    with ExitStack() as hooks:
        for name, m in norms.items():
            hook = m.register_forward_hook(lambda mod, a, out, n=name: calls.append((n, a[0], first_tensor(out))))
            hooks.callback(hook.remove)
        for i, layer in enumerate(layers):
            def tap(mod, args, kwargs, out, i=i):
                layer_io[i] = (layer_input(args, kwargs), first_tensor(out))
            hooks.callback(layer.register_forward_hook(tap, with_kwargs=True).remove)
        run_forward()

    per_layer = []
    for i in range(len(layers)):
        x_in, x_out = layer_io[i]
        inside = [(n, a, o) for n, a, o in calls if layer_of.get(n) == i]
        flags = [is_qk_norm(n, a) for n, a, _ in inside]  # (tuples of tensors: never compared with `in`)
        qk = [c for c, f in zip(inside, flags) if f]
        inside = [c for c, f in zip(inside, flags) if not f]  # the placement is about the residual stream's norms
        pre = any(a is x_in for _, a, _ in inside)
        post = any(o is x_out for _, _, o in inside)
        kind = "none" if not inside else "post" if post and not pre else "pre" if pre and not post else "mixed"
        inner = [a for _, a, _ in inside if a.shape[-1] != x_in.shape[-1]]  # e.g. a norm on the FFN hidden
        if kind == "pre" and inner:
            kind = "subln"
        elif kind == "pre" and len(inside) >= 4:
            kind = "sandwich"
        elif kind == "mixed" and not pre and not post and not inner:
            kind = "post-sublayer"  # each sub-layer's output normalized before the residual add (OLMo 2)
        per_layer.append({"layer": i, "kind": kind, "norms": len(inside), "qk_norms": len(qk)})

    outside = [(n, a, o) for n, a, o in calls if n not in layer_of]
    last_out = layer_io[len(layers) - 1][1]
    first_in = layer_io[0][0]
    final_norm = any(a is last_out for _, a, _ in outside)
    embed_norm = any(o is first_in for _, _, o in outside)
    kinds = [p["kind"] for p in per_layer]
    placement = _overall(kinds, embed_norm)
    norm_kinds = sorted({classify_norm(norms[n]) for n, _, _ in calls})
    return {
        "placement": placement,
        "normalizer": norm_kinds[0] if len(norm_kinds) == 1 else ("none" if not norm_kinds else "+".join(norm_kinds)),
        "final_norm": final_norm, "embed_norm": embed_norm, "qk_norm": any(p["qk_norms"] for p in per_layer),
        "layers_module": layers_name,
        "n_layer": len(layers), "per_layer": per_layer,
    }


def _overall(kinds: list[str], embed_norm: bool) -> str:
    distinct = set(kinds)
    if distinct == {"post", "pre"} and kinds.index("pre") > max(i for i, k in enumerate(kinds) if k == "post"):
        return "mix"  # Post-LN bottom, Pre-LN top
    if len(distinct) != 1:
        return "mixed"
    kind = kinds[0]
    if kind == "sandwich" and embed_norm:
        return "peri"
    return kind
