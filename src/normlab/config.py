"""A run's config: model, data and training, typed and validated; TOML on disk.

    [model]  n_layer = 4 ...      (normlab.nn.ModelConfig)
    [data]   path, tokenizer
    [train]  steps, lr, schedule, ...
    [diagnostics] interval, layer_skip

Unknown keys are errors that name the closest valid keys.
"""
from __future__ import annotations

import copy
import functools
import hashlib
import json
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from normlab import compat
from normlab.errors import ConfigError
from normlab.nn.config import ModelConfig
from normlab.registry import closest


@dataclass(frozen=True)
class Word:
    """The word a field holds for "none of it" (`off`: no clipping, no probe, no plateau stop, never judged;
    `process`: the process's thread count; `all`: every block), where a 0 would read as a quantity, and what it
    means (an error names both). A 0 a user types is refused with the word to write; a stored config's older 0 is
    read as the word and hashes as its run did (`compat.WORD_WAS_NUMBER`)."""

    word: str
    meaning: str


def named(number: Any, word: str, meaning: str, **limits) -> Any:
    """The type of a field that holds a number within `limits`, or `word` for none of it: each word field is
    declared once, here, and `WORDS`, the 0 refusal and `Section.number` read the declaration."""
    return Annotated[Annotated[number, Field(**limits)] | Literal[word], Word(word, meaning)]  # type: ignore


def word_of(field: Any) -> Word | None:
    """The Word a field was declared with (`named`), or None for any other field."""
    return next((m for m in field.metadata if isinstance(m, Word)), None)


class Section(BaseModel):
    """A table of the config: unknown keys are errors, each field's docstring is its help, and a word field's
    number is read with `number`."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    @field_validator("*", mode="before")
    @classmethod
    def _zero_is_not_a_word(cls, value, info):
        word = word_of(cls.model_fields[info.field_name])
        if word and isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0:
            raise ValueError(f"0 is not a value here; write {word.word!r} for {word.meaning}")
        return value

    def number(self, name: str) -> Any:
        """A word field's number, or None where it holds its word: what the code reads instead of `x or None`."""
        word = word_of(type(self).model_fields[name])
        if word is None:
            raise AttributeError(f"{name!r} holds no word (it is no `named` field): read it as it is")
        value = getattr(self, name)
        return None if value == word.word else value


# the word fields' types, each declared once (`named`): a number, or the word for none of it
ClipNorm = named(float, "off", "no clipping", gt=0)
Threads = named(int, "process", "the process's thread count", ge=1)
Margin = named(float, "off", "never judged", gt=0)
PlateauStop = named(float, "off", "no plateau stop", gt=0, lt=1)
ProbeInterval = named(int, "off", "no per-layer metrics", ge=1)
SkipAtMost = named(int, "all", "every block", ge=1)


class DataConfig(Section):
    """Which text, and how it is cut into tokens."""

    path: str | None = None
    """A UTF-8 text file, or a packaged corpus by name (`tinyshakespeare`, `paradise_lost`); unset: tiny
    Shakespeare."""
    tokenizer: Literal["char", "byte", "hf"] = "char"
    """`char`: one token per distinct character; `byte`: the 256 UTF-8 byte values; `hf`: the Hugging Face
    tokenizer.json in `tokenizer_dir` (an imported model's own tokens)."""
    tokenizer_dir: str | None = None
    """With tokenizer = 'hf': the directory holding tokenizer.json (`normlab import-hf` sets it)."""
    vocab_from: str | None = None
    """Tokenize with this corpus's vocabulary instead of the text's own (fine-tuning keeps the pretrained
    model's tokens); characters outside it are dropped and counted in run.json."""
    train_tokens: int | None = Field(default=None, ge=2)
    """Train on the first this many tokens of the train split only, their windows drawn again and again (less
    distinct text at the same budget: tokens per parameter moves, nothing else); unset: all of it. The val split
    and the vocabulary stay the whole corpus's; "trained" is judged against what those tokens can teach."""


class TrainConfig(Section):
    """The optimisation: AdamW, a learning-rate schedule, evaluation and checkpoints."""

    steps: int = Field(default=2000, ge=1)
    """Optimizer steps."""
    batch_size: int = Field(default=12, ge=1)
    """Sequences per step."""
    lr: float = Field(default=1e-3, gt=0)
    """Peak learning rate."""
    min_lr: float = Field(default=1e-4, ge=0)
    """Floor of the cosine schedule."""
    schedule: Literal["constant", "cosine", "inverse_sqrt"] = "cosine"
    """constant, linear warmup + cosine decay to min_lr, or inverse square root (Vaswani et al.)."""
    warmup_steps: int = Field(default=100, ge=0)
    """Linear warmup length (0: none)."""
    decay_steps: int | None = Field(default=None, ge=1)
    """Step at which the cosine reaches min_lr; unset: `steps`."""
    beta1: float = Field(default=0.9, ge=0, lt=1)
    beta2: float = Field(default=0.99, ge=0, lt=1)
    weight_decay: float = Field(default=0.1, ge=0)
    """AdamW decoupled weight decay, on the tensors `weight_decay_on` names."""
    weight_decay_on: Literal["matrices", "every parameter"] = "matrices"
    """`matrices`: tensors of 2 or more dimensions (nanoGPT's configure_optimizers), never a module that says
    `no_weight_decay` (nGPT's scaling vectors); `every parameter`: all of them, norm gains, biases and scalars
    too, as DyT's LLaMA trainer does (jiachenzhu/DyT other_tasks/LLaMA/main_training_llama.py L119-121:
    AdamW(model.parameters(), ..., weight_decay=0.1))."""
    grad_clip: ClipNorm = 1.0
    """Clip the global gradient norm to this; `off`: no clipping."""
    eval_interval: int = Field(default=250, ge=1)
    """Estimate val loss every this many steps (and at the last step)."""
    eval_batches: int = Field(default=20, ge=1)
    """Batches per val-loss estimate (always the same batches)."""
    ckpt_interval: int = Field(default=500, ge=1)
    """Write a checkpoint every this many steps (and at the last step)."""
    log_interval: int = Field(default=1, ge=1)
    """Write a metrics row every this many steps."""
    seed: int = 1337
    """Seeds the init, the dropout and the data sampling."""
    device: str = "auto"
    """auto (CUDA when present, else CPU), cpu, cuda, cuda:N, mps."""
    precision: Literal["fp32", "bf16"] = "fp32"
    """bf16: autocast the forward pass (CPU and CUDA); weights, optimizer and norm statistics stay fp32."""
    compile: bool = False
    """Run the model through torch.compile."""
    threads: Threads = "process"
    """torch intra-op threads for this run; `process`: the process's setting. Part of the run's numerics: a matmul
    split over 2 threads rounds differently from 1 (a study's robustness pass reruns runs with another count)."""
    diverge_loss: float = Field(default=20.0, gt=0)
    """A train loss above this (or non-finite) ends the run as `diverged`."""
    activation_checkpointing: bool = False
    """Keep only each block's input during the forward pass and recompute the block in the backward pass
    (torch.utils.checkpoint): activation memory O(L·B·T·C) instead of O(L·B·T·C·k), for about one extra
    forward of compute. Same numerics (dropout's RNG is replayed). Measured steps (diagnostics) run without."""
    init_from: str | None = None
    """A run directory whose trained weights start this run (fine-tuning). Loaded with weights_only; its model
    config must be this run's (see init_from_match). The optimizer, schedule and step start fresh."""
    init_from_match: Literal["exact", "by_name", "by_stream"] = "exact"
    """exact: init_from must be this very model. by_name: another placement or normalizer of the same weights
    (a swap): every tensor of the source with this model's name and shape is kept, the rest start at their
    init. by_stream: as by_name, and a norm the placement moved takes the gains of the source's norm at the
    same point of the residual stream. run.json's "swap" lists what was kept, moved, new and left behind."""
    untrained_margin: Margin = 0.1
    """A completed run whose final val loss is within this many nats of the corpus's unigram cross-entropy
    (or above it) failed to train: it never left the plateau of token frequencies; `off`: never judged."""
    plateau_stop: PlateauStop = "off"
    """From this fraction of the steps on, a run whose val loss at an evaluation is still within
    `untrained_margin` of the unigram plateau is finished there, as failed to train, instead of spending the rest
    of its budget; `off`: every run trains to the end. The study presets use ½: in the standard study of 2026-11-24
    none of the 43 runs still on the plateau at half their budget trained by the end, where 7 of the 50 still on
    it at a third did (benchmarks/plateau_recovery.py)."""

    @model_validator(mode="after")
    def _check(self) -> "TrainConfig":
        if self.min_lr > self.lr:
            raise ValueError(f"min_lr ({self.min_lr}) is above lr ({self.lr})")
        if self.init_from_match != "exact" and not self.init_from:
            raise ValueError(f"init_from_match = {self.init_from_match!r} says how to read train.init_from, which is "
                             "unset; set init_from, or leave init_from_match at 'exact'")
        return self


class DiagnosticsConfig(Section):
    """What the run measures inside its layers (see normlab.diagnostics; they never change the math)."""

    interval: ProbeInterval = 100
    """Per-layer metrics at step 0 and every this many steps, into DIR/diagnostics.sqlite; `off`: none."""
    layer_skip: bool = True
    """At the end, the val loss with each block skipped, into DIR/layer_skip.json."""
    layer_skip_most: SkipAtMost = 100
    """The layer-skip ablation skips at most this many blocks, evenly spaced (the first and the last among them),
    and estimates the effective depth from them; `all`: every block (the full sweep). Why: one evaluation per block
    kept a 10-step 1,000-layer run going past 15 minutes (4.4 without the ablation); with 100, it pays 100."""
    end_of_run_budget: float = Field(default=0.25, ge=0)
    """The end-of-run diagnostics (the layer-skip ablation) take at most this fraction of the run's training time
    (status.json's elapsed_s), or 5 s, whichever is more; 0: no time, the ablation is left out. How many blocks it
    skips and over how many val batches follow from the time one val batch takes (layer_skip.json's `plan`).
    Why: 100 sampled blocks of a 10-step 1,000-layer run took 26 minutes after its 2 minutes of training."""
    layer_skip_budgeted: bool = True
    """false: the ablation measures all it is asked for (layer_skip_most blocks over every train.eval_batches),
    whatever that costs; end_of_run_budget does not bind it. `normlab diagnose RUN --layer-skip` does the same
    later, on a completed run."""


class RunConfig(BaseModel):
    """Everything that defines a training run."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    model: ModelConfig = ModelConfig()
    data: DataConfig = DataConfig()
    train: TrainConfig = TrainConfig()
    diagnostics: DiagnosticsConfig = DiagnosticsConfig()

    @model_validator(mode="after")
    def _check_sections(self) -> "RunConfig":
        if self.train.activation_checkpointing and not self.model.scheme_type.facts.checkpointable:
            raise ValueError(f"scheme {self.model.scheme!r} cannot use train.activation_checkpointing: its blocks "
                             "share state across the forward pass, which a recomputed block would overwrite")
        return self

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)

    def to_toml(self) -> str:
        return tomli_w.dumps(self.to_dict())

    def hash(self) -> str:
        """A short stable id of the resolved config. A field added after runs were first hashed is left out
        while it holds the value every earlier run had (`compat.HASH_NEUTRAL`), so their ids and directories stay
        valid; fields whose default is None are left out by `to_dict` already."""
        return config_hash(self.to_dict())


# every word field, by its dotted key, from its declaration (`named`); every table of RunConfig is a model
WORDS: dict[str, Word] = {f"{section}.{name}": word for section, table in RunConfig.model_fields.items()
                          for name, f in table.annotation.model_fields.items() if (word := word_of(f))}


def _stored_number(dotted: str, value: Any) -> bool:
    """Whether `value` is the number an older normlab wrote for this word field's word (`compat.WORD_WAS_NUMBER`)."""
    return dotted in WORDS and isinstance(value, (int, float)) and not isinstance(value, bool) and \
        value == compat.WORD_WAS_NUMBER[dotted]


def config_hash(data: dict[str, Any]) -> str:
    """`RunConfig.hash` of a config already resolved to its dict (`to_dict`, as a study's ledger stores it), so
    that an id is recomputed without validating the config again. The id hashes the config as the run was first
    registered (normlab.compat): a word as the number it was written as, a field added since left out at the value
    every earlier run had, a value whose meaning changed as its new meaning."""
    data = {section: dict(values) if isinstance(values, dict) else values for section, values in data.items()}
    for dotted, word in WORDS.items():
        section, key = dotted.split(".")
        if data.get(section, {}).get(key) == word.word:
            data[section][key] = compat.WORD_WAS_NUMBER[dotted]
    for dotted, value in compat.HASH_NEUTRAL.items():
        section, key = dotted.split(".")
        if data.get(section, {}).get(key) == value:
            del data[section][key]
    for dotted, (old, meaning) in compat.HASH_MEANING_CHANGED.items():
        section, key = dotted.split(".")
        if data.get(section, {}).get(key) == old:
            data[section][key] = meaning
    blob = json.dumps(data, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def load_config(path: str | Path | None = None, overrides: list[str] | None = None,
                stored: int | None = None) -> RunConfig:
    """Read a TOML config (or start from the defaults) and apply `key=value` overrides. `stored`: the schema the
    file was written under, where normlab wrote it (a run directory's config.toml: `normlab.rundir.read_config_file`
    tells), read with an older normlab's spellings upgraded (`upgrade_stored`) and as it trained; the overrides are
    held to today's, and a stored file they change is checked as a new config (`check_given`)."""
    raw: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {str(p)!r} does not exist")
        try:
            raw = tomllib.loads(p.read_text("utf-8"))
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {str(p)!r} is not valid TOML: {e}") from None
        if stored is not None:
            raw = upgrade_stored(raw, stored)
    for item in overrides or []:
        apply_override(raw, item)
    config = validate_config(raw)
    return config if stored is not None and not overrides else check_given(config)


def check_given(config: RunConfig, where: str = "") -> RunConfig:
    """What a config a user gives (a file, `--set`, a study file's base and axes) must hold beyond each value's
    own range; a run normlab stored is read as it trained, never refused here. A warmup longer than the run
    never reaches its peak learning rate: the run would train at another lr than the one it names."""
    t = config.train
    if t.warmup_steps > t.steps:
        raise ConfigError(f"{where}train.warmup_steps = {t.warmup_steps} is longer than the run (train.steps = "
                          f"{t.steps}): its learning rate would never reach train.lr = {t.lr}; set "
                          f"train.warmup_steps to at most {t.steps} (0: no warmup)")
    return config


def upgrade_stored(raw: dict[str, Any], schema: int = 0) -> dict[str, Any]:
    """A config normlab wrote under `schema` (a run directory's config.toml, a study ledger's row; 0: before
    schemas were recorded) with the numbers an older normlab wrote for the words (`compat.WORD_WAS_NUMBER`) read as
    those words; a copy where one changes. Only for what normlab itself stored: a config a user types is held to
    today's spelling."""
    out = raw
    if schema >= compat.WORD_WAS_NUMBER_BEFORE:
        return out
    for dotted, word in WORDS.items():
        section, key = dotted.split(".")
        value = raw.get(section, {}).get(key) if isinstance(raw.get(section), dict) else None
        if _stored_number(dotted, value):
            if out is raw:
                out = {s: dict(v) if isinstance(v, dict) else v for s, v in raw.items()}
            out[section][key] = word.word
    return out


def stored_config(raw: dict[str, Any], schema: int = 0) -> RunConfig:
    """A config normlab wrote under `schema` (a ledger's row, a run directory's config.toml), typed: its older
    spellings upgraded (`upgrade_stored`), each section built from the fields it stored and a field added since
    given its default. It is not validated again: normlab validated it before writing it, and a field's default does
    not depend on the others, so on every stored study this gives what validating gives, at a fraction of the cost
    (`normlab report` reads a study's records and builds none of its runs)."""
    upgraded = upgrade_stored(raw, schema)
    return RunConfig.model_construct(**{name: field.annotation.model_construct(**upgraded.get(name, {}))
                                        for name, field in RunConfig.model_fields.items()})


def upgrade_overrides(overrides: dict[str, Any], schema: int = 0) -> dict[str, Any]:
    """`upgrade_stored` for dotted overrides a study stored under `schema` (its preset's base, a claim's
    overrides)."""
    if schema >= compat.WORD_WAS_NUMBER_BEFORE:
        return overrides
    return {k: WORDS[k].word if _stored_number(k, v) else v for k, v in overrides.items()}


def validate_config(raw: dict[str, Any]) -> RunConfig:
    try:
        return RunConfig.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e)) from None


@functools.lru_cache(maxsize=1)
def _sections() -> dict[str, str]:
    """Each RunConfig field's name -> its section: no two sections share a name, so a name alone says where it is."""
    return {name: section for section, field in RunConfig.model_fields.items()
            for name in field.annotation.model_fields}


def _dotted(key: str, sections: dict[str, str]) -> str | None:
    """`lr` -> `train.lr`; a dotted key as it is where its section has the field; None where none has it."""
    if "." not in key:
        return f"{sections[key]}.{key}" if key in sections else None
    section, _, name = key.partition(".")
    model = RunConfig.model_fields.get(section)
    return key if model is not None and name in model.annotation.model_fields else None


@functools.lru_cache(maxsize=None)
def _field_type(dotted: str) -> TypeAdapter:
    section, name = dotted.split(".")
    return TypeAdapter(RunConfig.model_fields[section].annotation.model_fields[name].annotation)


class Change(Mapping[str, Any]):
    """Changes to a run's config, as a claim describes the runs it needs: `Change(scheme="pre", lr=1e-3)`. Each is
    a RunConfig field by its own name (`lr` is `train.lr`; no two sections share a name), or dotted where a preset's
    data gives it so (`Change(preset.depth_cell)`), with a value of its field's type: a misspelt field or a value of
    the wrong type is refused when the change is made, not when a study expands. It reads as the dotted overrides
    `derive` sets (`{"model.scheme": "pre", "train.lr": 0.001}`), values as given, so a run's id is the one its
    overrides gave. `a | b`: b over a."""

    __slots__ = ("_items",)

    def __init__(self, given: Mapping[str, Any] | None = None, /, **fields: Any):
        sections = _sections()
        items: dict[str, Any] = {}
        for key, value in {**(given or {}), **fields}.items():
            dotted = _dotted(key, sections)
            if dotted is None:
                hint = closest(key.rpartition(".")[2], sorted(sections))
                raise ConfigError(f"{key!r} is not a config field" + (f" (did you mean {', '.join(hint)}?)" if hint
                                                                      else "") + "; valid: a field of RunConfig by "
                                  "its name (lr, scheme, n_layer, ...) or as section.name (normlab.config.RunConfig)")
            if dotted in items:
                raise ConfigError(f"{dotted!r} is changed twice in one Change ({key!r} and its other spelling)")
            try:
                _field_type(dotted).validate_python(value, strict=True)
            except ValidationError as e:
                raise ConfigError(f"{dotted} = {value!r}: {e.errors()[0]['msg']}") from None
            items[dotted] = value
        self._items = items

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __or__(self, other: Mapping[str, Any]) -> "Change":
        theirs = other if isinstance(other, Change) else Change(other)  # a Change was checked when it was made
        out = Change()
        out._items = {**self._items, **theirs._items}
        return out

    def __ror__(self, other: Mapping[str, Any]) -> "Change":
        return Change(other) | self

    def __repr__(self) -> str:
        return f"Change({', '.join(f'{k}={v!r}' for k, v in self._items.items())})"


def derive(config: RunConfig | dict[str, Any], overrides: dict[str, Any]) -> RunConfig:
    """`config` (a RunConfig, or a nested dict of some of its keys) with `overrides` (dotted keys, typed values)
    set, validated once: the one way a study makes a run's config from its base, a claim's overrides and a seed,
    or a follow-up's from its source run."""
    raw = config.to_dict() if isinstance(config, RunConfig) else copy.deepcopy(config)
    for key, value in overrides.items():
        set_value(raw, key, value)
    return validate_config(raw)


def apply_override(raw: dict[str, Any], item: str) -> None:
    """Set `a.b.c=value` in the nested dict; the value is read as TOML, else as a string."""
    key, sep, text = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {item!r} is not of the form key=value (e.g. model.n_layer=6)")
    try:
        value = tomllib.loads(f"v = {text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = text.strip()
    set_value(raw, key.strip(), value, item)


def set_value(raw: dict[str, Any], key: str, value: Any, said: str | None = None) -> None:
    """Set the dotted `key` (`model.n_layer`) to a typed value in the nested dict. `said`: how the user wrote it,
    for the error (a `--set` item); a study's overrides come here as values, never as TOML text."""
    *parents, leaf = key.split(".")
    node = raw
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {said or f'{key}={value!r}'!r}: {part!r} is not a table")
    node[leaf] = value


def format_validation_error(e: ValidationError) -> str:
    lines = []
    named: dict[str, list[dict]] = {}  # a word field's union branches (a number, or its word): one line
    for err in e.errors():
        loc = ".".join(str(p) for p in err["loc"])
        field = ".".join(str(p) for p in err["loc"][:2])
        if field in WORDS and len(err["loc"]) > 2:
            named.setdefault(field, []).append(err)
            continue
        if err["type"] == "extra_forbidden":
            valid = _valid_keys(err["loc"][:-1])
            hint = closest(str(err["loc"][-1]), valid)
            did = f" Did you mean {', '.join(repr(h) for h in hint)}?" if hint else ""
            lines.append(f"unknown key {loc!r}.{did} Valid keys here: {', '.join(valid)}.")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            got = err.get("input")
            got = "" if isinstance(got, dict) else f" (got {got!r})"
            lines.append(f"{loc}: {msg}{got}" if loc else msg)
    for field, errs in named.items():
        number = next((err["msg"].removeprefix("Input should be ") for err in errs if "literal" not in
                       str(err["loc"][-1])), "a number")
        lines.append(f"{field}: should be {number}, or {WORDS[field].word!r} for {WORDS[field].meaning} "
                     f"(got {errs[0].get('input')!r})")
    return "invalid config:\n  " + "\n  ".join(lines)


def _valid_keys(loc: tuple) -> list[str]:
    model: type[BaseModel] = RunConfig
    for part in loc:
        model = model.model_fields[part].annotation  # every table is itself a pydantic model
    return list(model.model_fields)
