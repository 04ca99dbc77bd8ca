"""What every scheme is: the `Scheme` base class (its maths: `residual`, `combine`, `init_gains`, `final`,
`residual_state`), the `Facts` others read of it (colour, diagnose's `Layout`, the config's rules), the stack it
normalizes (`Stack`), and the registry `SCHEMES` with `build_scheme`."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Callable, ClassVar, Literal

import torch
from torch import nn

from normlab.nn.residual import OneStream, Residual
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

    @property
    def depth(self) -> int:
        """The blocks of this stack: N for the encoder, M for the decoder."""
        return self.n_encoder if self.part == "encoder" else self.n_decoder

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


def build_scheme(name: str, n_layer: int, options: dict[str, float | bool] | None = None,
                 stack: Stack | None = None) -> Scheme:
    cls = SCHEMES.get(name)
    check_options("scheme", name, options or {}, cls.OPTIONS)
    return cls(n_layer, stack, **(options or {}))
