"""A study's plan as a value: for each claim, the seeds it is judged on, its look, its share of α per look, and its
typed passes (its own runs, the other init recipe, each `--vary` factor, each study-file axis, another thread
count), each the base config its records are judged against. Built once from what the user asked for
(`plan_study`); judging (judge.py) and the follow-ups (state.py) read it, never the spec.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from normlab.study import power
from normlab.study.claims import CLAIMS, claim_number
from normlab.study.presets import Preset
from normlab.study.spec import INIT_KEY, StudySpec, level_name

MAIN, OTHER_INIT, VARY, AXIS, ROBUSTNESS = "main", "other init", "vary", "axis", "robustness"


@dataclass(frozen=True)
class Pass:
    """One pass of a claim's runs: what it is (`kind`), the base config its records are matched against, and, for a
    factor or an axis, which (`factor`) and the level it stands for as a reader names it (`level`)."""

    kind: str
    base: dict[str, Any]
    factor: str = ""
    level: str = ""


@dataclass(frozen=True)
class AxisPlan:
    """A study-file axis the claim is varied along: its key, the level of its first value (the study's base, where
    the claim's own verdict is) and one pass per other value."""

    key: str
    own_level: str
    passes: tuple[Pass, ...]


@dataclass(frozen=True)
class ClaimPlan:
    """Everything judging one claim reads: its preset, seeds, init recipes, look and α shares, and its passes."""

    id: str
    preset: Preset
    seeds: tuple[int, ...]
    inits: tuple[str, ...]
    look: tuple[int, int] | None
    shares: tuple[float, ...] | None
    trains: bool  # the claim has training runs (else none of the passes below exist)
    main: Pass
    other_init: Pass | None = None
    varied: tuple[tuple[Pass, Pass], ...] = ()  # (the main pass at the factor's own level, the other level's)
    axes: tuple[AxisPlan, ...] = ()
    fixed: tuple[str, ...] = ()  # factors the study varies that the claim's own runs fix
    robustness: Pass | None = None
    robust_changed: dict[str, Any] | None = None

    def passes(self) -> list[Pass]:
        """Every pass whose runs exist for this claim, its own first."""
        return ([self.main] + ([self.other_init] if self.other_init else []) + [p for _, p in self.varied]
                + [p for axis in self.axes for p in axis.passes] + ([self.robustness] if self.robustness else []))


@dataclass(frozen=True)
class StudyPlan:
    """The study's claims in family order, each one's plan, the base its groups match, and each corpus's trained
    line (`study.trained`)."""

    claims: tuple[str, ...]
    plans: dict[str, ClaimPlan]
    base: dict[str, Any]
    lines: dict[str, list]
    robust_changed: dict[str, Any] | None = None

    def __getitem__(self, claim_id: str) -> ClaimPlan:
        return self.plans[claim_id]


def plan_study(spec: StudySpec) -> StudyPlan:
    """The plan of what the user asked for, every claim's passes resolved once."""
    base = spec.base_flat()
    plans = {cid: plan_claim(spec, cid, base) for cid in spec.claims}
    return StudyPlan(tuple(sorted(spec.claims, key=claim_number)), plans, base, spec.lines,
                     spec.robust_overrides() if spec.robustness else None)


def plan_claim(spec: StudySpec, claim_id: str, base: dict[str, Any]) -> ClaimPlan:
    """One claim's plan: its paper's init recipe for its own pass, then the other recipe's, each `--vary` factor's
    other level, each axis value past the first, and another thread count, where the study runs them."""
    claim = CLAIMS.get(claim_id)()
    look = spec.look(claim_id)
    recipes = tuple(spec.inits(claim))
    main = Pass(MAIN, {**base, INIT_KEY: recipes[0]})
    common = dict(id=claim_id, preset=spec.preset, seeds=tuple(spec.seeds_of(claim_id)), inits=recipes, look=look,
                  shares=power.claim_shares(spec, claim_id) if look else None, main=main)
    if not claim.runs(spec.preset):
        return ClaimPlan(trains=False, **common)
    varied = []
    for factor in spec.vary:
        overrides = spec.varied(claim, factor)
        if overrides is not None:
            other = {**main.base, **overrides}
            varied.append((Pass(MAIN, main.base, factor, level_name(factor, main.base)),
                           Pass(VARY, other, factor, level_name(factor, other))))
    axes = tuple(AxisPlan(key, axis_level(key, values[0]),
                          tuple(Pass(AXIS, {**main.base, key: value}, key, axis_level(key, value))
                                for value in values[1:]))
                 for key, values in spec.axes.items() if spec.varies_axis(claim, key))
    fixed = tuple(spec.fixed_factors(claim) + [key for key in spec.axes if not spec.varies_axis(claim, key)])
    robust = spec.robust_overrides() if spec.robustness else None
    return ClaimPlan(trains=True, other_init=Pass(OTHER_INIT, {**base, INIT_KEY: recipes[1]}) if len(recipes) > 1
                     else None, varied=tuple(varied), axes=axes, fixed=fixed,
                     robustness=Pass(ROBUSTNESS, {**main.base, **robust}) if robust else None, robust_changed=robust,
                     **common)


def axis_level(key: str, value: Any) -> str:
    """A study-file axis's level as a reader names it: `norm = rmsnorm`."""
    return f"{key.split('.')[-1]} = {value}"
