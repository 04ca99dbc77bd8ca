"""A study's runs as values: each identified by the hash of its resolved config (`RunSpec`), so a run needed by two
claims is trained once, and built once per study (`RunBuilder`), which resolves each corpus's vocabulary and
trained line the first time a run on it is built.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normlab.config import ConfigError, RunConfig, config_hash, derive, stored_config
from normlab.data.vocab import Vocabulary, vocabulary, with_vocab
from normlab.study.presets import Preset
from normlab.study.records import flatten
from normlab.study.trained import corpus_key, corpus_lines


@dataclass(frozen=True)
class RunSpec:
    """One run of a study as the study hands it on: its id, its validated config with the corpus's vocabulary
    filled in, and that config as a dict, computed once, which the ledger stores and the workers train from
    without validating the config again. The id is the hash of the config as built, before its vocabulary is
    filled in: the data section already names the corpus, and ids stay those of studies from before the
    vocabulary was resolved at their start."""

    id: str
    config: RunConfig

    @functools.cached_property
    def data(self) -> dict[str, Any]:
        """`config.to_dict()`: what the ledger stores."""
        return self.config.to_dict()

    @functools.cached_property
    def flat(self) -> dict[str, Any]:
        """The config flattened (`model.n_layer` keys), as records compare themselves to a base."""
        return flatten(self.data)


def source_key(config: dict[str, Any]) -> str:
    """A follow-up's identity wherever the study directory lies: the hash of its config with `train.init_from`
    cut to the source run's id (its directory's name). A config registered before a field was added gets that
    field's default first (`stored_config`), so it still matches."""
    config = stored_config(config).to_dict()
    train = {**config["train"], "init_from": Path(str(config["train"]["init_from"])).name}
    model = {k: v for k, v in config["model"].items() if k != "vocab_size"}
    return config_hash({**config, "train": train, "model": model})


def build_config(preset: Preset, overrides: dict[str, Any], seed: int) -> RunConfig:
    """The run of `preset`'s base with `overrides` (dotted keys, typed values) at `seed`, validated."""
    return derive({}, {**preset.base, **overrides, "train.seed": seed})


def one_line(error: Exception) -> str:
    """A config error's lines ("invalid config:" and one per problem) as one line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return "; ".join(line for line in lines if line != "invalid config:")


def base_invalid(preset: str, error: ConfigError) -> ConfigError:
    """The error of a study whose base config is not valid, naming where the base comes from."""
    return ConfigError(f"the study's base config (preset {preset!r} with its [base] and --set overrides) "
                       f"is not valid: {one_line(error)}")


@dataclass
class RunBuilder:
    """Every run a study builds, each validated once per process however often the study is planned (at its start,
    at each seed round), with each corpus its runs read resolved once: its tokens (`tokens`, by `corpus_key`:
    [vocabulary size, the tokenizer's own mask id]) and its trained line's two ends (`lines`: [unigram, bigram]
    cross-entropy), stored with the study so that every run's config carries its vocabulary and `normlab report`
    reads no corpus. `resolve_vocab` False: a study stored before its tokens were (an older ledger), whose runs'
    vocabulary stays unset, as it was then (records match it all the same: `UNPINNED`)."""

    preset: Preset
    tokens: dict[str, list] = field(default_factory=dict)
    lines: dict[str, list] = field(default_factory=dict)
    resolve_vocab: bool = True
    _built: dict[str, RunSpec] = field(default_factory=dict, repr=False, compare=False)

    def run(self, overrides: dict[str, Any], seed: int) -> RunSpec:
        """The run of the preset's base with `overrides` at `seed` (`build_config`)."""
        key = json.dumps([self.preset.base, overrides, seed], sort_keys=True, default=repr)
        if key not in self._built:
            base_run = not overrides and seed == self.preset.seeds[0]  # the preset's own config: validated once
            self._built[key] = self._spec(self.preset.config if base_run else build_config(self.preset, overrides,
                                                                                            seed))
        return self._built[key]

    def base(self) -> dict[str, Any]:
        """The study's base run (the preset's base with the user's overrides, at its first seed), flat; a base that
        is not a valid config is refused, naming where it comes from (`base_invalid`)."""
        try:
            return self.run({}, self.preset.seeds[0]).flat
        except ConfigError as e:  # a stored study's base, which nothing validated since (`spec_from_meta`)
            raise base_invalid(self.preset.name, e) from None

    def named(self, overrides: dict[str, Any], seed: int, source: str) -> RunSpec:
        """`run`, its error naming whose run it is (a claim's overrides that clash with the base, e.g. a --set)."""
        try:
            return self.run(overrides, seed)
        except ConfigError as e:
            raise ConfigError(f"{source} needs a run {overrides} (seed {seed}) that is not a valid config: "
                              f"{one_line(e)}") from None

    def followup(self, source: RunConfig, overrides: dict[str, Any]) -> RunSpec:
        """A run that starts from a trained one (`Claim.followups`): the source's config (a record's) with
        `overrides`, its vocabulary left to the corpus as for every run."""
        raw = source.to_dict()
        key = json.dumps([raw, overrides], sort_keys=True, default=repr)
        if key not in self._built:
            model = {k: v for k, v in raw["model"].items() if k != "vocab_size"}
            self._built[key] = self._spec(derive({**raw, "model": model}, overrides))
        return self._built[key]

    def _spec(self, config: RunConfig) -> RunSpec:
        """The run of `config` (validated): its id is the hash of the config as built, and the config it carries
        has its corpus's vocabulary filled in (`tokens`). The first run built on a corpus also resolves the
        trained line's two ends there (`lines`), so that every run the study registers has both with the study."""
        if not self.resolve_vocab:
            return RunSpec(config.hash(), config)
        key = corpus_key(config)
        if key not in self.lines:
            self.lines[key] = list(corpus_lines(config))
        if config.model.vocab_size is not None:
            return RunSpec(config.hash(), config)
        if key not in self.tokens:
            vocab = vocabulary(config.data)
            self.tokens[key] = [vocab.text, vocab.mask_id]
        return RunSpec(config.hash(), with_vocab(config, Vocabulary(*self.tokens[key])))
