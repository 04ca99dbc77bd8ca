"""Normalization placement schemes, looked up by name in `SCHEMES`.

Every scheme is one class, its maths: which norm slots a sub-layer gets, the
residual multiplier α, the init gains, whether there is a final norm (and an
embedding norm). What others read of it is a small `Facts` object beside it:
the report's colour, how `normlab diagnose` recognises it (`layout`), and the
config's rules (which normalizers and architectures it refuses, the settings
its paper fixes, whether it stacks). The block and the trainer only ever call
`scheme.residual()`, telling it which sub-layer it wraps, and
`scheme.init_gains()`.

All schemes are special cases of one residual wrapper (`Residual`):

    x ← PostNorm( α·x + OutNorm( F( s·InNorm(x) ) ) )

with absent slots being identities and α = s = 1 unless a scheme says otherwise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, ClassVar, Literal

import torch
from torch import nn

from normlab.nn.residual import (DepthResidual, DepthSources, HyperResidual, HyperStreams, ManifoldMixing,
                                  OneStream, Residual, SpanResidual, StaticMixing, DynamicMixing)
from normlab.nn.sphere import Scale, project
from normlab.registry import Registry, check_options

SCHEMES: Registry[type["Scheme"]] = Registry("scheme")

NormFactory = Callable[[], nn.Module]
Role = Literal["attention", "cross_attention", "mlp"]
"""Which sub-layer a residual wraps: the block says so, and a scheme that treats them apart reads it there."""


@dataclass(frozen=True)
class InitGains:
    """Xavier-normal gains a scheme imposes on the block projections (DeepNorm, Sub-LN)."""

    qk: float
    """gain for the query and key projections"""
    v_out_ffn: float
    """gain for the value and output projections and every FFN weight"""
    why: str

    def gain(self, role: str) -> float:
        return self.qk if role in ("q", "k") else self.v_out_ffn


@dataclass(frozen=True)
class BlockLayout:
    """What one block's norms look like around its sub-layers, as one forward pass shows them to `normlab
    diagnose` (normlab.diagnostics.structure reads it). A fact left None is not looked at."""

    sum_norm: bool | None = None
    """the block's output is a norm's output: a norm on the residual sum (Post-LN)"""
    input_norm: bool | None = None
    """a norm reads the block's input x (Pre-LN)"""
    branch_norm: bool | None = None
    """a norm reads a sub-layer's output before it joins the stream"""
    only_branch_norms: bool | None = None
    """every norm on the stream reads a sub-layer's output (OLMo 2's reordered norm)"""
    inner_norm: bool | None = None
    """a norm of another width inside a sub-layer (Sub-LN's, after the FFN activation)"""
    side_by_side: bool | None = None
    """the sub-layers read x side by side, and every norm on the stream reads x (a parallel block)"""
    carried_norm: bool | None = None
    """the stream normalized between the sub-layers is carried into the block's output (HybridNorm's FFN residual)"""
    qkv_norm: bool | None = None
    """queries, keys and values normalized inside attention"""
    min_norms: int = 0
    """at least this many norms on the stream (a sandwich's two per sub-layer)"""

    def facts(self) -> dict[str, bool]:
        """The facts this layout fixes (those not left None), by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name != "min_norms" and getattr(self, f.name) is not None}

    @property
    def detail(self) -> int:
        """How much it says: where several layouts fit, the one that says most names the model."""
        return len(self.facts()) + (self.min_norms > 0)


@dataclass(frozen=True)
class Layout:
    """How `normlab diagnose` recognises a scheme: its blocks' layout and what the stack adds to it. Only norms
    are visible, never α, ω, 1/√ℓ or init gains: a scheme that differs from another by those alone declares the
    other's layout (DeepNorm declares Post-LN's) and is read as the first registered scheme that declares it."""

    block: BlockLayout
    """every block's layout, but where the fields below say otherwise"""
    embed_norm: bool | None = None
    """a norm on the embeddings before the first block (Peri-LN)"""
    first_block: BlockLayout | None = None
    """what block 0 may look like instead, another scheme's block (HybridNorm*'s and Keel's Pre-LN first block)"""
    lower_blocks: BlockLayout | None = None
    """what the blocks below a switch look like, another scheme's block (Mix-LN's Post-LN); the stack has both"""

    @property
    def detail(self) -> int:
        return self.block.detail + sum(f is not None for f in (self.embed_norm, self.first_block, self.lower_blocks))


ARCHITECTURES = {"decoder": "decoder-only", "encoder": "encoder-only", "encoder-decoder": "encoder-decoder"}


@dataclass(frozen=True)
class Stack:
    """Which stack of which architecture a scheme instance normalizes (DeepNorm's constants depend on it).

    `part` is "encoder" or "decoder"; `n_encoder` / `n_decoder` are both stacks' depths (N and M)."""

    architecture: str = "decoder-only"  # encoder-only | decoder-only | encoder-decoder (DeepNet's names)
    part: str = "decoder"
    n_encoder: int = 0
    n_decoder: int = 0

    @classmethod
    def decoder_only(cls, n_layer: int) -> "Stack":
        return cls("decoder-only", "decoder", 0, n_layer)

    def record(self) -> dict[str, object]:
        return {"architecture": self.architecture, "part": self.part, "n_encoder": self.n_encoder,
                "n_decoder": self.n_decoder}


NO_NORM_COLLAPSES = {"none": "with norm 'none' nothing is normalized: the placement no longer matters and the model "
                             "is the un-normalized control under another name"}


@dataclass(frozen=True)
class Facts:
    """What a scheme's maths leaves to others, as data each reader takes on its own floor: the report's colour,
    how `normlab diagnose` recognises it, and what a config may combine it with (nn/config.py, config.py, the
    stacked trainer)."""

    color: str = "#7f7f7f"
    """Its colour in every plot of the report, so one scheme looks the same in all of them."""
    layout: Layout | None = None
    """What its norms look like around the sub-layers: how `normlab diagnose` recognises it."""
    requires: dict[str, tuple[object, str]] = field(default_factory=dict)
    """model setting -> (the value the scheme's paper fixes, why): a config that leaves the setting unset gets
    the value; one that sets another is refused in one line naming both."""
    incompatible_norms: dict[str, str] = field(default_factory=dict)
    """normalizer name -> why the combination is refused"""
    degenerate_norms: dict[str, str] = field(default_factory=lambda: dict(NO_NORM_COLLAPSES))
    """normalizer name -> why the combination is allowed but collapses into another model (`normlab check`)"""
    undefined_architectures: dict[str, str] = field(default_factory=dict)
    """architecture (encoder-only, decoder-only, encoder-decoder) -> why the scheme is refused there (its paper
    does not define it)"""
    final_norm_required: str | None = None
    """Why `final_norm = false` is refused, if it is (the final module is part of the scheme's formula)."""
    stackable: bool = True
    """Whether normlab.nn.stacked can train many of its models as one (its parameters live in Linear,
    Embedding and Norm leaves only)."""
    checkpointable: bool = True
    """Whether a block can be recomputed in the backward pass (activation checkpointing): no state shared
    between blocks within a forward pass."""


class Scheme:
    """Base class: a scheme's maths. Subclasses set the class attributes and override `residual`; what others read
    of it besides (colour, diagnose's layout, config rules) is its `facts`."""

    name: ClassVar[str] = ""
    formula: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    source: ClassVar[str] = ""
    """Where its recipe was checked, beyond the paper: official or reference code by file:line at a commit, or
    that none was found (`normlab schemes`, docs/schemes.md)."""
    label: ClassVar[str] = ""
    """How a reader names it (`Post-LN`): summaries and legends. Its place in lists is its registration order."""
    final_norm: ClassVar[bool] = True
    """Default: a norm before the output head."""
    embed_norm: ClassVar[bool] = False
    """A norm on the embedding output, before the first block."""
    inner_norms: ClassVar[bool] = False
    """Norms inside the sub-layers (before attention's output projection, after the FFN activation)."""
    qkv_norm: ClassVar[bool] = False
    """q, k and v normalized per head inside self-attention (HybridNorm's QKV-norm), with the model's normalizer."""
    on_sphere: ClassVar[bool] = False
    """Hidden states, embeddings and weights on the unit sphere (nGPT): the block's attention and MLP carry nGPT's
    scaling vectors (`normlab.nn.sphere`), the head its logit scale, and `project` puts the weights back on the
    sphere after init and after every optimizer step."""
    OPTIONS: ClassVar[dict[str, object]] = {}
    """option name -> its default, whose type is the option's: a bool is a switch, a float a number.
    `model.scheme_options` stores every value as a number (run ids hash it so), and `typed_options` reads a
    switch's 1 or 0 back as true or false."""
    facts: ClassVar[Facts] = Facts()

    def __init_subclass__(cls, **kwargs):
        """A scheme that sets one of `Facts`' fields as a class attribute (as schemes did before `facts`) is
        refused where it is written: left there, the report, diagnose and the config would never read it."""
        super().__init_subclass__(**kwargs)
        stray = sorted({f.name for f in fields(Facts)} & set(vars(cls)))
        if stray:
            raise TypeError(f"scheme class {cls.__name__} sets {', '.join(stray)} as class attributes; they are "
                            f"its facts: write facts = Facts({', '.join(f'{n}=...' for n in stray)}) (or "
                            f"dataclasses.replace(<base>.facts, ...) on a scheme it builds on)")

    def __init__(self, n_layer: int, stack: Stack | None = None, **options: float | bool):
        self.n_layer = n_layer
        self.stack = stack or Stack.decoder_only(n_layer)
        self.options = self.typed_options(options)
        why = self.facts.undefined_architectures.get(self.stack.architecture)
        if why:
            article = "an" if self.stack.architecture.startswith("e") else "a"
            raise ValueError(f"scheme {self.name!r} is not defined for {article} {self.stack.architecture} model: "
                             f"{why}")

    @classmethod
    def typed_options(cls, given: dict[str, float | bool]) -> dict[str, object]:
        """Every option, the given ones read as their default's type: a switch takes true or false (1 or 0)."""
        options = dict(cls.OPTIONS)
        for key, value in given.items():
            if isinstance(cls.OPTIONS[key], bool):
                if value not in (0, 1):  # True == 1 and False == 0 as well
                    raise ValueError(f"scheme {cls.name!r} option {key!r} is a switch: true or false (1 or 0), "
                                     f"got {value!r}")
                options[key] = bool(value)
            else:
                options[key] = float(value)
        return options

    @classmethod
    def norm_refusal(cls, norm: str) -> str | None:
        """Why the scheme cannot be used with normalizer `norm` (None: it can): the one its paper fixes
        (`Facts.requires`), else `Facts.incompatible_norms`."""
        required = cls.facts.requires.get("norm")
        if required is not None and norm != required[0]:
            return f"it normalizes with {required[0]!r} only: {required[1]}"
        return cls.facts.incompatible_norms.get(norm)

    @classmethod
    def fit(cls, settings: dict[str, object], axes: tuple[str, ...] = ()) -> tuple[dict[str, object] | None, str]:
        """`settings` (ModelConfig fields) as this scheme builds them, for the paths that go over every scheme
        (bench, `normlab schemes`, C16, the stacked trainer, the all-combination tests): (the settings with
        every value the scheme fixes in, what was replaced in words or ""), or (None, why) where the scheme
        refuses the combination: a normalizer or architecture it cannot take, or a fixed setting the path
        compares (`axes`), which it must not quietly change."""
        norm, arch = settings.get("norm"), ARCHITECTURES.get(str(settings.get("arch", "decoder")))
        refusal = cls.norm_refusal(norm) if isinstance(norm, str) else None
        if refusal:
            return None, f"scheme {cls.name!r} cannot be used with normalizer {norm!r}: {refusal}"
        undefined = cls.facts.undefined_architectures
        if arch in undefined:
            return None, f"scheme {cls.name!r} is not defined for {arch} models: {undefined[arch]}"
        fitted, replaced = dict(settings), []
        for key, (value, why) in cls.facts.requires.items():
            if fitted.get(key, value) != value:
                if key in axes:
                    return None, f"scheme {cls.name!r} needs {key} = {value!r} (not {fitted[key]!r}): {why}"
                replaced.append(f"{key} = {value!r} for {fitted[key]!r} ({why})")
            fitted[key] = value
        return fitted, f"scheme {cls.name!r} sets " + "; ".join(replaced) if replaced else ""

    def residual(self, sublayer: nn.Module, layer: int, make_norm: NormFactory, role: Role) -> Residual:
        """Wrap `sublayer`, the `role` sub-layer of block `layer` (0-based), around the residual stream."""
        raise NotImplementedError

    @staticmethod
    def combine(x: torch.Tensor, attn: nn.Module, cross: nn.Module | None, mlp: nn.Module,
                memory: torch.Tensor | None) -> torch.Tensor:
        """How a block runs its residual sub-layers: one after another, each reading the stream the one before
        it left (a scheme whose sub-layers read the stream side by side overrides this)."""
        x = attn(x)  # (B, T, C)
        if cross is not None:
            x = cross(x, memory)
        return mlp(x)

    def init_gains(self) -> InitGains | None:
        """Xavier-normal gains that replace the base init, or None to keep it."""
        return None

    def final(self, make_norm: NormFactory) -> nn.Module:
        """The module between the last block and the head (where `final_norm` is on): a norm."""
        return make_norm()

    def record(self) -> dict[str, object]:
        """What this instance actually uses (recorded in the run directory)."""
        return {"name": self.name, **self.options}

    def alpha_at(self, layer: int) -> float | None:
        """The residual α this scheme puts on block `layer`'s sub-layers (None: it sets none there), as
        `normlab check` verifies it: the scheme's one α, unless a block is its own special case."""
        alpha = self.record().get("alpha")
        return None if alpha is None else float(alpha)

    def project(self, model: nn.Module) -> None:
        """Put the model's weights where the scheme keeps them; called after init and after every optimizer step.
        Nothing for every scheme but nGPT, whose weights live on the unit sphere."""

    def logit_scale(self, vocab_size: int, d_model: int) -> nn.Module:
        """The module between the output projection and the logits: nothing (nGPT: its s_z)."""
        return nn.Identity()

    def residual_state(self, d_model: int) -> nn.Module:
        """The residual state's entry after the embedding and exit before the final norm
        (`normlab.nn.residual`): one stream for every scheme but those that widen it (hyper-connections) or keep
        the layers' outputs (Attention Residuals)."""
        return OneStream()


@SCHEMES.register("post")
class PostLN(Scheme):
    """Post-LN (Vaswani et al. 2017, arXiv 1706.03762): x ← Norm(x + F(x)). No final norm.

        x ──┬── F ──(+)── Norm ──► x'
            └───────┘
    """

    label = "Post-LN"
    name, formula, paper = "post", "x ← Norm(x + F(x))", "arXiv 1706.03762"
    final_norm = False
    facts = Facts(
        color="#d62728",
        layout=Layout(BlockLayout(sum_norm=True, input_norm=False, branch_norm=False)))

    def residual(self, sublayer, layer, make_norm, role):
        return Residual(sublayer, post_norm=make_norm())


@SCHEMES.register("pre")
class PreLN(Scheme):
    """Pre-LN (Xiong et al. 2020, arXiv 2002.04745; GPT-2): x ← x + F(Norm(x)), final norm.

        x ──┬── Norm ── F ──(+)──► x'        … last block ── Norm ── head
            └───────────────┘
    """

    label = "Pre-LN"
    name, formula, paper = "pre", "x ← x + F(Norm(x)); final Norm", "arXiv 2002.04745"
    facts = Facts(
        color="#1f77b4",
        layout=Layout(BlockLayout(sum_norm=False, input_norm=True)),  # sandwich, Sub-LN, parallel blocks fit it too
        degenerate_norms={})  # pre + none is *the* no-norm control

    def residual(self, sublayer, layer, make_norm, role):
        return Residual(sublayer, in_norm=make_norm())


@SCHEMES.register("sandwich")
class SandwichLN(Scheme):
    """Sandwich-LN (CogView, Ding et al. 2021, arXiv 2105.13290): x ← x + Norm(F(Norm(x))), final norm.

        x ──┬── Norm ── F ── Norm ──(+)──► x'
            └───────────────────────┘

    Same block as Peri-LN; CogView leaves the embedding un-normalized.
    """

    label = "Sandwich-LN"
    name, formula, paper = "sandwich", "x ← x + Norm(F(Norm(x))); final Norm", "arXiv 2105.13290"
    facts = Facts(
        color="#9467bd",
        layout=Layout(BlockLayout(sum_norm=False, input_norm=True, inner_norm=False, side_by_side=False, min_norms=4)))

    def residual(self, sublayer, layer, make_norm, role):
        return Residual(sublayer, in_norm=make_norm(), out_norm=make_norm())


@SCHEMES.register("peri")
class PeriLN(SandwichLN):
    """Peri-LN (Kim et al. 2025, arXiv 2502.02732): x ← x + Norm(F(Norm(x))), final norm.

        emb ── Norm ──► x;   x ──┬── Norm ── F ── Norm ──(+)──► x'
                                 └───────────────────────┘

    The block is Sandwich-LN's; Peri-LN also normalizes the embedding output
    before the first block, which CogView's Sandwich-LN does not.
    """

    label = "Peri-LN"
    name, formula, paper = "peri", "x ← x + Norm(F(Norm(x))); Norm on embeddings; final Norm", "arXiv 2502.02732"
    embed_norm = True
    facts = replace(
        SandwichLN.facts,
        color="#2ca02c",
        layout=Layout(SandwichLN.facts.layout.block, embed_norm=True))


def deepnorm_constants(architecture: str, n_encoder: int = 0, n_decoder: int = 0) -> dict[str, dict[str, float]]:
    """DeepNet's α (residual multiplier) and β (init gain), Wang et al. 2022, arXiv 2203.00555, Table/Fig. 2.

    N = encoder layers, M = decoder layers. Returns {"encoder": {...}, "decoder": {...}}
    with the parts the architecture has.
    """
    N, M = n_encoder, n_decoder
    if architecture == "encoder-only":
        _require(N, "n_encoder", architecture)
        return {"encoder": {"alpha": (2 * N) ** 0.25, "beta": (8 * N) ** -0.25}}
    if architecture == "decoder-only":
        _require(M, "n_decoder", architecture)
        return {"decoder": {"alpha": (2 * M) ** 0.25, "beta": (8 * M) ** -0.25}}
    if architecture == "encoder-decoder":
        _require(N, "n_encoder", architecture)
        _require(M, "n_decoder", architecture)
        return {
            "encoder": {"alpha": 0.81 * (N**4 * M) ** (1 / 16), "beta": 0.87 * (N**4 * M) ** (-1 / 16)},
            "decoder": {"alpha": (3 * M) ** 0.25, "beta": (12 * M) ** -0.25},
        }
    raise ValueError(f"unknown architecture {architecture!r}; valid: encoder-only, decoder-only, encoder-decoder")


def _require(n: int, what: str, architecture: str) -> None:
    if n < 1:
        raise ValueError(f"{architecture} DeepNorm needs {what} >= 1, got {n}")


@SCHEMES.register("deepnorm")
class DeepNorm(Scheme):
    """DeepNorm (DeepNet, Wang et al. 2022, arXiv 2203.00555): x ← Norm(α·x + F(x)).

        x ──┬────── F ─────(+)── Norm ──► x'
            └──── ×α ───────┘

    α and β depend on the architecture and the stack (DeepNet Table 1; N encoder, M decoder layers):
    decoder-only α = (2M)^¼, β = (8M)^−¼; encoder-only α = (2N)^¼, β = (8N)^−¼; encoder–decoder:
    encoder α = 0.81(N⁴M)^1/16, β = 0.87(N⁴M)^−1/16, decoder α = (3M)^¼, β = (12M)^−¼.
    β is the Xavier-normal gain of the value, output and FFN weights (cross-attention's too);
    query and key keep gain 1. No final norm (it is Post-LN with an up-weighted residual).
    """

    label = "DeepNorm"
    name, formula, paper = ("deepnorm", "x ← Norm(α·x + F(x)); α, β per architecture (decoder-only: α=(2L)^¼, "
                                        "init gain β=(8L)^−¼)", "arXiv 2203.00555")
    final_norm = False
    facts = Facts(
        color="#ff7f0e",
        layout=PostLN.facts.layout,  # α is not visible in the structure
        incompatible_norms={"none": "α > 1 multiplies the residual every sub-layer; without a norm it grows as "
                                    "α^(2L)"})

    @property
    def constants(self) -> dict[str, float]:
        """α and β of the paper's Table 1 for this stack of this architecture (N, M: encoder, decoder depth)."""
        st = self.stack
        return deepnorm_constants(st.architecture, n_encoder=st.n_encoder, n_decoder=st.n_decoder)[st.part]

    def residual(self, sublayer, layer, make_norm, role):
        return Residual(sublayer, post_norm=make_norm(), alpha=self.constants["alpha"])

    def init_gains(self):
        st = self.stack
        article = "an" if st.architecture.startswith("e") else "a"
        return InitGains(qk=1.0, v_out_ffn=self.constants["beta"],
                         why=f"DeepNorm β for the {st.part} of {article} {st.architecture} model "
                             f"(N = {st.n_encoder}, M = {st.n_decoder}), DeepNet Table 1")

    def record(self):
        return {**super().record(), **self.constants, **self.stack.record()}


@SCHEMES.register("mix")
class MixLN(Scheme):
    """Mix-LN (Li et al. 2024, arXiv 2412.13795): Post-LN in the first ⌊ρ·L⌋ blocks, Pre-LN after.

        blocks 0 … ⌊ρL⌋−1:  x ← Norm(x + F(x))
        blocks ⌊ρL⌋ … L−1:  x ← x + F(Norm(x));  final Norm

    Option `mix_ratio` ρ (default 0.25).
    """

    label = "Mix-LN"
    name, formula, paper = "mix", "Post-LN in blocks < ⌊ρL⌋, Pre-LN after; final Norm", "arXiv 2412.13795"
    OPTIONS = {"mix_ratio": 0.25}
    facts = Facts(
        color="#8c564b",
        layout=Layout(PreLN.facts.layout.block, lower_blocks=PostLN.facts.layout.block))

    def __init__(self, n_layer: int, stack: Stack | None = None, **options: float | bool):
        super().__init__(n_layer, stack, **options)
        ratio = self.options["mix_ratio"]
        if not 0.0 <= ratio <= 1.0:
            raise ValueError(f"mix_ratio must be in [0, 1], got {ratio}")
        self.n_post = math.floor(ratio * n_layer)

    def residual(self, sublayer, layer, make_norm, role):
        if layer < self.n_post:
            return Residual(sublayer, post_norm=make_norm())
        return Residual(sublayer, in_norm=make_norm())

    def record(self):
        return {**super().record(), "n_post_layers": self.n_post}


@SCHEMES.register("lns")
class LayerNormScaling(PreLN):
    """LayerNorm Scaling (Sun et al. 2025, "The Curse of Depth", arXiv 2502.05795).

    Pre-LN with each norm's output scaled by 1/√ℓ, ℓ the 1-based layer index:

        x ──┬── Norm ── ×1/√ℓ ── F ──(+)──► x'      final Norm unscaled
            └────────────────────────┘
    """

    label = "LayerNorm Scaling"
    name, formula, paper = "lns", "x ← x + F(Norm(x)/√ℓ), ℓ = layer + 1; final Norm", "arXiv 2502.05795"
    facts = replace(
        PreLN.facts,  # its layout too: the 1/√ℓ is not visible in the structure, `normlab diagnose` reads Pre-LN
        color="#e377c2",
        incompatible_norms={"none": "LayerNorm Scaling scales a normalizer's output; with no normalizer there is "
                                    "none to scale"})

    def residual(self, sublayer, layer, make_norm, role):
        return Residual(sublayer, in_norm=make_norm(), in_scale=1.0 / math.sqrt(layer + 1))


@SCHEMES.register("subln")
class SubLN(PreLN):
    """Sub-LN (Magneto, Wang et al. 2022, arXiv 2210.06423; torchscale's default).

    Pre-LN plus a norm before attention's output projection and one after the
    FFN activation; Xavier-normal init with gain γ = sqrt(log 2L) for the
    value, output and FFN weights, gain 1 for query and key:

        x ──┬── Norm ── F[ … Norm … ] ──(+)──► x'     final Norm
            └────────────────────────────┘
    """

    label = "Sub-LN"
    name, formula, paper = "subln", "x ← x + F(Norm(x)), F with an inner Norm; init γ=√(log 2L)", "arXiv 2210.06423"
    inner_norms = True
    facts = replace(
        PreLN.facts,
        color="#17becf",
        layout=Layout(BlockLayout(sum_norm=False, input_norm=True, inner_norm=True)),
        degenerate_norms=dict(NO_NORM_COLLAPSES))

    @property
    def gamma(self) -> float:
        return math.sqrt(math.log(2 * self.n_layer))

    def init_gains(self):
        return InitGains(qk=1.0, v_out_ffn=self.gamma, why="Sub-LN γ = sqrt(log(2·n_layer))")

    def record(self):
        return {**super().record(), "gamma": self.gamma}


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


class SphereResidual(Residual):
    """nGPT's step on the unit sphere (arXiv 2410.01131 §2.2.2, Eq. 10–11): the branch's output is normalized,
    the stream moves toward it by the learned eigen learning rates α (one per channel) and is normalized again,

        h ← Norm(h + α ⊙ (Norm(F(h)) − h))

              ┌── F ── Norm ──(−)── ×α ──┐
        h ──┬─┘               ▲           ▼
            └─────────────────┴──────────(+)── Norm ──► h'

    α is stored as its scale (1/√d) and read as stored · (alpha_init / scale), the paper's α_init = 0.05
    ("of the order of 1/n_layers") and α_scale = 1/√d_model (§2.5). The reference code (NVIDIA/ngpt model.py)
    also takes |α|; the paper's Eq. 10–11 do not, and neither does normlab (α starts and, in our runs, stays
    positive)."""

    def __init__(self, sublayer: nn.Module, out_norm: nn.Module, post_norm: nn.Module, d: int, alpha_init: float):
        super().__init__(sublayer, out_norm=out_norm, post_norm=post_norm)
        self.eigen_lr = Scale(d, alpha_init, d ** -0.5)

    def forward(self, x: torch.Tensor, *context: torch.Tensor) -> torch.Tensor:
        h = self.out_norm(self.sublayer(x, *context))  # the branch's output, on the sphere (B, T, C)
        return self.post_norm(x + self.eigen_lr(h - x))

    def extra_repr(self) -> str:
        return f"alpha_init={self.eigen_lr.init:g}"


@SCHEMES.register("ngpt")
class NGPT(Scheme):
    """nGPT (Loshchilov et al. 2024, arXiv 2410.01131): every vector of the embedding dimension lives on the unit
    sphere. Embedding rows, the rows of every stream-reading projection and the columns of every stream-writing
    one are unit vectors, put back after each optimizer step (`project`); each sub-layer moves the hidden state
    along the sphere by learned eigen learning rates α (`SphereResidual`):

        h ← Norm(h + α_A ⊙ (Norm(Attn(h)) − h));   h ← Norm(h + α_M ⊙ (Norm(MLP(h)) − h))

    Norm is x/‖x‖ (the `l2` normalizer), the attention normalizes q and k per head and scales them by s_qk
    with scores × √d_head, the SwiGLU MLP scales u and v by s_u and s_v·√d, and the logits are scaled by s_z
    (`normlab.nn.sphere`). No final norm: the last hidden state is already a unit vector. Option `alpha_init`
    (0.05, the paper's α_A,init = α_M,init). The paper trains with RoPE, SwiGLU and no biases; a config that
    leaves those unset gets them, and separate input and output embeddings. Its recipe also drops weight decay
    and warmup (its code: weight_decay 0, warmup 0, lr 3e-3): training settings, set by whoever trains it (the
    frontier claim F1 does). Decoder only: the paper defines a decoder-only LM.
    """

    label = "nGPT"
    name, formula, paper = ("ngpt", "h ← Norm(h + α ⊙ (Norm(F(h)) − h)), Norm = x/‖x‖; unit-norm weights and "
                                    "embeddings", "arXiv 2410.01131")
    final_norm = False
    OPTIONS = {"alpha_init": 0.05}
    on_sphere = True
    facts = Facts(
        color="#8c6d31",
        layout=Layout(BlockLayout(sum_norm=True, input_norm=False, branch_norm=True)),  # α is not visible
        requires={
            "norm": ("l2", "nGPT's Norm is x/‖x‖ (arXiv 2410.01131 §2.1): its update interpolates between unit "
                           "vectors"),
            "positions": ("rope", "nGPT's models use rotary positions (§2.3.2); a learned position table added to "
                                  "unit embeddings would take them off the sphere"),
            "mlp": ("swiglu", "nGPT's MLP is SwiGLU with its scaling vectors s_u, s_v (§2.4.2)"),
            "bias": (False, "nGPT's projections are matrices of unit vectors, with no biases (§2.6)"),
            "qk_norm": ("none", "nGPT normalizes q and k itself, after the rotation, scaled by s_qk (§2.3.2)"),
            "embed_scale": (1.0, "nGPT's input embeddings are unit vectors, read as they are (§2.2.1)"),
            "learned_embed_scale": (False, "nGPT's input embeddings are unit vectors, read as they are (§2.2.1)"),
            "tie_weights": (False, "nGPT has an input and an output embedding, each of unit rows (§2.2.1; its code: "
                                   "\"in the nGPT paper there was no weight tying\")"),
        },
        undefined_architectures={
            "encoder-only": "nGPT (arXiv 2410.01131) defines a decoder-only language model",
            "encoder-decoder": "nGPT (arXiv 2410.01131) defines a decoder-only language model; where cross-attention "
                               "would meet the sphere is not in the paper"},
        stackable=False)  # its scaling vectors and the projection after each step: normlab.nn.stacked has neither

    def residual(self, sublayer, layer, make_norm, role):
        out_norm = make_norm()
        return SphereResidual(sublayer, out_norm, make_norm(), out_norm.d, self.options["alpha_init"])

    def project(self, model):
        tables = [model.wte.weight] + ([] if model.lm_head.weight is model.wte.weight else [model.lm_head.weight])
        project(tables, model.projections())

    def logit_scale(self, vocab_size, d_model):
        return Scale(vocab_size, 1.0, d_model ** -0.5)  # s_z: init 1, scale 1/√d_model (§2.5, Eq. 23)


NO_ENCODER_DECODER = ("{paper} defines decoder-only language models; how cross-attention would read and write its "
                      "residual state is not in the paper")

def _decoder_encoder_only(paper: str) -> dict[str, str]:
    return {"encoder-decoder": NO_ENCODER_DECODER.format(paper=paper)}


@SCHEMES.register("hc")
class HyperConnections(Scheme):
    """Hyper-connections (Zhu et al. 2024, arXiv 2409.19606): the residual stream widens to n streams; each
    sub-layer reads a learned mix of them, writes back through learned weights, and the streams mix:

        x ← H_res·x + H_postᵀ ⊗ F(Norm(H_pre·x))          x: (B, T, n, C)

             x ──► H_pre· ──► Norm ── F ──┐
             │                            ⊗ H_post
             └──► H_res· ────────────────(+)──► x'

    Static (HC §3.1) by default; option `dynamic` adds the input-dependent part (DHC, §3.2). Initialised as
    Pre-LN (§3.3: sub-layer k reads stream k mod n, H_post = 1, H_res = I). The embedding enters as n copies
    and the streams leave summed, then the final norm. Option `expansion` n (default 4, the paper's best).
    """

    label = "Hyper-connections"
    name, formula, paper = ("hc", "x ← H_res·x + H_postᵀ⊗F(Norm(H_pre·x)), n streams; final Norm", "arXiv 2409.19606")
    source = ("no official code; lucidrains/hyper-connections@4775103 hyper_connections.py:61 (streams summed), "
              "215 (k mod n), 229-247 (static init, dynamic W = 0, scales 0.01)")
    OPTIONS = {"expansion": 4.0, "dynamic": False}
    facts = Facts(color="#9edae5", undefined_architectures=_decoder_encoder_only("Hyper-connections (arXiv 2409.19606)"),
                  stackable=False)

    def __init__(self, n_layer: int, stack: Stack | None = None, **options: float | bool):
        super().__init__(n_layer, stack, **options)
        self.n = _streams(self.name, self.options["expansion"])

    def residual(self, sublayer, layer, make_norm, role):
        norm = make_norm()
        k = 2 * layer + (role != "attention")  # the paper counts sub-layers: attention and FFN each one "layer"
        mixing = DynamicMixing(self.n, k, norm.d) if self.options["dynamic"] else StaticMixing(self.n, k)
        return HyperResidual(sublayer, norm, mixing)

    def residual_state(self, d_model):
        return HyperStreams(self.n)

    def record(self):
        return {**super().record(), "streams": self.n}


@SCHEMES.register("mhc")
class ManifoldHyperConnections(HyperConnections):
    """mHC, manifold-constrained hyper-connections (Xie et al. 2025, DeepSeek, arXiv 2512.24880): HC whose
    stream mixing H_res is projected onto the doubly stochastic matrices by Sinkhorn–Knopp, and whose H_pre and
    H_post are kept non-negative, all three computed from the RMS-normalized flattened streams (§4.2):

        x ← H_res·x + H_postᵀ ⊗ F(Norm(H_pre·x)),   H_res = Sinkhorn(·), H_pre = σ(·), H_post = 2σ(·)

    A doubly stochastic H_res keeps the composite mapping across layers a mean of the streams (its row and column
    sums stay 1), where HC's may grow with depth (the paper's Amax gain, Fig. 3). Options `expansion` n (4, §5.1)
    and `sinkhorn_iters` (20, §4.2; DeepSeek-V4's hc_sinkhorn_iters). φ is drawn with σ = 0.02·√(4096/C), which
    keeps its logits' RMS at init as at DeepSeek-V4's width (4096, σ 0.02); the gates α start at 0.01.
    """

    label = "mHC"
    name, formula, paper = ("mhc", "HC with H_res = Sinkhorn(·) doubly stochastic, H_pre = σ(·), H_post = 2σ(·); "
                                   "final Norm", "arXiv 2512.24880")
    source = ("transformers 5.24 models/deepseek_v4/modeling_deepseek_v4.py:885-996 (DeepseekV4HyperConnection: "
              "σ, 2σ, Sinkhorn at 982-991, init at 1287-1290); configuration_deepseek_v4.py:149-151 (n 4, 20 "
              "iterations, ε 1e-6)")
    OPTIONS = {"expansion": 4.0, "sinkhorn_iters": 20.0}
    facts = replace(HyperConnections.facts, color="#dbdb8d",
                    undefined_architectures=_decoder_encoder_only("mHC (arXiv 2512.24880)"))
    REFERENCE_WIDTH, REFERENCE_STD, GATE_INIT = 4096, 0.02, 0.01

    def residual(self, sublayer, layer, make_norm, role):
        norm = make_norm()
        iters = int(self.options["sinkhorn_iters"])
        if iters < 1:
            raise ValueError(f"scheme 'mhc' option 'sinkhorn_iters' must be >= 1, got {iters}")
        std = self.REFERENCE_STD * math.sqrt(self.REFERENCE_WIDTH / norm.d)
        k = 2 * layer + (role != "attention")
        return HyperResidual(sublayer, norm, ManifoldMixing(self.n, k, norm.d, iters, std, self.GATE_INIT))


def _streams(scheme: str, expansion: float) -> int:
    if expansion != int(expansion) or expansion < 1:
        raise ValueError(f"scheme {scheme!r} option 'expansion' is a number of streams, an integer >= 1; "
                         f"got {expansion:g}")
    return int(expansion)


@SCHEMES.register("attnres")
class AttentionResiduals(Scheme):
    """Attention Residuals (Kimi Team 2026, arXiv 2603.15031): each sub-layer reads a softmax-weighted sum of
    the preceding layers' outputs instead of their unit-weight sum,

        h_l = Σ_{i<l} α_{i→l} v_i,   α_{i→l} = softmax_i(w_l · RMSNorm(v_i)),   v_0 = embedding, v_i = F_i(Norm(h_i))

          v_0 … v_{l−1} ──► softmax over depth (query w_l) ──► Norm ── F_l ──► v_l

    Full AttnRes by default (every sub-layer's output its own source); option `block_layers` S > 0 is Block
    AttnRes: the outputs within S blocks are summed into one source, and a new source starts at the attention
    of every S-th block (Inkling-2's `n_layers_per_attn_res_block`). w_l starts at zero (a uniform average over
    depth). The stream leaves through one more depth attention, then the final norm.
    """

    label = "Attention Residuals"
    name, formula, paper = ("attnres", "h_l = Σ_i softmax_i(w_l·RMSNorm(v_i))·v_i over earlier outputs v_i; final Norm",
                            "arXiv 2603.15031")
    source = ("MoonshotAI/Attention-Residuals (README pseudocode only, seen through a copy); transformers 5.24 "
              "models/inkling2/modeling_inkling2.py:833-858 (Inkling2BlockAttentionResidual), 866 (boundary), "
              "1421-1438 (sources, final aggregation)")
    OPTIONS = {"block_layers": 0.0}
    facts = Facts(color="#f7b6d2", undefined_architectures=_decoder_encoder_only("Attention Residuals (arXiv 2603.15031)"),
                  stackable=False)

    def __init__(self, n_layer: int, stack: Stack | None = None, **options: float | bool):
        super().__init__(n_layer, stack, **options)
        size = self.options["block_layers"]
        if size != int(size) or size < 0:
            raise ValueError(f"scheme 'attnres' option 'block_layers' is a number of blocks per AttnRes block, an "
                             f"integer >= 0 (0: Full AttnRes); got {size:g}")
        self.block_layers = int(size)

    def boundary(self, layer: int, role: Role) -> bool:
        """Whether this sub-layer's output starts a new source."""
        return self.block_layers == 0 or (role == "attention" and layer % self.block_layers == 0)

    def residual(self, sublayer, layer, make_norm, role):
        norm = make_norm()
        return DepthResidual(sublayer, norm, norm.d, self.boundary(layer, role))

    def residual_state(self, d_model):
        return DepthSources(d_model)

    def record(self):
        return {**super().record(), "variant": "block" if self.block_layers else "full"}


@SCHEMES.register("spannorm")
class SpanNorm(Scheme):
    """SpanNorm (Wang, Li et al. 2026, arXiv 2601.22580): a clean residual spans the whole block and a
    PostNorm-style norm normalizes the aggregated output,

        y = Norm(x + Attn(x));   x' = Norm′(x + FFN(y))          block 0: Attn(Norm₀(x))

        x ──┬── Attn ──(+)── Norm ── y ── FFN ──(+)── Norm′ ──► x'
            ├─────────┘                          │
            └────────────────────────────────────┘

    No primary source for the block's equations was found (only the abstract; no official code): normlab
    follows the paper's Eq. 5–8 as a third-party adaptation quotes them (docs/schemes.md says which). The
    paper's "principled scaling strategy" is not built: its constant is in neither source. No final norm: the
    stream leaves the last block normalized, as in Post-LN. Decoder and encoder.
    """

    label = "SpanNorm"
    name, formula, paper = ("spannorm", "y = Norm(x + Attn(x)); x' = Norm(x + FFN(y)); Norm on block 0's attention "
                                        "input", "arXiv 2601.22580")
    source = "none found: no official code; the block as a third-party adaptation quotes the paper's Eq. 5-8"
    final_norm = False
    facts = Facts(color="#aec7e8",  # no layout: its norms sit where Post-LN's do; its span skip is not a norm
                  stackable=False,  # normlab.nn.stacked runs the sub-layers one after another, each on its own input
                  incompatible_norms={"none": "SpanNorm is defined by its two norms on the sums; with no normalizer "
                                              "the stream grows with every block"},
                  undefined_architectures=_decoder_encoder_only("SpanNorm (arXiv 2601.22580)"))

    def residual(self, sublayer, layer, make_norm, role):
        if role == "attention":
            return Residual(sublayer, in_norm=make_norm() if layer == 0 else None, post_norm=make_norm())
        return SpanResidual(sublayer, post_norm=make_norm())

    @staticmethod
    def combine(x, attn, cross, mlp, memory):
        return mlp(attn(x), x)  # (B, T, C): the FFN's residual is the block's input


def build_scheme(name: str, n_layer: int, options: dict[str, float | bool] | None = None,
                 stack: Stack | None = None) -> Scheme:
    cls = SCHEMES.get(name)
    check_options("scheme", name, options or {}, cls.OPTIONS)
    return cls(n_layer, stack, **(options or {}))
