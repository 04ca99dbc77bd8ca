"""One Hugging Face family, read in and written out by one adapter.

An adapter states its family once, and both directions read that one statement (as torchtitan's
StateDictAdapter keeps one `from_hf_map` and inverts it for `to_hf`):

- `facts`: the normlab settings the family's layout fixes (placement, normalizer, positions, MLP, ...).
  Import builds every model of the family with them; export refuses a model that differs, naming the first
  setting that does (`refusal`, derived: no adapter writes its own).
- `free`: the optional settings its config.json carries at any value (grouped k/v heads, a head width apart,
  soft-caps, ...). Every other optional setting must be at normlab's plain value for export.
- `settings(hf)`: the rest of the model read from config.json (sizes, ε, the GELU's form); `hf_config(cfg)`
  writes the same back as a transformers config.
- `tensor_map(cfg)` and `block_map(cfg)`: which checkpoint tensors make which normlab tensor, and how
  (`Codec`). Import reads each `Map` forward (checkpoint → normlab), export backward (normlab → checkpoint).

`ADAPTERS` holds them by their first model_type; `normlab.hf.families` registers every family, and the CLI's
help and import's refusals are built from it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar

import torch

from normlab.hf.files import HFDirError
from normlab.nn.config import ModelConfig
from normlab.registry import Registry


class UnsupportedModel(HFDirError):
    """A checkpoint normlab cannot represent; the message names what is missing."""


@dataclass(frozen=True)
class Codec:
    """How checkpoint tensors (`parts`, in the order a `Map` names them) make one normlab tensor, and back."""

    read: Callable[[list[torch.Tensor], ModelConfig], torch.Tensor]
    write: Callable[[torch.Tensor, ModelConfig], list[torch.Tensor]]


def _qkv_rows(cfg: ModelConfig) -> tuple[int, int, int]:
    kv = (cfg.n_kv_head or cfg.n_head) * cfg.head_dim
    return cfg.n_head * cfg.head_dim, kv, kv


def _regroup(t: torch.Tensor, cfg: ModelConfig, by_head: bool) -> torch.Tensor:
    """GPT-NeoX's fused q/k/v rows are grouped by head (q, k, v of head 0, then head 1, ...); normlab's are
    q of every head, then k, then v. `by_head`: from NeoX's order to normlab's."""
    shape = (cfg.n_head, 3) if by_head else (3, cfg.n_head)
    return t.reshape(*shape, cfg.head_dim, *t.shape[1:]).transpose(0, 1).reshape(t.shape)


SAME = Codec(lambda parts, cfg: parts[0], lambda t, cfg: [t])
CONV1D = Codec(lambda parts, cfg: parts[0].t(), lambda t, cfg: [t.t()])  # GPT-2's Conv1D keeps (in, out)
ONE_PLUS = Codec(lambda parts, cfg: 1.0 + parts[0], lambda t, cfg: [t - 1.0])  # a norm that scales by (1 + w)
QKV = Codec(lambda parts, cfg: torch.cat(parts), lambda t, cfg: list(t.split(_qkv_rows(cfg))))  # q, k, v apart
GATE_UP = Codec(lambda parts, cfg: torch.cat(parts), lambda t, cfg: list(t.chunk(2)))  # a gated MLP's two halves
NEOX_QKV = Codec(lambda parts, cfg: _regroup(parts[0], cfg, True), lambda t, cfg: [_regroup(t, cfg, False)])


@dataclass(frozen=True)
class Map:
    """One normlab tensor and the checkpoint tensors it is made of (names under the checkpoint's base prefix,
    or outside it where `in_base` is false: BERT's masked-LM head)."""

    ours: str
    theirs: tuple[str, ...]
    codec: Codec = SAME
    in_base: bool = True

    def at(self, ours: str, theirs: str) -> "Map":
        """This map under a block's prefixes (normlab's `ours`, the checkpoint's `theirs`)."""
        return Map(ours + self.ours, tuple(theirs + n for n in self.theirs), self.codec, self.in_base)


def same(ours: str, theirs: str, codec: Codec = SAME, suffixes: tuple[str, ...] = ("weight",)) -> list[Map]:
    """`ours.s` ← `theirs.s` for each suffix s (weight, bias)."""
    return [Map(f"{ours}.{s}", (f"{theirs}.{s}",), codec) for s in suffixes]


WB = ("weight", "bias")


class ConfigJson:
    """A checkpoint's config.json as an adapter reads it: settings by key, refusals naming the family, and
    notes on what normlab reads differently."""

    def __init__(self, hf: dict[str, Any], path: Path, family: str):
        self.hf, self.path, self.family = hf, path, family
        self.notes: list[str] = []

    def get(self, key: str, default: Any = None) -> Any:
        return self.hf.get(key, default)

    def require(self, condition: bool, what: str) -> None:
        if not condition:
            raise UnsupportedModel(self.path / "config.json", f"a {self.family} model with {what}: normlab cannot "
                                   "represent it")

    def gelu_form(self, act: str) -> str:
        """normlab's `gelu_approximate` for a transformers activation name."""
        forms = {"gelu": "none", "gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu_fast": "tanh"}
        self.require(act in forms, f"activation {act!r} (normlab's GELU MLP: {', '.join(forms)})")
        return forms[act]

    def rope_theta(self) -> float:
        """RoPE's base from either config spelling (transformers ≥ 5: rope_parameters), refusing scaled RoPE."""
        params = self.get("rope_parameters") or {}
        scaling = self.get("rope_scaling") or {}
        kind = params.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
        self.require(kind == "default", f"rope_type {kind!r} (normlab's rotary embedding is the unscaled one)")
        return float(params.get("rope_theta") or self.get("rope_theta") or 10000.0)

    def context(self) -> int:
        """The longest sequence: max_position_embeddings, or a sliding window where one is on. Sequences no
        longer than the window attend exactly as the model does, so the window is where normlab stops."""
        context = self.get("max_position_embeddings") or 2048
        window = self.get("sliding_window")
        if window and self.get("use_sliding_window", True) and window < context:
            self.notes.append(f"block_size = the sliding window ({window}) of max_position_embeddings {context}: "
                              "within it attention is exact")
            return window
        return context

    def kv_heads(self, n_head: int) -> int | None:
        """Grouped key/value heads, or None where there are as many as query heads (one model, one run id)."""
        n_kv = self.get("num_key_value_heads") or n_head
        return None if n_kv == n_head else n_kv


class Checkpoint:
    """The checkpoint's tensors by name under the base prefix (or outside it), each read marked used."""

    def __init__(self, weights: dict[str, torch.Tensor], base: str, path: Path, family: str):
        self.weights, self.base, self.path, self.family = weights, base, path, family
        self.used: list[str] = []

    def key(self, name: str) -> str:
        return self.base + name if self.base + name in self.weights else name

    def has(self, name: str) -> bool:
        return self.key(name) in self.weights

    def peek(self, name: str) -> torch.Tensor:
        """A tensor, read without marking it used (a shape to describe)."""
        if not self.has(name):
            raise HFDirError(self.path, f"the checkpoint has no tensor {self.base + name!r}, which a {self.family} "
                                        "model of this config.json needs")
        return self.weights[self.key(name)].float()

    def fetch(self, name: str) -> torch.Tensor:
        tensor = self.peek(name)
        self.used.append(self.key(name))
        return tensor


ANY = object()  # a setting a layout holds whatever its value
ALIASES = {"n_kv_head": "grouped k/v", "d_head": "d_head apart"}  # a free setting's name where it is checked
# what a layout holds unless it says otherwise: normlab's plain value of every optional setting
PLAIN = {"embed_norm": False, "qk_norm": "none", "grouped k/v": False, "head_transform": False, "inner norms": False,
         "norm_affine": True, "qkv_bias apart from bias": False, "attn_scale": None, "attn_softcap": None,
         "logit_softcap": None, "head_bias": False, "rope_fraction": 1.0, "d_head apart": False}


def _seen(cfg: ModelConfig) -> dict[str, Any]:
    """The settings a layout is checked on, resolved as the model is built."""
    return {"arch": cfg.arch, "scheme": cfg.scheme, "norm": cfg.norm, "positions": cfg.positions, "mlp": cfg.mlp,
            "embed_norm": cfg.resolved_embed_norm(), "final_norm": cfg.resolved_final_norm(), "qk_norm": cfg.qk_norm,
            "grouped k/v": cfg.n_kv_head not in (None, cfg.n_head), "head_transform": cfg.head_transform,
            "inner norms": cfg.scheme_type.inner_norms, "norm_affine": cfg.norm_affine,
            "dropout": cfg.dropout > 0, "qkv_bias apart from bias": cfg.qkv_bias is not None and cfg.qkv_bias != cfg.bias,
            "attn_scale": cfg.attn_scale, "attn_softcap": cfg.attn_softcap, "logit_softcap": cfg.logit_softcap,
            "head_bias": cfg.head_bias, "rope_fraction": cfg.rope_fraction,
            "d_head apart": cfg.head_dim * cfg.n_head != cfg.d_model}


class Adapter:
    """One Hugging Face family (see the module's doc). Subclasses state the class attributes and the two
    config methods; `tensor_map`/`block_map` give the tensors, read forward on import and backward on export."""

    family: ClassVar[str] = ""  # its name in messages and in an import's record
    model_types: ClassVar[tuple[str, ...]] = ()  # config.json's model_type values it reads; the first names it
    summary: ClassVar[str] = ""  # the normlab models it holds, in words
    exportable: ClassVar[bool] = False  # whether export writes normlab models in this layout
    facts: ClassVar[dict[str, Any]] = {}  # ModelConfig fields (one config.json chooses, e.g. NeoX's placement: a setting)
    free: ClassVar[tuple[str, ...]] = ()  # optional ModelConfig fields config.json carries at any value
    scales_embedding: ClassVar[bool] = False  # the token embedding is multiplied by √d in the forward pass
    embedding: ClassVar[str] = ""  # the token embedding's name under the base model: finds the base prefix
    head: ClassVar[str] = "lm_head.weight"  # the output projection's name (outside the base model), tied or its own
    prefixes: ClassVar[tuple[str, ...]] = ("",)  # the base model's prefixes, the one export writes first
    block: ClassVar[str] = ""  # a block's prefix in the checkpoint, "{}" for its index
    ignore: ClassVar[dict[str, str]] = {}  # regex over names (base prefix removed) -> why it has no counterpart
    # what the model's forward takes from a tokenizer: an exported tokenizer sends these and no more. normlab
    # reads one segment, so no layout takes token_type_ids: XLM and GPT-2 embed them with the token table (a BERT
    # tokenizer's zeros added [PAD]'s or token 0's row to every position: MiniLM off by 2.74, an imported GPT-2
    # by 0.39), and BERT's single segment is the default it reads without them
    model_inputs: ClassVar[tuple[str, ...]] = ("input_ids", "attention_mask")

    @property
    def name(self) -> str:
        return self.model_types[0]

    # config.json ↔ ModelConfig
    def settings(self, hf: ConfigJson, heads_in_checkpoint: bool) -> dict[str, Any]:
        """The settings of config.json that `facts` leaves open, as ModelConfig fields."""
        raise NotImplementedError

    def model_config(self, hf: ConfigJson, heads_in_checkpoint: bool) -> ModelConfig:
        settings = {**self.facts, **self.settings(hf, heads_in_checkpoint)}
        if self.scales_embedding:
            settings["embed_scale"] = settings["d_model"] ** 0.5
        return ModelConfig(**settings)

    def hf_config(self, cfg: ModelConfig, tied: bool, **special: int | None) -> Any:
        """The transformers config; `special`: bos/eos/pad_token_id, which the config takes as they are."""
        raise NotImplementedError

    def refusals(self, cfg: ModelConfig) -> list[str]:
        """Every setting of cfg this layout cannot hold, in words (empty: it holds cfg)."""
        want = {**PLAIN, **self.facts, **{ALIASES.get(k, k): ANY for k in self.free}, "dropout": False}
        seen = _seen(cfg)
        wrong = [f"{k} = {seen[k]!r} (it needs {v!r})" for k, v in want.items() if k in seen and v is not ANY
                 and seen[k] != v]
        if self.facts.get("bias") is False and (cfg.bias or cfg.qkv_bias or cfg.resolved_norm_bias()):
            wrong.append(f"bias = true (the {self.family} layout has no biases)")
        return wrong

    def refusal(self, cfg: ModelConfig) -> str | None:
        """The first setting of cfg this layout cannot hold, in words; None when it holds cfg."""
        wrong = self.refusals(cfg)
        return wrong[0] if wrong else None

    # the checkpoint's tensors ↔ the state dict
    def tensor_map(self, cfg: ModelConfig) -> list[Map]:
        """The maps outside the blocks (embeddings, final norm, a head)."""
        raise NotImplementedError

    def block_map(self, cfg: ModelConfig) -> list[Map]:
        """One block's maps, named under the block (normlab's `blocks.i.`, the checkpoint's `block`)."""
        raise NotImplementedError

    def maps(self, cfg: ModelConfig) -> list[Map]:
        block = self.block_map(cfg)
        return self.tensor_map(cfg) + [m.at(f"blocks.{i}.", self.block.format(i))
                                       for i in range(cfg.n_layer) for m in block]

    def base(self, cfg: ModelConfig) -> str:
        """The base prefix export writes."""
        return self.prefixes[0]

    def read_extra(self, cfg: ModelConfig, checkpoint: Checkpoint, hf: ConfigJson) -> None:
        """What import reads, checks or says beyond the maps (BERT: its segments, a head bias saved twice)."""


ADAPTERS: Registry[Adapter] = Registry("Hugging Face family")


def adapter(cls: type[Adapter]) -> type[Adapter]:
    """Register one instance of the adapter class under its first model_type (a class decorator)."""
    ADAPTERS.register(cls.model_types[0])(cls())
    return cls


def by_model_type() -> dict[str, Adapter]:
    return {t: a for _, a in ADAPTERS.items() for t in a.model_types}


def export_layouts() -> list[Adapter]:
    """The adapters export writes, in the order it tries them."""
    return [a for _, a in ADAPTERS.items() if a.exportable]


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def importable_text() -> str:
    """The families import reads, with their model_type values (the CLI's help)."""
    return _either([f"{a.family} ({', '.join(a.model_types)})" for _, a in ADAPTERS.items()])


def exportable_text() -> str:
    """The layouts export writes (the CLI's help)."""
    return _either([a.family for a in export_layouts()])
