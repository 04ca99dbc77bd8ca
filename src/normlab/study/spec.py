"""What a user asks a study for: a preset, possibly narrowed to some claims, its seeds, the base's overrides, a study
file's axes, the nuisance factors to vary, the init and robustness passes (`StudySpec`), read and checked here
(`read_study`), or read back from a ledger (`spec_from_meta`). The plan of what that asks, every claim's passes and
runs, is built once from it (study/plan.py).
"""
from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normlab.config import ConfigError, apply_override, check_given, derive, upgrade_overrides
from normlab.study.claims import CLAIMS
from normlab.study.presets import PRESETS, Preset, stored_preset
from normlab.study.records import flatten
from normlab.study.runs import base_invalid, one_line


# The nuisance factors `--vary` re-measures each training claim under, beyond its own level: the init recipe (the
# other one: `other_init`), context and width. Each is the overrides of its other level on the study's base, and
# how its two levels read. A claim whose own runs set one of a factor's keys (C8's narrow 32-token models) is not
# varied along it, and its verdict says so
FACTORS: dict[str, dict[str, Any]] = {
    "init": {},  # the other recipe, per claim (`other_init`): the init pass
    "context": {"model.block_size": 64, "train.eval_batches": 10},  # 64 tokens, the same val tokens per evaluation
    "width": {"model.d_model": 128},  # twice the CPU presets' width (4 heads of 32)
}


@dataclass(frozen=True)
class StudySpec:
    """A preset, possibly narrowed to some claims, plus a user's extra axes, factors and passes."""

    preset: Preset
    claims: list[str]
    axes: dict[str, list[Any]] = field(default_factory=dict)
    base_extra: dict[str, Any] = field(default_factory=dict)  # already merged into preset.base; kept for the record
    robustness: bool = False  # also rerun every claim's runs at preset.robust_threads threads (`fragile` marks)
    # --init-pass (True) / --no-init-pass (False): every training claim also judged under the other init, or none;
    # None: no override, the preset's choice (`Preset.init_pass`)
    init_pass_override: bool | None = None
    # the nuisance factors re-measured beyond the init pass (`--vary context,width`; `init` is the init pass)
    vary: list[str] = field(default_factory=list)


STUDY_KEYS = ("preset", "claims", "seeds", "base", "axes", "vary")


def own_seeds(preset: Preset, seeds: list[int]) -> Preset:
    """The preset at these seeds. A schedule of looks starts at the preset's own seeds: a user's other seeds look
    once."""
    rounds = preset.seed_rounds if not preset.seed_rounds or len(seeds) == preset.seed_rounds[0] else []
    return dataclasses.replace(preset, seeds=seeds, seed_rounds=rounds)


def read_study(preset: str = "standard", study_file: str | Path | None = None, claims: list[str] | None = None,
               seeds: list[int] | None = None, overrides: list[str] | None = None,
               axes: dict[str, list[Any]] | None = None, robustness: bool = False,
               init_pass: bool | None = None, vary: list[str] | None = None) -> StudySpec:
    """The study for a preset name, or a user's study TOML (which names its preset and may add axes), checked: the
    preset, claims, seeds, factors and axes named, the base and each axis value a valid config, and every setting
    given to the base read by some run. `init_pass`: True or False overrides the preset's init pass (`--init-pass`,
    `--no-init-pass`); None keeps it. `overrides` (`key=value`, as `normlab train --set`) change the preset's base
    config. The runs themselves are built and validated with the plan (`load.load_study`)."""
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
    _validate(spec)
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


def _validate(spec: StudySpec) -> None:
    """The base, then every value of every axis on its own: the clearest error (the runs are the plan's)."""
    try:
        spec.preset.config
    except ConfigError as e:
        raise base_invalid(spec.preset.name, e) from None
    for key, values in spec.axes.items():
        for value in values:
            try:
                derive(spec.preset.config, {key: value})
            except ConfigError as e:
                raise ConfigError(f"study axis {key!r}: value {value!r} is not valid: {one_line(e)}") from None


def spec_from_meta(meta: dict[str, Any], schema: int = 0) -> StudySpec:
    """The study a ledger was run with, from what it stored (for `normlab report`): its preset's knobs as they
    were when it ran, its base, claims, seeds and passes. Nothing is validated again: its runs are the ledger's,
    and today's preset (which may have changed since) is not consulted where the study stored its own. What its
    plan resolved (its claims' seeds after their rounds, each corpus's tokens and trained line) is the plan's
    (`plan.plan_from_meta`). `schema`: the ledger's (`Ledger.schema`), which says what an older normlab's
    spellings to read."""
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
    return StudySpec(preset, list(study["claims"]), study.get("axes", {}), study.get("base_extra", {}),
                     study.get("robustness", False), study.get("init_pass_flag"),
                     vary=_check_vary(study.get("vary") or []))


def _read_toml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"study file {str(p)!r} does not exist")
    try:
        return tomllib.loads(p.read_text("utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"study file {str(p)!r} is not valid TOML: {e}") from None
