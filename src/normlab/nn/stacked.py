"""K models of one shape as one: parameters stacked on a leading run axis, one batched kernel per op.

A study trains dozens of small models whose steps are far too small to fill a CPU: per-op
overhead dominates. K members that share every shape (scheme, normalizer, depth, width, ...)
run as one `StackedGPT`. It is built from the K member `GPT`s, each initialised by its own
seed exactly as when trained alone, by swapping every leaf that holds parameters for a stacked
twin; the composite modules (Residual, Block, attention, MLP) are kept as they are. They see
the residual stream as (K·B, T, C), which they cannot tell from a larger batch: members never
mix, because every op is either per row (norms, activations, attention per sequence) or a
batched matmul over the run axis.

    idx (K, B, T) ─► wte[k] + wpe[k] ─► (K·B, T, C) ─► blocks (unchanged) ─► lm_head[k] ─► loss (K,)

The member GPTs stay alive as *views* of the stacks (their parameters share storage with slice
k), so a member can be measured, checkpointed or evaluated alone at any time with no copy.
`torch.func.vmap` was the first try: on CPU it fell back to a Python loop for SDPA and ran
slower than training the members one after another.
"""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from normlab.nn.model import GPT
from normlab.nn.norms import Norm


class _Stacks:
    """Member parameters stacked once each (tied weights stay tied), keeping the members as views."""

    def __init__(self, members: list[GPT]):
        self.members = members
        self.by_id: dict[int, nn.Parameter] = {}
        self.pairs: list[tuple[nn.Parameter, list[nn.Parameter]]] = []  # (stack, member params)

    def get(self, name: str) -> nn.Parameter:
        params = [m.get_parameter(name) for m in self.members]
        key = id(params[0])
        if key not in self.by_id:
            stack = nn.Parameter(torch.stack([p.detach() for p in params]))  # (K, *shape)
            self.by_id[key] = stack
            self.pairs.append((stack, params))
        return self.by_id[key]

    def point_members_at_stacks(self) -> None:
        for stack, params in self.pairs:
            for k, p in enumerate(params):
                p.data = stack.data[k]


class StackedLinear(nn.Module):
    """K linear maps: (K·B, …, in) → (K·B, …, out) with one batched matmul."""

    def __init__(self, weight: nn.Parameter, bias: nn.Parameter | None):
        super().__init__()
        self.weight, self.bias = weight, bias  # (K, out, in), (K, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        K, lead = self.weight.shape[0], x.shape[:-1]
        x3 = x.reshape(K, -1, x.shape[-1])  # (K, B·T, in)
        w = self.weight.transpose(1, 2)  # (K, in, out)
        y = torch.bmm(x3, w) if self.bias is None else torch.baddbmm(self.bias.unsqueeze(1), x3, w)
        return y.reshape(*lead, y.shape[-1])


class StackedEmbedding(nn.Module):
    """K embedding tables: idx (K, B, T) → (K, B, T, C), one gather over the concatenated tables."""

    def __init__(self, weight: nn.Parameter):
        super().__init__()
        self.weight = weight  # (K, V, C)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        K, V, C = self.weight.shape
        offsets = (torch.arange(K, device=idx.device) * V).view(K, *([1] * (idx.dim() - 1)))
        return F.embedding(idx + offsets, self.weight.reshape(K * V, C))


class StackedNorm(nn.Module):
    """K normalizers of one kind, run through the normalizer's own formula with (K, 1, …) parameters.

    The member's module is kept as the formula; its parameters are swapped for broadcasting views
    of the stacks at each call. Fused kernels take one gain vector, so a stack runs the reference
    path (an fp32-rounding difference from a member that used the fused kernel alone).
    """

    def __init__(self, template: Norm, stacks: dict[str, nn.Parameter]):
        super().__init__()
        self.template = template
        self.names = list(stacks)
        for name in self.names:
            delattr(template, name)  # from now on a plain attribute, set per call
            self.register_parameter(name, stacks[name])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        K = next(iter(self.parameters())).shape[0] if self.names else None
        if K is None:  # no parameters (e.g. norm = none): it is the same function for every member
            return self.template(x)
        x3 = x.reshape(K, -1, x.shape[-1])  # (K, B·T, C)
        for name in self.names:
            p = getattr(self, name)  # (K, *shape): (K, C) gains, (K,) scalars
            setattr(self.template, name, p.view(K, 1, *p.shape[1:]) if p.dim() > 1 else p.view(K, 1, 1))
        forward = getattr(self.template, "reference_forward", self.template.forward)
        return forward(x3).reshape(x.shape)


class StackedGPT(nn.Module):
    """K same-shape GPTs trained as one; `forward(idx (K,B,T), targets)` returns logits and K losses."""

    def __init__(self, members: list[GPT]):
        super().__init__()
        if not members:
            raise ValueError("a stack needs at least one member")
        shapes = {tuple((n, tuple(p.shape)) for n, p in m.named_parameters()) for m in members}
        if len(shapes) != 1:
            raise ValueError("members of a stack must have identical parameter shapes (same scheme, normalizer, "
                             "depth, width, vocabulary)")
        self.K = len(members)
        self.members = members
        self.body = copy.deepcopy(members[0])
        self._stacks = _Stacks(members)
        self._swap_leaves()
        self._stacks.point_members_at_stacks()

    def _swap_leaves(self) -> None:
        if isinstance(self.body.embed_scale, nn.Parameter):  # DyT's and Derf's learned scalar: (K,), one a member
            stack = self._stacks.get("embed_scale")
            delattr(self.body, "embed_scale")
            self.body.register_parameter("embed_scale", stack)
        stacked = {id(stack) for stack, _ in self._stacks.pairs}
        for name, module in list(self.body.named_modules()):
            if isinstance(module, nn.Linear):
                bias = self._stacks.get(f"{name}.bias") if module.bias is not None else None
                self._replace(name, StackedLinear(self._stacks.get(f"{name}.weight"), bias))
            elif isinstance(module, nn.Embedding):
                self._replace(name, StackedEmbedding(self._stacks.get(f"{name}.weight")))
            elif isinstance(module, Norm):
                own = [n for n, _ in module.named_parameters(recurse=False)]
                self._replace(name, StackedNorm(module, {n: self._stacks.get(f"{name}.{n}") for n in own}))
            elif any(id(p) not in stacked for p in module.parameters(recurse=False)):
                raise TypeError(f"{name} ({type(module).__name__}) holds parameters and has no stacked twin; "
                                "add one in normlab/nn/stacked.py")

    def _replace(self, name: str, new: nn.Module) -> None:
        parent, _, leaf = name.rpartition(".")
        setattr(self.body.get_submodule(parent) if parent else self.body, leaf, new)

    def pairs(self) -> list[tuple[nn.Parameter, list[nn.Parameter]]]:
        """(stacked parameter, the members' parameters that are its slices), tied weights once."""
        return self._stacks.pairs

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        """idx, targets (K, B, T) → logits (K, B, T, vocab) and the K members' mean cross-entropies."""
        K, B, T = idx.shape
        body = self.body
        if T > body.cfg.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size {body.cfg.block_size}")
        scale = body.embed_scale  # a number, or the members' learned scalars (K,)
        scale = scale.view(K, 1, 1, 1) if isinstance(scale, torch.Tensor) else scale
        x = body.wte(idx)  # (K, B, T, C), then as embed(); rotary positions turn q and k in each row alike
        if body.wpe is None:
            x = x * scale
        elif body.cfg.embed_scale_positions:  # Derf's (wte + wpe)·s
            x = (x + body.wpe.weight[:, :T].unsqueeze(1)) * scale
        else:
            x = x * scale + body.wpe.weight[:, :T].unsqueeze(1)
        x = body.drop(x).reshape(K * B, T, -1)
        x = body.embed_norm(x)
        for block in body.blocks:
            x = block(x)
        logits = body.lm_head(body.final_norm(x)).view(K, B, T, -1)  # (K, B, T, vocab)
        if targets is None:
            return logits, None
        losses = F.cross_entropy(logits.reshape(K * B * T, -1).float(), targets.reshape(-1), reduction="none")
        return logits, losses.view(K, B * T).mean(1)  # (K,)

    def keep(self, index: list[int]) -> None:
        """Drop every member not in `index` (e.g. one that diverged): the stacks shrink, the rest go on.

        Each stack becomes a new Parameter (autograd caches a leaf's shape, so resizing `.data` in
        place would break the next backward); the modules and `pairs()` are pointed at the new ones.
        """
        ix = torch.tensor(index, device=self.pairs()[0][0].device)
        renamed: dict[int, nn.Parameter] = {}
        for i, (stack, params) in enumerate(self.pairs()):
            new = nn.Parameter(stack.detach().index_select(0, ix))
            if stack.grad is not None:
                new.grad = stack.grad.index_select(0, ix)
            renamed[id(stack)] = new
            self.pairs()[i] = (new, [params[k] for k in index])
        for module in self.body.modules():
            for name, p in module._parameters.items():
                if p is not None and id(p) in renamed:
                    module._parameters[name] = renamed[id(p)]
        self.members = [self.members[k] for k in index]
        self.K = len(index)
        self._stacks.point_members_at_stacks()
