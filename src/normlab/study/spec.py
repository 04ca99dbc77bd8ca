"""A study: a base config, the claims to test (each adds the runs it needs), axes, and seeds.

It expands into runs, each identified by the hash of its resolved config, so a run
needed by two claims is trained once.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normlab.config import (ConfigError, RunConfig, apply_override, check_given, config_hash, derive, stored_config,
                            upgrade_overrides)
from normlab.data.vocab import Vocabulary, vocabulary, with_vocab
from normlab.study import power
from normlab.study.claims import CLAIMS
from normlab.study.presets import PRESETS, Preset, stored_preset
from normlab.study.records import flatten
from normlab.study.trained import corpus_key, corpus_lines


# The nuisance factors `--vary` re-measures each training claim under, beyond its own level: the init recipe (the
# other one: `other_init`), context and width. Each is the overrides of its other level on the study's base, and
# how its two levels read. A claim whose own runs set one of a factor's keys (C8's narrow 32-token models) is not
# varied along it, and its verdict says so
FACTORS: dict[str, dict[str, Any]] = {
    "init": {},  # the other recipe, per claim (`other_init`): the init pass
    "context": {"model.block_size": 64, "train.eval_batches": 10},  # 64 tokens, the same val tokens per evaluation
    "width": {"model.d_model": 128},  # twice the CPU presets' width (4 heads of 32)
}


def factor_overrides(factor: str, base: RunConfig) -> dict[str, Any]:
    """The other level of a nuisance factor on a base (context: 64 tokens where the base has 32, else 32)."""
    if factor == "context" and base.model.block_size == 64:
        return {"model.block_size": 32, "train.eval_batches": 20}
    if factor == "width" and base.model.d_model == 128:
        return {"model.d_model": 64}
    return dict(FACTORS[factor])


def level_name(factor: str, config: dict[str, Any]) -> str:
    """A factor's level as a reader names it: `xiong`, `64 tokens`, `d 128`."""
    if factor == "init":
        return str(config.get(INIT_KEY))
    if factor == "context":
        return f"{config.get('model.block_size')} tokens"
    return f"d {config.get('model.d_model')}"


INIT_KEY = "model.init"
# the recipe the study re-measures a claim under: what most users train with (GPT-2's), or Xiong et al.'s where
# the claim's own is GPT-2's
OTHER_INIT = {"xiong": "gpt2", "gpt2": "xiong"}


def other_init(recipe: str) -> str:
    return OTHER_INIT.get(recipe, "gpt2")


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


@dataclass
class StudySpec:
    """A preset, possibly narrowed to some claims, plus a user's extra axes."""

    preset: Preset
    claims: list[str]
    axes: dict[str, list[Any]] = field(default_factory=dict)
    base_extra: dict[str, Any] = field(default_factory=dict)  # already merged into preset.base; kept for the record
    robustness: bool = False  # also rerun every claim's runs at preset.robust_threads threads (`fragile` marks)
    # --init-pass (True) / --no-init-pass (False): every training claim also judged under the other init, or none;
    # None: no override, the preset's choice (`Preset.init_pass`)
    init_pass_override: bool | None = None
    claim_seeds: dict[str, list[int]] = field(default_factory=dict)  # a claim's seeds after its rounds; else seeds
    # the nuisance factors re-measured beyond the init pass (`--vary context,width`; `init` is the init pass)
    vary: list[str] = field(default_factory=list)
    # the tokens of each corpus the study's runs read, by `corpus_key`: [vocabulary size, the tokenizer's own mask
    # id], resolved when a run on it is first built (the study's start) and stored with the study, so that every
    # run's config carries its vocabulary and `normlab report` reads no corpus
    tokens: dict[str, list] = field(default_factory=dict)
    # each corpus's [unigram, bigram] cross-entropy, by `corpus_key`: the trained line's two ends, resolved when a run
    # on it is first built and stored with the study, so that `normlab report` judges "trained" reading no corpus
    lines: dict[str, list] = field(default_factory=dict)
    # False for a study stored before its tokens were (`normlab report` on an older ledger): its runs' vocabulary
    # is left unset, as it was then, so that no corpus is read (records match it all the same: `UNPINNED`)
    resolve_vocab: bool = True
    # every run this study has built, by (base, overrides, seed): each config is validated once per process however
    # often the study expands (at load, at its start, at each seed round)
    _built: dict[str, RunSpec] = field(default_factory=dict, init=False, repr=False, compare=False)

    def run(self, overrides: dict[str, Any], seed: int) -> RunSpec:
        """The run of the preset's base with `overrides` at `seed` (`build_config`), built once per study."""
        key = json.dumps([self.preset.base, overrides, seed], sort_keys=True, default=repr)
        if key not in self._built:
            base_run = not overrides and seed == self.preset.seeds[0]  # the preset's own config: validated once
            self._built[key] = self._spec(self.preset.config if base_run else build_config(self.preset, overrides,
                                                                                            seed))
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

    def followup(self, source: RunConfig, overrides: dict[str, Any]) -> RunSpec:
        """A run that starts from a trained one (`Claim.followups`): the source's config (a record's) with
        `overrides`, its vocabulary left to the corpus as for every run; built once per study."""
        raw = source.to_dict()
        key = json.dumps([raw, overrides], sort_keys=True, default=repr)
        if key not in self._built:
            model = {k: v for k, v in raw["model"].items() if k != "vocab_size"}
            self._built[key] = self._spec(derive({**raw, "model": model}, overrides))
        return self._built[key]

    def base_config(self) -> RunConfig:
        """The study's base run (the preset's base with the user's overrides, its first seed), validated: what
        every claim's groups are matched against on the axes they do not name."""
        return self.run({}, self.preset.seeds[0]).config

    def base_flat(self) -> dict[str, Any]:
        """`base_config` flattened (`model.n_layer` keys), as records compare themselves to it."""
        return self.run({}, self.preset.seeds[0]).flat

    def seeds_of(self, claim_id: str) -> list[int]:
        """The seeds a claim's runs and verdict use: the preset's, or more after sequential rounds."""
        return list(self.claim_seeds.get(claim_id, self.preset.seeds))

    def first_and_added(self, claim_id: str) -> tuple[list[int], list[int]]:
        """The claim's seeds of its first look, and those its rounds added (trained only for `round_runs`)."""
        seeds = self.seeds_of(claim_id)
        first = [s for s in seeds if s in self.preset.seeds]
        return first, [s for s in seeds if s not in self.preset.seeds]

    def look(self, claim_id: str) -> tuple[int, int] | None:
        """(this look, of how many) for a claim on the preset's sequential schedule (its knob `rounds`); None: it
        looks once."""
        rounds = self.preset.seed_rounds
        if len(rounds) < 2 or not CLAIMS.get(claim_id).knobs(self.preset).rounds:
            return None
        n = len(self.seeds_of(claim_id))
        return next((i + 1 for i, r in enumerate(rounds) if r >= n), len(rounds)), len(rounds)

    def next_seeds(self, claim_id: str) -> list[int] | None:
        """The claim's seeds at its next look (new seeds numbered on from the highest), or None at its last."""
        look = self.look(claim_id)
        if look is None or look[0] >= look[1]:
            return None
        seeds = self.seeds_of(claim_id)
        while len(seeds) < self.preset.seed_rounds[look[0]]:
            seeds.append(max(seeds) + 1)
        return seeds

    def on_schedule(self) -> list[str]:
        """The claims on the preset's schedule of seed rounds (those with a `look`)."""
        return [c for c in self.claims if self.look(c) is not None]

    def grown(self, verdicts: list) -> tuple["StudySpec", list[str]]:
        """The study at its next look: a new spec whose `claim_seeds` give each claim whose verdict at this look is
        inconclusive but leans one way (`power.leans`) and has a look left its next look's seeds (this one is left
        as it is); and the claims grown, each with its seeds, in words."""
        seeds = {v.id: s for v in verdicts if (s := self.next_seeds(v.id)) is not None and power.leans(v)}
        new = dataclasses.replace(self, claim_seeds={**self.claim_seeds, **seeds})
        new._built = self._built  # the runs built so far are the same configs: validated once per study
        return new, [f"{cid} ({len(s)} seeds)" for cid, s in seeds.items()]

    def robust_overrides(self) -> dict[str, Any]:
        """The one-bit change of numerics of the robustness pass: another intra-op thread count."""
        return {"train.threads": self.preset.robust_threads}

    def judges_both_inits(self, claim_id: str) -> bool:
        """Is this claim also judged under the other init? --init-pass / --no-init-pass, else the preset's choice
        (`Preset.init_pass`: none, the claims' own knob `init_pass`, or all)."""
        if self.init_pass_override is not None:
            return self.init_pass_override
        mode = self.preset.init_pass
        return mode == "all" or (mode == "chosen" and CLAIMS.get(claim_id).knobs(self.preset).init_pass)

    def inits(self, claim) -> list[str]:
        """The init recipes a claim is judged under: its paper's (or the base's), then (init pass) the other."""
        own = claim.init if self.preset.paper_inits else self.preset.config.model.init
        return [own] + ([other_init(own)] if self.judges_both_inits(claim.id) else [])

    def varied(self, claim, factor: str) -> dict[str, Any] | None:
        """The overrides of `factor`'s other level for this claim's runs, or None where the study does not vary
        it, or the claim's own runs set one of its keys (they fix that factor themselves)."""
        if factor not in self.vary or not claim.runs(self.preset):
            return None
        overrides = factor_overrides(factor, self.preset.config)
        if any(key in o for o in claim.runs(self.preset) for key in overrides):
            return None
        return overrides

    def axis_levels(self, claim) -> list[tuple[str, Any]]:
        """A study file's axes as this claim is varied along them: (key, value) for each value past the first
        (the first is the study's base), one axis at a time; none along an axis the claim's own runs set."""
        return [(key, value) for key, values in self.axes.items() if self.varies_axis(claim, key)
                for value in values[1:]]

    def varies_axis(self, claim, key: str) -> bool:
        runs = claim.runs(self.preset)
        return bool(runs) and not any(key in o for o in runs)

    def fixed_factors(self, claim) -> list[str]:
        """The factors the study varies that this claim's own runs fix (not re-measured for it)."""
        return [f for f in self.vary if claim.runs(self.preset) and self.varied(claim, f) is None]

    def expand(self, claim_registry) -> list[RunSpec]:
        """Every run the claims and the axes need, once each (dedup by config hash), in a stable order: a run
        needed by two claims, or by one claim's init pass and another's own init, is trained once."""
        wanted: list[tuple[str, dict[str, Any], list[int]]] = []  # (who needs it, overrides, seeds)
        for claim_id in self.claims:
            claim = claim_registry.get(claim_id)()
            first, added = self.first_and_added(claim_id)
            runs = [(o, first) for o in claim.runs(self.preset)] + \
                [(o, added) for o in claim.round_runs(self.preset)] if added else \
                [(o, first) for o in claim.runs(self.preset)]
            for i, recipe in enumerate(self.inits(claim)):
                who = f"claim {claim_id}" + (f" (init pass: {recipe})" if i else "")
                wanted.extend((who, {INIT_KEY: recipe, **o}, seeds) for o, seeds in runs)
            for factor in self.vary:
                overrides = self.varied(claim, factor)
                if overrides is not None:
                    wanted.extend((f"claim {claim_id} ({factor} pass)", {INIT_KEY: self.inits(claim)[0], **o,
                                                                          **overrides}, seeds) for o, seeds in runs)
        if self.robustness:
            wanted += [(f"{who} (robustness rerun)", {**o, **self.robust_overrides()}, seeds)
                       for who, o, seeds in list(wanted)]
        for claim_id in self.claims:  # a study file's axes: each claim's runs again at each other value
            claim = claim_registry.get(claim_id)()
            for key, value in self.axis_levels(claim):
                wanted.extend((f"claim {claim_id} (axis {key} = {value!r})",
                               {INIT_KEY: self.inits(claim)[0], **o, key: value}, self.seeds_of(claim_id))
                              for o in claim.runs(self.preset))
        runs: dict[str, RunSpec] = {}
        for source, overrides, seeds in wanted:
            for seed in seeds:
                run = self._run(overrides, seed, source)
                runs.setdefault(run.id, run)
        return list(runs.values())

    def record(self, ids: list[str]) -> dict[str, Any]:
        """What the ledger stores of the study (its meta `study`), which `spec_from_meta` reads back for `normlab
        report`: the preset as run, the claims, seeds and passes, each corpus's tokens and trained line, the run ids."""
        p = self.preset
        return {"preset": p.name, "description": p.description, "claims": self.claims, "seeds": p.seeds,
                "robustness": self.robustness,
                "init_pass_flag": self.init_pass_override,  # --init-pass / --no-init-pass (None: the preset's choice)
                "init_pass": [c for c in self.claims if self.judges_both_inits(c) and CLAIMS.get(c)().runs(p)],
                "claim_seeds": self.claim_seeds,  # seeds a claim's rounds added (`Preset.seed_rounds`)
                "tokens": self.tokens,  # each corpus's vocabulary, resolved at the start: `normlab report` reads none
                "lines": self.lines,  # each corpus's unigram and bigram cross-entropy: the trained line's two ends
                **({"vary": self.vary} if self.vary else {}),  # the nuisance factors beyond the init pass (`--vary`)
                "n_runs": len(ids), "run_ids": ids, "axes": self.axes, "base": p.base, "base_extra": self.base_extra,
                "lrs": p.lrs, "warmup": p.warmup, "lr_fixed": p.lr_fixed, "depths": p.depths,
                "preset_settings": dataclasses.asdict(p)}  # the preset as run: `normlab report` judges with exactly it

    def _run(self, overrides: dict[str, Any], seed: int, source: str) -> RunSpec:
        try:
            return self.run(overrides, seed)
        except ConfigError as e:  # a claim's overrides clash with the base (e.g. a --set): say whose run it is
            raise ConfigError(f"{source} needs a run {overrides} (seed {seed}) that is not a valid config: "
                              f"{one_line(e)}") from None


def one_line(error: Exception) -> str:
    """A config error's lines ("invalid config:" and one per problem) as one line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return "; ".join(line for line in lines if line != "invalid config:")


STUDY_KEYS = ("preset", "claims", "seeds", "base", "axes", "vary")


def own_seeds(preset: Preset, seeds: list[int]) -> Preset:
    """The preset at these seeds. A schedule of looks starts at the preset's own seeds: a user's other seeds look
    once."""
    rounds = preset.seed_rounds if not preset.seed_rounds or len(seeds) == preset.seed_rounds[0] else []
    return dataclasses.replace(preset, seeds=seeds, seed_rounds=rounds)


def load_study(preset: str = "standard", study_file: str | Path | None = None, claims: list[str] | None = None,
               seeds: list[int] | None = None, overrides: list[str] | None = None,
               axes: dict[str, list[Any]] | None = None, robustness: bool = False,
               init_pass: bool | None = None, vary: list[str] | None = None) -> StudySpec:
    """The study for a preset name, or a user's study TOML (which names its preset and may add axes).
    `init_pass`: True or False overrides the preset's init pass (`--init-pass`, `--no-init-pass`); None keeps it.

    `overrides` (`key=value`, as `normlab train --set`) change the preset's base config. Everything is
    validated here, every run included, so a bad study fails before anything is written.
    """
    base_extra: dict[str, Any] = {}
    axes = dict(axes or {})
    if study_file is not None:
        data = read_study_file(study_file)
        preset = data.get("preset", preset)
        claims = claims or data.get("claims")
        seeds = seeds or data.get("seeds")
        base_extra = flatten(data.get("base", {}))
        axes = {**data.get("axes", {}), **axes}
        vary = vary or data.get("vary")
    given = {**{k: ("the study file's [base]", v) for k, v in base_extra.items()},
             **{k: ("--set", v) for k, v in _parse_overrides(overrides or []).items()}}
    base_extra.update(_parse_overrides(overrides or []))
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; valid: {', '.join(PRESETS)}")
    chosen = dataclasses.replace(PRESETS[preset], base={**PRESETS[preset].base, **base_extra})
    if seeds:
        chosen = own_seeds(chosen, _check_seeds(seeds, "seeds"))
    claim_ids = list(claims) if claims else list(chosen.claims)
    for cid in claim_ids:
        CLAIMS.get(cid)  # unknown ids: a clear error listing the valid ones
    for home in sorted({CLAIMS.get(c).home for c in claim_ids} - {"", chosen.name}):
        stray = [c for c in claim_ids if CLAIMS.get(c).home == home]  # their arms and knobs assume that base
        raise ConfigError(f"claims {', '.join(stray)} are judged in their papers' setup, the {home!r} preset's base "
                          f"(RoPE, SwiGLU, GPT-2's init); run them with --preset {home}, not {chosen.name!r}")
    factors = _check_vary(vary or [])
    if "init" in factors:
        init_pass = True  # --vary init is the init pass: every training claim also under the other recipe
    axes = _check_axes(axes, "study axis")
    if axes:  # the base takes each axis's first value: a claim's main verdict is judged there
        first = {key: values[0] for key, values in axes.items()}
        base_extra.update(first)
        chosen = dataclasses.replace(chosen, base={**chosen.base, **first})
    spec = StudySpec(chosen, claim_ids, axes, base_extra, robustness, init_pass,
                     vary=[f for f in factors if f != "init"])
    unread = _check_base_is_used(spec, given)
    for key in axes:
        if not any(spec.varies_axis(CLAIMS.get(c)(), key) for c in claim_ids):
            raise ConfigError(f"study axis {key!r}: no claim of the study can be judged along it (claims "
                              f"{', '.join(claim_ids)}: each sets {key} in its own runs, or trains nothing); "
                              "give an axis a claim's runs leave to the base")
    _validate(spec, CLAIMS)
    if "train.warmup_steps" not in unread:  # else no run reads the base's warmup (each claim's runs set their own)
        check_given(spec.preset.config, "the study's base: ")
        for key, values in axes.items():
            for value in values[1:]:
                check_given(derive(spec.preset.config, {key: value}), f"study axis {key} = {value!r}: ")
    return spec


def _check_base_is_used(spec: StudySpec, given: dict[str, tuple[str, Any]]) -> set[str]:
    """Every setting a user gives the base reaches a run: one that a claim's runs all set themselves would be
    silently replaced there, so it is refused, naming the claim, the key and the value its runs use. Returns the
    keys no run reads from the base (every claim's runs set them)."""
    unread: set[str] | None = None
    for cid in spec.claims:
        runs = CLAIMS.get(cid)().runs(spec.preset)
        if not runs:
            continue
        own = set.intersection(*(set(o) for o in runs))  # the keys every run of this claim sets
        unread = own if unread is None else unread & own
        for key, (where, value) in given.items():
            if key in own:
                used = ", ".join(sorted({repr(o[key]) for o in runs}))
                raise ConfigError(f"{where} sets {key} = {value!r}, but every run of {cid} sets {key} itself ({used}, "
                                  f"from the {spec.preset.name!r} preset): {cid}'s runs would never use the value; "
                                  f"leave it out (or leave {cid} out of this study)")
    return unread or set()


def read_study_file(path: str | Path) -> dict[str, Any]:
    """A study TOML, its keys checked: lists where lists are meant (claims = "C13" is a mistake, not a claim)."""
    data = _read_toml(path)
    where = f"study file {str(path)!r}"
    unknown = set(data) - set(STUDY_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; valid: {', '.join(STUDY_KEYS)}")
    if "preset" in data and not isinstance(data["preset"], str):
        raise ConfigError(f"{where}: preset must be a string, e.g. preset = \"quick\" (got {data['preset']!r})")
    for key, example in (("claims", '["C13"]'), ("seeds", "[0, 1]")):
        if key in data and not isinstance(data[key], list):
            raise ConfigError(f"{where}: {key} must be a list, e.g. {key} = {example} (got {data[key]!r})")
    if "claims" in data and not all(isinstance(c, str) for c in data["claims"]):
        raise ConfigError(f"{where}: claims must be claim ids, e.g. claims = [\"C13\"] (got {data['claims']!r})")
    if "seeds" in data:
        _check_seeds(data["seeds"], f"{where}: seeds")
    for key in ("base", "axes"):
        if key in data and not isinstance(data[key], dict):
            raise ConfigError(f"{where}: {key} must be a table, e.g. [{key}] (got {data[key]!r})")
    # a scalar axis is one value; an empty list has none and is refused in _check_axes
    data["axes"] = {k: v if isinstance(v, list) else [v] for k, v in data.get("axes", {}).items()}
    return data


def _check_vary(factors: Any) -> list[str]:
    """`--vary init,context,width`: known factors, each once, in the order given."""
    if not isinstance(factors, (list, tuple)):
        raise ConfigError(f"vary must be a list of factors, e.g. vary = [\"init\", \"width\"] (got {factors!r})")
    bad = [f for f in factors if f not in FACTORS]
    if bad:
        raise ConfigError(f"unknown factor {bad[0]!r} to vary; valid: {', '.join(FACTORS)}")
    return list(dict.fromkeys(factors))


def _check_seeds(seeds: Any, where: str) -> list[int]:
    if not isinstance(seeds, (list, tuple)) or not seeds:
        raise ConfigError(f"{where} must be a non-empty list of integers, e.g. [0, 1] (got {seeds!r})")
    bad = [s for s in seeds if isinstance(s, bool) or not isinstance(s, int)]
    if bad:
        raise ConfigError(f"{where} must be integers, e.g. [0, 1] (got {bad[0]!r} in {list(seeds)!r})")
    return list(seeds)


def _check_axes(axes: dict[str, Any], where: str) -> dict[str, list[Any]]:
    for key, values in axes.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where} {key!r} has no values (got {values!r}); give a non-empty list, "
                              f'e.g. "{key}" = [value1, value2]')
    return axes


def _parse_overrides(overrides: list[str]) -> dict[str, Any]:
    parsed: dict[str, Any] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"override {item!r} is not of the form key=value (e.g. train.steps=100)")
        holder: dict[str, Any] = {}
        apply_override(holder, f"v={value}")
        parsed[key.strip()] = holder["v"]
    return parsed


def _validate(spec: StudySpec, claim_registry) -> None:
    """The base, every value of every axis on its own (the clearest error), then every run."""
    try:
        spec.run({}, spec.preset.seeds[0])
    except ConfigError as e:
        raise ConfigError(f"the study's base config (preset {spec.preset.name!r} with its [base] and --set "
                          f"overrides) is not valid: {one_line(e)}") from None
    for key, values in spec.axes.items():
        for value in values:
            try:
                spec.run({key: value}, spec.preset.seeds[0])
            except ConfigError as e:
                raise ConfigError(f"study axis {key!r}: value {value!r} is not valid: {one_line(e)}") from None
    spec.expand(claim_registry)


def spec_from_meta(meta: dict[str, Any], schema: int = 0) -> StudySpec:
    """The spec a ledger was run with, from what it stored (for `normlab report`): its preset's knobs as they
    were when it ran, its base, claims, seeds and passes. Nothing is re-expanded or re-validated: its runs are
    the ledger's, and today's preset (which may have changed since) is not consulted where the study stored
    its own. `schema`: the ledger's (`Ledger.schema`), which says what an older normlab's spellings to read."""
    study = meta["study"]
    if "preset_settings" in study:
        preset = stored_preset(study["preset_settings"], schema)
    else:  # a study registered before its preset was stored: the preset of that name as it is today
        if study["preset"] not in PRESETS:
            raise ConfigError(f"the study was run with preset {study['preset']!r}, which this normlab does not "
                              f"know; valid: {', '.join(PRESETS)}")
        preset = dataclasses.replace(PRESETS[study["preset"]])
    preset = own_seeds(dataclasses.replace(preset, base=upgrade_overrides(study["base"], schema)),
                       list(study["seeds"]))
    for cid in study["claims"]:
        CLAIMS.get(cid)  # a claim this normlab lacks: a clear error listing the valid ones
    spec = StudySpec(preset, list(study["claims"]), study.get("axes", {}), study.get("base_extra", {}),
                     study.get("robustness", False), study.get("init_pass_flag"),
                     vary=_check_vary(study.get("vary") or []))
    spec.claim_seeds = {k: list(v) for k, v in study.get("claim_seeds", {}).items()}
    spec.tokens = {k: list(v) for k, v in study.get("tokens", {}).items()}
    spec.resolve_vocab = "tokens" in study
    spec.lines = {k: list(v) for k, v in study.get("lines", {}).items()}
    return spec


def _read_toml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"study file {str(p)!r} does not exist")
    try:
        return tomllib.loads(p.read_text("utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"study file {str(p)!r} is not valid TOML: {e}") from None
