"""Schemes that change the residual's form, not only where its norm goes: Admin's ω, ResiDual's second stream,
OLMo 2's reordered norm, parallel attention + MLP, HybridNorm's QKV-norm with a Post-Norm FFN, Keel's highway α."""
from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch import nn

from normlab.nn.residual import Residual
from normlab.nn.schemes.base import SCHEMES, BlockLayout, Facts, Layout, Scheme, Stack
from normlab.nn.schemes.classic import PostLN, PreLN

class AdminResidual(Residual):
    """Admin's sub-layer: x ← Norm(ω ⊙ x + F(x)), ω a learnable vector set by `profile_model` before training."""

    def __init__(self, sublayer: nn.Module, post_norm: nn.Module, d: int, stack: str):
        super().__init__(sublayer, post_norm=post_norm)
        self.omega = nn.Parameter(torch.ones(d))
        self.stack = stack  # ω accumulates the branch variances of one stack (encoder, decoder) at a time

    def forward(self, x: torch.Tensor, *context: torch.Tensor) -> torch.Tensor:
        h = self.out_norm(self.sublayer(x, *context))  # out_norm is an Identity: the probe taps the branch there
        return self.post_norm(self.omega * x + h)


@SCHEMES.register("admin")
class Admin(Scheme):
    """Admin (Liu et al. 2020, "Understanding the Difficulty of Training Transformers", arXiv 2004.08249, §4.3):
    Post-LN whose residual input is re-weighted by ω, x ← Norm(ω ⊙ x + F(x)), no final norm.

        x ──┬──────── F ───────(+)── Norm ──► x'
            └──── ⊙ω ───────────┘

    ω_i ∈ R^d is learnable and starts at √(Σ_{j<i} Var f_j): a profiling pass (`profile_model`, one training
    batch with ω = 1) measures every branch output's variance, so sub-layer i's input is weighted like the
    stream a Pre-LN network would carry there. normlab counts the embedding x₀ as the 0-th term (Var x₀), so
    ω₁ = √Var x₀ rather than 0. Not stackable by normlab.nn.stacked (ω lives on the residual).
    """

    label = "Admin"
    name, formula, paper = "admin", "x ← Norm(ω⊙x + F(x)); ω_i = √(Var x₀ + Σ_{j<i} Var F_j) from a profiling pass", \
        "arXiv 2004.08249"
    final_norm = False
    facts = Facts(
        color="#bcbd22",
        layout=PostLN.facts.layout,  # ω is not visible in the structure
        incompatible_norms={"none": "Admin re-weights a Post-LN residual; without the norm ω only rescales an "
                                    "unnormalized sum, which is no longer Admin"},
        stackable=False)

    def residual(self, sublayer, layer, make_norm, role):
        norm = make_norm()
        return AdminResidual(sublayer, norm, norm.d, self.stack.part)


class ResiDualStream:
    """ResiDual's second stream x_d for one forward pass, shared by a stack's sub-layers and its final module."""

    def __init__(self):
        self.x: torch.Tensor | None = None


class ResiDualSublayer(Residual):
    """A ResiDual sub-layer: x_a ← Norm(x_a + F(x_a)) and x_d ← x_d + F(x_a) (x_d starts as the stack's input)."""

    def __init__(self, sublayer: nn.Module, post_norm: nn.Module, stream: ResiDualStream, first: bool):
        super().__init__(sublayer, post_norm=post_norm)
        self.stream, self.first = stream, first

    def forward(self, x: torch.Tensor, *context: torch.Tensor) -> torch.Tensor:
        h = self.out_norm(self.sublayer(x, *context))  # out_norm is an Identity: the probe taps the branch there
        dual = x if self.first else self.stream.x
        self.stream.x = dual + h
        return self.post_norm(x + h)

    def extra_repr(self) -> str:
        return f"first={self.first}"


class ResiDualFinal(nn.Module):
    """ResiDual's output: y = x_a + Norm(x_d), where the two streams merge before the head."""

    def __init__(self, norm: nn.Module, stream: ResiDualStream):
        super().__init__()
        self.norm, self.stream = norm, stream

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dual, self.stream.x = self.stream.x, None  # read once: the next forward starts a new stream
        return x + self.norm(dual)


@SCHEMES.register("residual")
class ResiDual(Scheme):
    """ResiDual (Xie et al. 2023, arXiv 2304.14802, §3): a Post-LN stream and a Pre-LN-like stream of the raw
    sub-layer outputs, merged at the end.

        x_a ──┬── F ──(+)── Norm ──► x_a'         x_d' = x_d + F(x_a)   (x_d starts as the input x)
              └───────┘                            y = x_a + Norm(x_d)  before the head

    The Post-LN stream keeps every layer's representation distinct; the dual stream gives the gradient a
    path that no norm divides (the paper's lower bound). In the layer-skip ablation a skipped block still
    adds to x_d: only its Post-LN path is removed. Not stackable by normlab.nn.stacked.
    """

    label = "ResiDual"
    name, formula, paper = "residual", "x_a ← Norm(x_a + F(x_a)); x_d ← x_d + F(x_a); y = x_a + Norm(x_d)", \
        "arXiv 2304.14802"
    facts = Facts(
        color="#7f7f7f",
        layout=PostLN.facts.layout,  # the dual stream is no norm's input until the head, after the last block
        incompatible_norms={"none": "ResiDual is defined by where its two norms sit; with no normalizer both streams "
                                    "are the same un-normalized sum"},
        final_norm_required="ResiDual's output x_a + Norm(x_d) is its final module; without it the dual stream is lost",
        stackable=False,
        checkpointable=False)

    def __init__(self, n_layer: int, stack: Stack | None = None, **options: float | bool):
        super().__init__(n_layer, stack, **options)
        self.stream = ResiDualStream()

    def residual(self, sublayer, layer, make_norm, role):
        first = layer == 0 and role == "attention"  # the stack's first sub-layer starts x_d from its input
        return ResiDualSublayer(sublayer, make_norm(), self.stream, first)

    def final(self, make_norm):
        return ResiDualFinal(make_norm(), self.stream)


@torch.no_grad()
def profile_model(model: nn.Module, forward: Callable[[], object]) -> dict[str, list[float]]:
    """Admin's profiling pass: with every ω = 1, run `forward` once, recording each sub-layer's input variance
    and its branch F's output variance; then set each stack's ω_i to √(Var x₀ + Σ_{j<i} Var F_j) in the order
    the sub-layers ran. Returns {stack: [ω_i]} ({} for a model without Admin)."""
    residuals = [m for m in model.modules() if isinstance(m, AdminResidual)]
    if not residuals:
        return {}
    seen: list[list] = []  # [residual, Var input, Var F], in execution order
    handles = []
    for r in residuals:
        r.omega.fill_(1.0)
        handles.append(r.register_forward_pre_hook(
            lambda m, args: seen.append([m, args[0].float().var().item(), None])))
        handles.append(r.sublayer.register_forward_hook(
            lambda m, args, out: seen[-1].__setitem__(2, out.float().var().item())))
    try:
        forward()
    finally:
        for h in handles:
            h.remove()
    out: dict[str, list[float]] = {}
    totals: dict[str, float] = {}
    for r, var_in, var_branch in seen:
        totals.setdefault(r.stack, var_in)  # the stack's first sub-layer: Var x₀
        r.omega.fill_(math.sqrt(totals[r.stack]))
        out.setdefault(r.stack, []).append(math.sqrt(totals[r.stack]))
        totals[r.stack] += var_branch
    return out


def calibrate(model: nn.Module, forward: Callable[[], object]) -> dict[str, Any]:
    """The data-dependent set-up a model's schemes do before its first step, on one batch (`forward`), and what it
    set, for the model section of run.json: Admin's ω per stack (`profile_model`); {} for every other scheme. The
    trainer calls this, and never names a scheme."""
    omega = profile_model(model, forward)
    return {"admin_omega": omega} if omega else {}


@SCHEMES.register("reordered")
class ReorderedNorm(Scheme):
    """OLMo 2's reordered norm (OLMo et al. 2025, arXiv 2501.00656, §3.2.1): the norm moves from the
    sub-layer's input to its output, x ← x + Norm(F(x)); final norm. Sandwich-LN without its input norm:
    the stream is never normalized on its way into a sub-layer, only each branch on its way out.

        x ──┬── F ── Norm ──(+)──► x'        … last block ── Norm ── head
            └───────────────┘
    """

    label = "Reordered (OLMo 2)"
    name, formula, paper = "reordered", "x ← x + Norm(F(x)); final Norm", "arXiv 2501.00656"
    facts = Facts(
        color="#393b79",
        # Swin v2's res-post-norm too
        layout=Layout(BlockLayout(sum_norm=False, input_norm=False, only_branch_norms=True)))

    def residual(self, sublayer, layer, make_norm, role):
        return Residual(sublayer, out_norm=make_norm())


class Branch(Residual):
    """One of a parallel block's sub-layers: only its contribution OutNorm(F(InNorm(x))); the block adds the
    stream x once for all its branches. `shares`: the branch whose input norm this one reads through (PaLM's
    one LayerNorm for both), held outside the module tree so the norm has one name and one set of parameters."""

    def __init__(self, sublayer: nn.Module, in_norm: nn.Module | None = None, shares: Residual | None = None):
        super().__init__(sublayer, in_norm=in_norm)
        object.__setattr__(self, "shares", shares)  # not a child: its norm stays registered once, in `shares`

    def forward(self, x: torch.Tensor, *context: torch.Tensor) -> torch.Tensor:
        norm = self.in_norm if self.shares is None else self.shares.in_norm
        return self.out_norm(self.sublayer(norm(x), *context))  # F's contribution, (B, T, C)

    def extra_repr(self) -> str:
        return "branch" + ("" if self.shares is None else ", in_norm shared with the attention branch")


@SCHEMES.register("parallel")
class Parallel(Scheme):
    """Parallel attention and MLP (GPT-J, Wang & Komatsuzaki 2021; GPT-NeoX, Black et al. 2022, arXiv 2204.06745;
    PaLM, Chowdhery et al. 2022, arXiv 2204.02311 §2): both sub-layers read the same x,
    x ← x + Attn(Norm(x)) + MLP(Norm′(x)); final norm.

              ┌── Norm ── Attn ──┐
        x ──┬─┼── Norm′ ── MLP ──(+)──► x'       … last block ── Norm ── head
            └────────────────────┘

    Option `shared_norm` (default true): Norm′ = Norm, one LayerNorm for both (GPT-J, PaLM's formula); false: two
    norms (GPT-NeoX's use_parallel_residual, input_layernorm and post_attention_layernorm). A shared norm is computed
    once per branch (the same value twice). Decoder and encoder; refused in an encoder–decoder, whose decoder
    puts cross-attention between the two sub-layers, a block none of these papers defines.
    """

    label = "Parallel (GPT-J/PaLM)"
    name, formula, paper = ("parallel", "x ← x + Attn(Norm(x)) + MLP(Norm′(x)), Norm′ = Norm if shared; final Norm",
                            "arXiv 2204.02311")
    OPTIONS = {"shared_norm": True}
    facts = Facts(
        color="#637939",
        layout=Layout(BlockLayout(sum_norm=False, input_norm=True, side_by_side=True)),  # GPT-J, GPT-NeoX, PaLM
        undefined_architectures={"encoder-decoder": "its decoder's cross-attention sits between attention and MLP, "
                                                    "and no parallel-block paper (GPT-J, GPT-NeoX, PaLM) says where "
                                                    "it would go"})

    def __init__(self, n_layer: int, stack: Stack | None = None, **options: float | bool):
        super().__init__(n_layer, stack, **options)
        self._attention: dict[int, Branch] = {}  # layer -> its attention branch, whose norm its MLP branch shares

    def residual(self, sublayer, layer, make_norm, role):
        if not self.options["shared_norm"]:
            return Branch(sublayer, in_norm=make_norm())
        if role == "attention":
            self._attention[layer] = Branch(sublayer, in_norm=make_norm())
            return self._attention[layer]
        return Branch(sublayer, shares=self._attention.pop(layer))  # the MLP reads through attention's norm

    @staticmethod
    def combine(x, attn, cross, mlp, memory):
        return x + attn(x) + mlp(x)  # (B, T, C); cross is None (refused above)


@SCHEMES.register("hybrid")
class HybridNorm(Scheme):
    """HybridNorm (Zhuo et al. 2025, arXiv 2503.04598; its code: github.com/BryceZhuo/HybridNorm): QKV-norm inside attention (q, k and v each normalized
    per head, before the rotation), Post-Norm in the FFN: Y = X + Attn_QKV(X); X' = Norm(Y) + FFN(Norm(Y)).
    Final norm (its code is OLMo 2's, which keeps ln_f).

        X ──┬── Attn[Norm(Q), Norm(K), Norm(V)] ──(+)── Norm ──┬── FFN ──(+)──► X'
            └──────────────────────────────────────┘          └─────────┘

    In normlab's slots the FFN's norm is the attention residual's post-norm, x ← Norm(x + Attn(x)), and the FFN
    residual has none, x ← x + FFN(x): the same computation (the official code's `ffn_norm` with
    `ffn_residual_after_norm`, `attn_norm` off). Option `first_pre` (HybridNorm*: the code's
    `norm_pos_special_config` for layer 0, attn_norm on, ffn_residual off): true makes block 0 Pre-Norm around
    both sub-layers, QKV-norm kept.
    Decoder and encoder (the attention's mask is all that differs); refused in an encoder–decoder, whose
    cross-attention the paper does not normalize.
    """

    label = "HybridNorm"
    name, formula, paper = ("hybrid", "Y = X + Attn(Norm(Q), Norm(K), Norm(V)); X' = Norm(Y) + FFN(Norm(Y)); "
                                      "final Norm", "arXiv 2503.04598")
    OPTIONS = {"first_pre": False}
    qkv_norm = True
    facts = Facts(
        color="#e7969c",
        layout=Layout(BlockLayout(sum_norm=False, input_norm=False, branch_norm=False, carried_norm=True,
                                  qkv_norm=True),
                      first_block=PreLN.facts.layout.block),  # HybridNorm*
        requires={"qk_norm": ("none", "HybridNorm normalizes q, k and v per head itself (its QKV-norm); a second "
                                "QK-norm would normalize q and k twice")},
        undefined_architectures={"encoder-decoder": "HybridNorm (arXiv 2503.04598) defines decoder blocks only; where "
                                                    "cross-attention's norms would go is not in the paper"})

    def residual(self, sublayer, layer, make_norm, role):
        if layer == 0 and self.options["first_pre"]:
            return Residual(sublayer, in_norm=make_norm())
        if role == "attention":
            return Residual(sublayer, post_norm=make_norm())  # Norm(Y), which the FFN residual carries on
        return Residual(sublayer)

    def record(self):
        return {**super().record(), "qkv_norm": "per_head"}


@SCHEMES.register("keel")
class Keel(Scheme):
    """Keel (Chen & Wei 2026, "Post-LayerNorm Is Back", arXiv 2601.19895 §3.1): Post-LN whose residual carries a
    Highway-style scale α and whose branch reads a normalized input, x ← Norm(α·x + F(Norm′(x))), α = L.

        x ──┬── Norm′ ── F ──(+)── Norm ──► x'          first block (§3.1):  x ──┬── Norm′ ── F ──(+)──► x'
            └────── ×α ───────┘                                                   └───────────────┘

    L is the number of sub-layers the residual stream passes (2 per block; the paper's text counts α over
    sub-layers); option `alpha` sets α outright (default "L": 2·n_layer). The paper's first layer is the special
    case of §3.1: its sub-layers have neither the post-norm nor α, x ← x + F(Norm′(x)) (option
    `plain_first_layer`, default true; false: Keel's formula in every block). No final norm: the stream leaves
    the last block normalized, as in Post-LN.
    Decoder and encoder; refused in an encoder–decoder, where the paper gives no L for two stacks.
    """

    label = "Keel"
    name, formula, paper = ("keel", "x ← Norm(α·x + F(Norm(x))), α = L (sub-layers); first block x ← x + F(Norm(x))",
                            "arXiv 2601.19895")
    final_norm = False
    OPTIONS = {"alpha": "L", "plain_first_layer": True}
    facts = Facts(
        color="#3182bd",
        layout=Layout(BlockLayout(sum_norm=True, input_norm=True, inner_norm=False),
                      first_block=PreLN.facts.layout.block),  # §3.1's plain first layer; α is not visible
        incompatible_norms={"none": "α = L multiplies the residual every sub-layer; without the post-norm it grows "
                                    "as L^(2L)"},
        undefined_architectures={"encoder-decoder": "Keel (arXiv 2601.19895) sets α from the depth of one stack; it "
                                                    "defines no α for an encoder and a decoder"})

    def __init__(self, n_layer: int, stack: Stack | None = None, **options: float | bool):
        super().__init__(n_layer, stack, **options)
        alpha = self.options["alpha"]
        self.alpha = 2.0 * n_layer if alpha == "L" else alpha  # L: the sub-layers the stream passes, 2 a block
        if self.alpha <= 0:
            raise ValueError(f"scheme 'keel' option 'alpha' multiplies the residual and must be > 0, got {alpha!r}; "
                             f"leave it unset for α = L = 2·n_layer")

    def residual(self, sublayer, layer, make_norm, role):
        if layer == 0 and self.options["plain_first_layer"]:
            return Residual(sublayer, in_norm=make_norm())
        return Residual(sublayer, in_norm=make_norm(), post_norm=make_norm(), alpha=self.alpha)

    def record(self):
        return {**super().record(), "alpha": self.alpha}

    def alpha_at(self, layer: int) -> float | None:
        return None if layer == 0 and self.options["plain_first_layer"] else self.alpha  # §3.1: a plain first layer
