"""A study's plan as a value, built once from what the user asked for (`plan_study`; `load.load_study` reads what is
asked and sizes it): for each claim, the seeds it is judged on, its look, its share of α per look, its typed passes
(its own runs, the other init recipe, each `--vary` factor, each study-file axis, another thread count), each the
base config its records are judged against, and the runs all of them need (`StudyPlan.runs`), every corpus those read
resolved. A seed round is a new plan (`StudyPlan.grow`). The runner trains the plan's runs, the study state
(state.py) and judging (judge.py) read it, and the report (publish.py) reads it back from the ledger
(`plan_from_meta`).
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

from normlab.config import RunConfig
from normlab.study import power
from normlab.study.claims import CLAIMS, claim_number
from normlab.study.presets import Preset
from normlab.study.design import design_record
from normlab.study.runs import RunBuilder, RunSpec
from normlab.study.spec import FACTORS, StudySpec, spec_from_meta

MAIN, OTHER_INIT, VARY, AXIS, ROBUSTNESS = "main", "other init", "vary", "axis", "robustness"
INIT_KEY = "model.init"
# the recipe the study re-measures a claim under: what most users train with (GPT-2's), or Xiong et al.'s where
# the claim's own is GPT-2's
OTHER_RECIPE = {"xiong": "gpt2", "gpt2": "xiong"}


def other_init(recipe: str) -> str:
    return OTHER_RECIPE.get(recipe, "gpt2")


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
    # the runs the claim's passes need, in the order they are registered: (whose, overrides, seeds), its own and
    # its factors' first (`own_runs`), its axes' apart (`axis_runs`: after every claim's robustness reruns)
    own_runs: tuple[tuple[str, dict[str, Any], tuple[int, ...]], ...] = ()
    axis_runs: tuple[tuple[str, dict[str, Any], tuple[int, ...]], ...] = ()

    @property
    def passes(self) -> list[Pass]:
        """Every pass whose runs exist for this claim, its own first."""
        return ([self.main] + ([self.other_init] if self.other_init else []) + [p for _, p in self.varied]
                + [p for axis in self.axes for p in axis.passes] + ([self.robustness] if self.robustness else []))


@dataclass(frozen=True)
class StudyPlan:
    """What the user asked for (`spec`), the study's claims in family order (`family`: the order they are judged
    and reported in), each one's plan, the base its groups match, the runs they all need, and each corpus's tokens
    and trained line (`builder`: the runs built so far, shared by the plans of one study's rounds)."""

    spec: StudySpec
    family: tuple[str, ...]
    plans: dict[str, ClaimPlan]
    base: dict[str, Any]
    builder: RunBuilder
    claim_seeds: dict[str, list[int]]  # a claim's seeds after its rounds, where they are not the preset's
    robust_changed: dict[str, Any] | None = None
    # each claim's line of the power plan (`normlab study --plan`, the report's)
    power_plan: tuple[power.PlanRow, ...] = ()
    # the preset's design-seed verdicts (`design.design_record`), set beside the study's once it is judged
    design: dict[str, Any] | None = None

    def __getitem__(self, claim_id: str) -> ClaimPlan:
        return self.plans[claim_id]

    @property
    def preset(self) -> Preset:
        return self.spec.preset

    @property
    def claims(self) -> list[str]:
        """The study's claims, as the user named them."""
        return self.spec.claims

    @property
    def lines(self) -> dict[str, list]:
        """Each corpus's [unigram, bigram] cross-entropy by `corpus_key`: the trained line's two ends."""
        return self.builder.lines

    def base_config(self) -> RunConfig:
        """The study's base run (the preset's base with the user's overrides, its first seed), validated."""
        return self.builder.run({}, self.preset.seeds[0]).config

    @functools.cached_property
    def runs(self) -> list[RunSpec]:
        """Every run the claims and the axes need, once each (by config hash), in a stable order: a run needed by
        two claims, or by one claim's init pass and another's own init, is trained once."""
        wanted = [w for cid in self.claims for w in self.plans[cid].own_runs]
        if self.robust_changed:
            wanted += [(f"{who} (robustness rerun)", {**o, **self.robust_changed}, seeds) for who, o, seeds in wanted]
        wanted += [w for cid in self.claims for w in self.plans[cid].axis_runs]
        runs: dict[str, RunSpec] = {}
        for source, overrides, seeds in wanted:
            for seed in seeds:
                run = self.builder.named(overrides, seed, source)
                runs.setdefault(run.id, run)
        return list(runs.values())

    def on_schedule(self) -> list[str]:
        """The claims on the preset's schedule of seed rounds (those with a `look`)."""
        return [c for c in self.claims if self.plans[c].look is not None]

    def next_seeds(self, claim_id: str) -> list[int] | None:
        """The claim's seeds at its next look (new seeds numbered on from the highest), or None at its last."""
        look, seeds = self.plans[claim_id].look, list(self.plans[claim_id].seeds)
        if look is None or look[0] >= look[1]:
            return None
        while len(seeds) < self.preset.seed_rounds[look[0]]:
            seeds.append(max(seeds) + 1)
        return seeds

    def grow(self, leaning: tuple[str, ...]) -> tuple["StudyPlan", list[str]]:
        """The study at its next look: a new plan in which each claim whose verdict at this look leans one way
        (`leaning`: the judgement's, `power.leans`) and has a look left has its next look's seeds (this plan is left
        as it is); and the claims grown, each with its seeds, in words. The runs built so far are shared: the same
        configs."""
        seeds = {cid: s for cid in leaning if (s := self.next_seeds(cid)) is not None}
        return self.with_seeds(seeds) if seeds else self, [f"{cid} ({len(s)} seeds)" for cid, s in seeds.items()]

    def with_seeds(self, seeds: dict[str, list[int]]) -> "StudyPlan":
        """The plan with these claims at these seeds (the others as they are): a new plan sharing the runs built."""
        return plan_study(self.spec, list(self.power_plan), self.design, {**self.claim_seeds, **seeds}, self.builder)

    def record(self, ids: list[str]) -> dict[str, Any]:
        """What the ledger stores of the study (its meta `study`), which `plan_from_meta` reads back for `normlab
        report`: the preset as run, the claims, seeds and passes, each corpus's tokens and trained line, the run
        ids."""
        spec, p = self.spec, self.preset
        return {"preset": p.name, "description": p.description, "claims": spec.claims, "seeds": p.seeds,
                "robustness": spec.robustness,
                "init_pass_flag": spec.init_pass_override,  # --init-pass / --no-init-pass (None: the preset's)
                "init_pass": [c for c in spec.claims if self.plans[c].other_init],
                "claim_seeds": self.claim_seeds,  # seeds a claim's rounds added (`Preset.seed_rounds`)
                "tokens": self.builder.tokens,  # each corpus's vocabulary, resolved at the start: no corpus read later
                "lines": self.lines,  # each corpus's unigram and bigram cross-entropy: the trained line's two ends
                **({"vary": spec.vary} if spec.vary else {}),  # the nuisance factors beyond the init pass (`--vary`)
                "n_runs": len(ids), "run_ids": ids, "axes": spec.axes, "base": p.base, "base_extra": spec.base_extra,
                "lrs": p.lrs, "warmup": p.warmup, "lr_fixed": p.lr_fixed, "depths": p.depths,
                "preset_settings": dataclasses.asdict(p)}  # the preset as run: `normlab report` judges with exactly it


def plan_from_meta(meta: dict[str, Any], schema: int = 0) -> StudyPlan:
    """The plan a ledger's study ran to its end, from what it stored (for `normlab report`): its spec
    (`spec.spec_from_meta`), its claims' seeds after their rounds, each corpus's tokens and trained line (no corpus
    is read: a study stored before its tokens were leaves its runs' vocabulary unset, as it was then)."""
    study = meta["study"]
    spec = spec_from_meta(meta, schema)
    builder = RunBuilder(spec.preset, {k: list(v) for k, v in study.get("tokens", {}).items()},
                         {k: list(v) for k, v in study.get("lines", {}).items()}, resolve_vocab="tokens" in study)
    design = design_record(spec.preset.name)
    return plan_study(spec, power.plan(spec, design), design,
                      {k: list(v) for k, v in study.get("claim_seeds", {}).items()}, builder)


def plan_study(spec: StudySpec, power_plan: list[power.PlanRow], design: dict[str, Any] | None,
               claim_seeds: dict[str, list[int]] | None = None, builder: RunBuilder | None = None) -> StudyPlan:
    """The plan of what the user asked for at these seeds (`claim_seeds`: a claim's seeds after its rounds; else
    the preset's), every claim's passes resolved once. `power_plan`: each claim's test and its spending over its
    looks (`power.plan`, sized on `design`: the design seeds' record, `design.design_record`), which a seed round
    keeps; `builder`: the runs an earlier plan of the study built."""
    rows = {row.claim: row for row in power_plan}
    builder = builder or RunBuilder(spec.preset)
    claim_seeds = dict(claim_seeds or {})
    base = builder.base()
    robust = {"train.threads": spec.preset.robust_threads} if spec.robustness else None
    plans = {cid: plan_claim(spec, cid, base, claim_seeds.get(cid), robust, rows[cid].shares) for cid in spec.claims}
    return StudyPlan(spec, tuple(sorted(spec.claims, key=claim_number)), plans, base, builder, claim_seeds, robust,
                     tuple(rows.values()), design)


def look(preset: Preset, claim_id: str, n_seeds: int) -> tuple[int, int] | None:
    """(this look, of how many) for a claim on the preset's sequential schedule (its knob `rounds`) at `n_seeds`;
    None: it looks once."""
    rounds = preset.seed_rounds
    if len(rounds) < 2 or not CLAIMS.get(claim_id).knobs(preset).rounds:
        return None
    return next((i + 1 for i, r in enumerate(rounds) if r >= n_seeds), len(rounds)), len(rounds)


def inits(spec: StudySpec, claim) -> tuple[str, ...]:
    """The init recipes a claim is judged under: its paper's (or the base's), then (init pass) the other: with
    --init-pass / --no-init-pass, else the preset's choice (`Preset.init_pass`: none, the claims' knob, or all)."""
    preset = spec.preset
    own = claim.init if preset.paper_inits else preset.config.model.init
    both = spec.init_pass_override
    if both is None:
        both = preset.init_pass == "all" or (preset.init_pass == "chosen" and claim.knobs(preset).init_pass)
    return (own, other_init(own)) if both else (own,)


def varies_axis(claim, preset: Preset, key: str) -> bool:
    """Is the claim varied along a study axis: it trains, and its own runs leave `key` to the base."""
    runs = claim.runs(preset)
    return bool(runs) and not any(key in o for o in runs)


def varied(claim, preset: Preset, factor: str) -> dict[str, Any] | None:
    """The overrides of `factor`'s other level for this claim's runs, or None where the claim's own runs set one
    of its keys (they fix that factor themselves)."""
    overrides = factor_overrides(factor, preset.config)
    return None if any(key in o for o in claim.runs(preset) for key in overrides) else overrides


def plan_claim(spec: StudySpec, claim_id: str, base: dict[str, Any], seeds: list[int] | None,
               robust: dict[str, Any] | None, shares: tuple[float, ...]) -> ClaimPlan:
    """One claim's plan: its paper's init recipe for its own pass, then the other recipe's, each `--vary` factor's
    other level, each axis value past the first, and another thread count, where the study runs them. `shares`:
    its spending of α over its looks, from its line of the power plan (used where it has looks)."""
    claim, preset = CLAIMS.get(claim_id)(), spec.preset
    seeds = tuple(seeds or preset.seeds)
    at = look(preset, claim_id, len(seeds))
    recipes = inits(spec, claim)
    main = Pass(MAIN, {**base, INIT_KEY: recipes[0]})
    common = dict(id=claim_id, preset=preset, seeds=seeds, inits=recipes, look=at,
                  shares=shares if at else None, main=main)
    if not claim.runs(preset):
        return ClaimPlan(trains=False, **common)
    factors = [(f, o) for f in spec.vary if (o := varied(claim, preset, f)) is not None]
    axes = tuple(AxisPlan(key, axis_level(key, values[0]),
                          tuple(Pass(AXIS, {**main.base, key: value}, key, axis_level(key, value))
                                for value in values[1:]))
                 for key, values in spec.axes.items() if varies_axis(claim, preset, key))
    return ClaimPlan(
        trains=True, other_init=Pass(OTHER_INIT, {**base, INIT_KEY: recipes[1]}) if len(recipes) > 1 else None,
        varied=tuple((Pass(MAIN, main.base, f, level_name(f, main.base)),
                      Pass(VARY, {**main.base, **o}, f, level_name(f, {**main.base, **o}))) for f, o in factors),
        axes=axes, fixed=tuple([f for f in spec.vary if f not in dict(factors)]
                               + [key for key in spec.axes if not varies_axis(claim, preset, key)]),
        robustness=Pass(ROBUSTNESS, {**main.base, **robust}) if robust else None, robust_changed=robust,
        own_runs=own_runs(claim, preset, seeds, recipes, factors), axis_runs=tuple(
            (f"claim {claim_id} (axis {key} = {value!r})", {INIT_KEY: recipes[0], **o, key: value}, seeds)
            for key, values in spec.axes.items() if varies_axis(claim, preset, key) for value in values[1:]
            for o in claim.runs(preset)), **common)


def own_runs(claim, preset: Preset, seeds: tuple[int, ...], recipes: tuple[str, ...],
             factors: list[tuple[str, dict[str, Any]]]) -> tuple[tuple[str, dict[str, Any], tuple[int, ...]], ...]:
    """A claim's runs under each init recipe and each varied factor: its runs at the seeds of its first look, and
    its round runs (`Claim.round_runs`) at the seeds its rounds added."""
    first = tuple(s for s in seeds if s in preset.seeds)
    added = tuple(s for s in seeds if s not in preset.seeds)
    runs = [(o, first) for o in claim.runs(preset)] + ([(o, added) for o in claim.round_runs(preset)] if added
                                                        else [])
    out = [(f"claim {claim.id}" + (f" (init pass: {recipe})" if i else ""), {INIT_KEY: recipe, **o}, s)
           for i, recipe in enumerate(recipes) for o, s in runs]
    return tuple(out + [(f"claim {claim.id} ({f} pass)", {INIT_KEY: recipes[0], **o, **overrides}, s)
                        for f, overrides in factors for o, s in runs])


def axis_level(key: str, value: Any) -> str:
    """A study-file axis's level as a reader names it: `norm = rmsnorm`."""
    return f"{key.split('.')[-1]} = {value}"
