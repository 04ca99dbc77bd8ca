"""A run's vocabulary, resolved in one place: `vocabulary` reads it from a data section, once per corpus per
process, and `with_vocab` writes it into a config. Training, `normlab check`, `normlab diagnose`, the step-0
gradients and a study all take a run's vocabulary from here, so none can size a model's embedding differently.

A model's vocabulary is the tokenizer's own tokens plus the special tokens its architecture's objective adds
after them (an encoder's MASK where the tokenizer has none; an encoder–decoder's MASK and BOS).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from normlab.config import DataConfig, RunConfig
from normlab.data.corpus import corpus_tokenizer
from normlab.data.objectives import Objective, objective_for


@dataclass(frozen=True)
class Vocabulary:
    """A corpus's tokens as its tokenizer has them."""

    text: int  # the tokenizer's own tokens
    mask_id: int | None = None  # the tokenizer's own MASK token, if it has one (a masked LM then uses it)

    @classmethod
    def of(cls, tokenizer) -> Vocabulary:
        return cls(tokenizer.vocab_size, tokenizer.mask_id)

    def objective(self, arch: str) -> Objective:
        """The training objective of architecture `arch` over these tokens."""
        return objective_for(arch, self.text, self.mask_id)

    def size(self, arch: str) -> int:
        """model.vocab_size for architecture `arch`: the text's tokens and the objective's special ones."""
        return self.text + self.objective(arch).specials


@functools.lru_cache(maxsize=32)
def _read(path: str | None, tokenizer: str, vocab_from: str | None, tokenizer_dir: str | None) -> Vocabulary:
    return Vocabulary.of(corpus_tokenizer(path, tokenizer, vocab_from, tokenizer_dir))


def vocabulary(data: DataConfig) -> Vocabulary:
    """The tokens of the corpus a data section names, read once per corpus per process (the tokenizer is built;
    the text is not encoded)."""
    return _read(data.path, data.tokenizer, data.vocab_from, data.tokenizer_dir)


def with_vocab(cfg: RunConfig, vocab: Vocabulary | None = None) -> RunConfig:
    """The config with model.vocab_size filled in from `vocab` (by default its own corpus's: `vocabulary`), or
    checked against it where the config already sets one."""
    given = cfg.model.vocab_size
    if vocab is None:
        if given is not None:
            return cfg
        vocab = vocabulary(cfg.data)
    size = vocab.size(cfg.model.arch)
    if given is not None and cfg.data.tokenizer == "hf" and given >= size:
        return cfg  # a Hugging Face model's table may be padded past its tokenizer (Qwen: to a multiple of 128)
    if given is not None and given != size:
        special = size - vocab.text
        raise ValueError(f"model.vocab_size = {given}, but the {cfg.data.tokenizer} tokenizer of this corpus "
                         f"has {vocab.text} tokens" + (f" (+ {special} special)" if special else "")
                         + "; leave model.vocab_size unset")
    return cfg.model_copy(update={"model": cfg.model.model_copy(update={"vocab_size": size})})
