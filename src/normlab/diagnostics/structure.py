"""Read a model's normalization layout from the model itself (any nn.Module, HF models included).

- `find_layers`: the stack of Transformer layers = the longest ModuleList of same-class modules.
- `norm_modules`: the normalization modules (normlab's, torch's, and any class named *LayerNorm/*RMSNorm).
- `classify_norm`: LayerNorm vs RMSNorm by behaviour: LayerNorm is invariant to adding a constant
  to every channel, RMSNorm is not (both are invariant to scaling).
- `detect_placement`: one forward pass with hooks on the norms, the layers and each layer's
  sub-layers (its direct children with weights). By tensor identity it sees, per layer, which
  norms read the layer's input x, whether the layer's output *is* a norm's output, which norms
  read a sub-layer's output, and whether the sub-layers read x side by side. Each scheme declares
  what its norms look like (`Facts.layout`, a `BlockLayout` per block and what the stack adds: an
  embedding norm, a special first block, Mix-LN's lower blocks); a layer is named after the block
  layout it fits, the stack after the scheme whose layout it fits, and a layer none fits is
  `unrecognised`, with what was seen. A norm after the last layer is the final norm. DeepNorm, Admin
  and ResiDual read as post, LayerNorm Scaling as pre: residual multipliers, the dual stream and the
  1/√ℓ are not visible in the structure, so those schemes declare Post-LN's and Pre-LN's layout. HybridNorm is the one layout
  told by a value: its FFN residual carries Norm(Y), which the identity of tensors cannot show
  (x' = Norm(Y) + FFN(Norm(Y)) against a Pre-LN-like y + FFN(Norm(y))). No model_type is looked up:
  GPT-J, GPT-NeoX (use_parallel_residual), Falcon (parallel_attn), Phi and Cohere read as parallel
  because their MLP reads Norm(x), not x + Attn(...).
- QK-norm (Gemma 3, Qwen3, OLMo 2, ViT-22B) normalizes queries and keys inside attention: a norm
  named q_norm/k_norm (q_layernorm, query_norm, ...) or one applied per head (its input has a
  heads axis). It is reported as `qk_norm` and left out of the placement, which is about the
  residual stream (Gemma 3 is sandwich + QK-norm, Qwen3 pre + QK-norm).
"""
from __future__ import annotations

import re
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from normlab.nn.norms import NoNorm, Norm
from normlab.nn.schemes import SCHEMES, BlockLayout, Layout

_NORM_NAME = re.compile(r"(LayerNorm|RMSNorm|ScaleNorm|DyT)$", re.IGNORECASE)
_QK_NAME = re.compile(r"(^|\.)(q|k|v|query|key|value)_?(norm|layernorm|ln)$", re.IGNORECASE)


def is_qk_norm(name: str, norm_input: torch.Tensor) -> bool:
    """A norm on queries, keys or values: named so (HF's q_norm, k_norm, ...; HybridNorm's v too), or applied per
    head (a 4-d input)."""
    return bool(_QK_NAME.search(name)) or norm_input.dim() >= 4


def is_stack(module: nn.Module) -> bool:
    """A ModuleList of layers: its children share one class, or are each a `…Layer` (a hybrid stack of two
    layer kinds: Inkling-2's sliding and full decoder layers)."""
    if not isinstance(module, nn.ModuleList) or len(module) == 0:
        return False
    kinds = {type(m) for m in module}
    return len(kinds) == 1 or all(k.__name__.endswith("Layer") for k in kinds)


def find_layers(model: nn.Module) -> tuple[str, nn.ModuleList]:
    """(name, layers) of the longest stack of layers (`is_stack`)."""
    best: tuple[str, nn.ModuleList] | None = None
    for name, module in model.named_modules():
        if is_stack(module) and (best is None or len(module) > len(best[1])):
            best = (name, module)
    if best is None:
        raise ValueError(f"{type(model).__name__} has no stack of identical layers (no ModuleList found)")
    return best


def find_stacks(model: nn.Module) -> list[tuple[str, nn.ModuleList]]:
    """Every stack of identical layers, outermost only, in module order: one for a decoder or an encoder,
    two for an encoder–decoder (normlab's `encoder`/`decoder`, T5's `encoder.block`/`decoder.block`, ...)."""
    found: list[tuple[str, nn.ModuleList]] = []
    for name, module in model.named_modules():
        if is_stack(module):
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


@dataclass
class LayerSeen:
    """What one forward pass shows of a layer's residual-stream norms (QK-norms left out) and its sub-layers
    (the layer's direct children with weights that are not norms and are called: attention, MLP, OPT's fc1/fc2)."""

    norms: int  # norms on the residual stream inside the layer
    read_input: int  # of them, how many normalize the layer's input x itself
    give_output: bool  # the layer's output *is* a norm's output
    inner: bool  # a norm on another width (the FFN hidden: Sub-LN)
    read_sublayer: int  # norms that normalize a sub-layer's output
    side_by_side: int  # sub-layers reading x or Norm(x), while no sub-layer reads an intermediate sum
    qkv: int = 0  # norms on queries, keys or values inside attention (left out of `norms`)
    carries_norm: bool = False  # the output is a (non-final) norm's output plus the last sub-layer's: the
    #                             stream between the sub-layers was normalized (HybridNorm's FFN residual)

    def facts(self) -> dict[str, bool]:
        """What a `BlockLayout` fixes, as this layer shows it."""
        return {"sum_norm": self.give_output, "input_norm": self.read_input > 0,
                "branch_norm": self.read_sublayer > 0, "only_branch_norms": 0 < self.read_sublayer == self.norms,
                "inner_norm": self.inner, "side_by_side": 0 < self.read_input == self.norms and self.side_by_side >= 2,
                "carried_norm": self.carries_norm, "qkv_norm": self.qkv >= 3}

    def fits(self, block: BlockLayout) -> bool:
        facts = self.facts()
        return self.norms >= block.min_norms and all(facts[k] == v for k, v in block.facts().items())

    def summary(self) -> str:
        return (f"{self.norms} norm(s), {self.read_input} on the layer input, {self.read_sublayer} on a sub-layer's "
                f"output, output {'is' if self.give_output else 'is not'} a norm's"
                + (", a norm on another width" if self.inner else "")
                + (f", {self.side_by_side} sub-layers reading the input side by side" if self.side_by_side > 1 else "")
                + (", the stream normalized between its sub-layers" if self.carries_norm else "")
                + (f", {self.qkv} norm(s) on queries, keys or values" if self.qkv else ""))


def layouts() -> dict[Layout, str]:
    """Every scheme's layout, named after the first registered scheme that declares it: the placement `normlab
    diagnose` reports for a model of each scheme (DeepNorm declares Post-LN's layout: "post")."""
    named: dict[Layout, str] = {}
    for name, scheme in SCHEMES.items():
        if scheme.facts.layout is not None:
            named.setdefault(scheme.facts.layout, name)
    return named


def block_layouts() -> dict[BlockLayout, str]:
    """Every block layout the schemes declare, named after the first registered scheme whose blocks have it
    (Peri-LN's blocks are Sandwich-LN's: "sandwich")."""
    named: dict[BlockLayout, str] = {}
    for layout, name in layouts().items():
        named.setdefault(layout.block, name)
    return named


def placement_text(result: dict) -> str:
    """'pre + QK-norm', or 'unrecognised (layer 0: what was seen)': how the CLI and the page name a placement."""
    qk = " + QK-norm" if result.get("qk_norm") else ""
    seen = f" ({result['placement_seen']})" if result.get("placement_seen") else ""
    return f"{result['placement']}{qk}{seen}"


def layout_of(seen: LayerSeen) -> str:
    """The name of the block layout the layer fits, the one that says most where several do (a sandwich block
    fits Pre-LN's too); "none" without a norm on the stream. A layer none fits is "unrecognised": a wrong name
    would be worse than none."""
    if seen.norms == 0:
        return "none"
    fitting = [(block, name) for block, name in block_layouts().items() if seen.fits(block)]
    return max(fitting, key=lambda f: f[0].detail, default=(None, "unrecognised"))[1]


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
    exits: list[tuple[list[torch.Tensor], torch.Tensor]] = []  # modules outside the layers: (tensor inputs, output)
    layer_io: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    parts: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {i: [] for i in range(len(layers))}

    with ExitStack() as hooks:
        for name, m in norms.items():
            hook = m.register_forward_hook(lambda mod, a, out, n=name: calls.append((n, a[0], first_tensor(out))))
            hooks.callback(hook.remove)
        for m in _outside(model, layers, norms):
            def bridge(mod, args, kwargs, out):
                exits.append(([t for t in (*args, *kwargs.values()) if torch.is_tensor(t)], first_tensor(out)))
            hooks.callback(m.register_forward_hook(bridge, with_kwargs=True).remove)
        for i, layer in enumerate(layers):
            def tap(mod, args, kwargs, out, i=i):
                layer_io[i] = (layer_input(args, kwargs), first_tensor(out))
            hooks.callback(layer.register_forward_hook(tap, with_kwargs=True).remove)
            for part in _sublayers(layer):
                def seen(mod, args, kwargs, out, i=i):
                    parts[i].append((_first_input(args, kwargs), first_tensor(out)))
                hooks.callback(part.register_forward_hook(seen, with_kwargs=True).remove)
        run_forward()

    per_layer = [_layer_seen(i, layer_io[i], [c for c in calls if layer_of.get(c[0]) == i], parts[i])
                 for i in range(len(layers))]
    outside = [(n, a, o) for n, a, o in calls if n not in layer_of]
    last_out = layer_io[len(layers) - 1][1]
    first_in = layer_io[0][0]
    # the stream may leave a residual state first (n streams summed, sources attended: DeepSeek-V4's hc_head,
    # normlab's residual_state) before the final norm reads it
    left = [o for ins, o in exits if any(t is last_out for t in ins)]
    final_norm = any(a is last_out or any(a is o for o in left) for _, a, _ in outside)
    embed_norm = any(o is first_in for _, _, o in outside)
    placement, seen = _overall(per_layer, embed_norm)
    norm_kinds = sorted({classify_norm(norms[n]) for n, _, _ in calls})
    return {
        "placement": placement, **({"placement_seen": seen} if seen else {}),
        "normalizer": norm_kinds[0] if len(norm_kinds) == 1 else ("none" if not norm_kinds else "+".join(norm_kinds)),
        "final_norm": final_norm, "embed_norm": embed_norm, "qk_norm": any(p["qk_norms"] for p in per_layer),
        "layers_module": layers_name,
        "n_layer": len(layers), "per_layer": per_layer,
    }


def _layer_seen(i: int, io: tuple[torch.Tensor, torch.Tensor], inside: list, parts: list) -> dict[str, object]:
    """One layer's placement as its forward pass showed it: `io` its input and output, `inside` its norms' calls
    (name, input, output), `parts` its sub-layers' (input, output). QK-norms are counted apart: the placement is
    about the residual stream's norms."""
    flags = [is_qk_norm(n, a) for n, a, _ in inside]  # (tuples of tensors: never compared with `in`)
    qk = [c for c, f in zip(inside, flags) if f]
    inside = [c for c, f in zip(inside, flags) if not f]
    seen = _seen(io[0], io[1], inside, parts, qkv=len(qk))
    return {"layer": i, "kind": layout_of(seen), "norms": len(inside), "qk_norms": len(qk), "seen": seen.summary()}


def _outside(model: nn.Module, layers: nn.ModuleList, norms: dict[str, nn.Module]) -> list[nn.Module]:
    """The model's modules outside its layers that are not norms (the head, a residual state's exit, …)."""
    inner = {id(m) for layer in layers for m in layer.modules()} | {id(m) for m in norms.values()}
    return [m for m in model.modules() if m is not model and id(m) not in inner and m is not layers]


def _sublayers(layer: nn.Module) -> list[nn.Module]:
    """The layer's direct children with weights that are not norms: its attention, MLP, HF's fc1/fc2, ...; a
    child that wraps its sub-layer with the norms around it (normlab's `Residual`) stands for the sub-layer."""
    children = [getattr(m, "sublayer", m) for m in layer.children()]
    return [m for m in children if m is not None and not is_norm(m) and next(m.parameters(), None) is not None]


def _first_input(args, kwargs):
    for value in (*args, kwargs.get("hidden_states"), *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value
    return None


def _seen(x_in, x_out, inside, sublayers, qkv: int = 0) -> LayerSeen:
    """The facts a `BlockLayout` fixes, by tensor identity (which norm or sub-layer read or gave which tensor),
    and one by value: whether the output is a norm's output plus the last sub-layer's."""
    normed_input = [o for _, a, o in inside if a is x_in]
    produced = [o for _, _, o in inside] + [o for _, o in sublayers]
    # side by side: each sub-layer reads x, Norm(x), or another part's output; none reads a sum formed in between
    side = [a for a, _ in sublayers if a is x_in or any(a is o for o in normed_input)]
    clean = all(a is x_in or any(a is o for o in produced) for a, _ in sublayers)
    return LayerSeen(
        norms=len(inside), read_input=len(normed_input),
        give_output=any(o is x_out for _, _, o in inside),
        inner=any(a.shape[-1] != x_in.shape[-1] for _, a, _ in inside),
        read_sublayer=sum(any(a is o for _, o in sublayers) for _, a, _ in inside),
        side_by_side=len(side) if clean else 0, qkv=qkv,
        carries_norm=bool(sublayers) and any(_is_sum(x_out, o, sublayers[-1][1]) for _, _, o in inside
                                              if o is not x_out))


def _is_sum(total, a, b) -> bool:
    """`total` == a + b, to float tolerance (tensors of one shape; HF's tuples give their first tensor)."""
    if not all(isinstance(t, torch.Tensor) for t in (total, a, b)) or not (total.shape == a.shape == b.shape):
        return False
    return torch.allclose(total.float(), a.float() + b.float(), rtol=1e-4, atol=1e-5)


def _overall(per_layer: list[dict], embed_norm: bool) -> tuple[str, str | None]:
    """The stack's placement, and what was seen when it is unrecognised: the scheme whose layout the stack fits,
    the one that says most where several do (Peri-LN's is Sandwich-LN's with an embedding norm)."""
    kinds = [p["kind"] for p in per_layer]
    distinct = set(kinds)
    if "unrecognised" in distinct:
        p = next(p for p in per_layer if p["kind"] == "unrecognised")
        return "unrecognised", f"layer {p['layer']}: {p['seen']}"
    fitting = [(layout, name) for layout, name in layouts().items() if _stack_fits(layout, kinds, embed_norm)]
    if fitting:
        return max(fitting, key=lambda f: f[0].detail)[1], None
    if len(distinct) != 1:
        return "unrecognised", "layers read as " + ", ".join(f"{k} ({kinds.count(k)})" for k in sorted(distinct))
    return kinds[0], None  # "none": no norm on the stream


def _stack_fits(layout: Layout, kinds: list[str], embed_norm: bool) -> bool:
    """Whether layers read as `kinds` fit `layout`: every one its block's, but a first block that may read as
    `first_block` and lower blocks that must read as `lower_blocks` (at least one of its own blocks either way)."""
    if layout.embed_norm not in (None, embed_norm):
        return False
    name = block_layouts()
    if layout.first_block is not None and len(kinds) > 1 and kinds[0] == name.get(layout.first_block):
        kinds = kinds[1:]
    if layout.lower_blocks is not None:
        lower = next((i for i, k in enumerate(kinds) if k != name.get(layout.lower_blocks)), len(kinds))
        if lower == 0:
            return False
        kinds = kinds[lower:]
    return bool(kinds) and all(k == name[layout.block] for k in kinds)
