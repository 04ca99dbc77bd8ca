"""What a claim is in code: the `@claim` that registers it, the runs it needs, how its verdict is computed, and
its figures.

A verdict is `holds`, `does not hold` or `inconclusive` (too few seeds, too much
spread, too small a budget), always with the statistic, its value, the number of
seeds and the settings. A claim is made with the `Level` its decisions are made at (the family's α, a look's share
of it: `statistics.Level`) and hands it to each of them (`decisions.py`). What a preset may change about a claim is
the claim's own `Knobs`, with the claim's defaults, beside it.
"""
from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import asdict, dataclass, field, replace
from typing import Any, ClassVar

from normlab.config import Change, ConfigError
from normlab.jsonsafe import json_safe
from normlab.registry import Registry
from normlab.report.figure import Figure
from normlab.study.claims.statistics import Level, SignSplit
from normlab.study.records import RunRecord

CLAIMS: Registry[type["Claim"]] = Registry("claim")
# a claim id is a family letter and a number: C the seed articles' claims, F the frontier papers'
FAMILIES = {"C": "the seed articles' claims", "F": "the frontier placements' claims (2024–2026)"}


def claim(cid: str, title: str, *, sources: str, paper: str):
    """Register a Claim subclass under `cid` with what it states, each written once, here: its title, the seed
    articles that make it (`sources`), the paper and section whose setup it follows, and its statement, which is
    the class's docstring (whitespace folded, as typer folds a command's help)."""
    if cid[:1] not in FAMILIES or not cid[1:].isdigit():
        raise ValueError(f"claim id {cid!r} is not a family letter and a number; families: "
                         + ", ".join(f"{k} ({v})" for k, v in FAMILIES.items()))

    def add(cls: type["Claim"]) -> type["Claim"]:
        doc = cls.__dict__.get("__doc__")
        if doc is None and sys.flags.optimize < 2:  # python -OO strips every docstring: the statement is then empty
            raise ValueError(f"claim {cid} states nothing: a claim's statement is its class docstring")
        if "__dataclass_fields__" not in vars(cls.Knobs):
            raise ValueError(f"claim {cid}'s Knobs is not a dataclass of its own: decorate it @dataclass(frozen=True)")
        cls.Knobs()  # every knob has its default: a preset sets only what it changes
        cls.id, cls.title, cls.sources, cls.paper = cid, title, sources, paper
        cls.statement = " ".join((doc or "").split())
        return CLAIMS.register(cid)(cls)
    return add


# a rule's three words, and the typed outcome a verdict becomes once the study has judged it at every level it
# measured (`Verdict.outcome`: `depends on <factor>`, where judged, an inconclusive verdict's kind)
from normlab.report.outcome import (FAILS, HOLDS, INCONCLUSIVE, Outcome, decisive, outcome_of,  # noqa: E402,F401
                                    split_and_open)


@dataclass(frozen=True)
class Verdict:
    id: str
    verdict: str
    statistic: str  # what `value` is, in words
    value: float | None
    n_seeds: int
    settings: dict[str, Any]
    details: dict[str, Any] = field(default_factory=dict)
    summary: str = ""
    fragile: bool | None = None  # None: not checked; True: the robustness rerun gave another verdict
    robustness: dict[str, Any] = field(default_factory=dict)  # what the rerun changed and what it gave
    reading: str = ""  # the key number in the claim's direction, in words ("Pre-LN uses 1.1 % more peak memory")
    parts: list[dict[str, Any]] = field(default_factory=list)  # sub-verdicts of a bundled claim (`Part.to_dict`)
    interval: list[float] | None = None  # the key number's interval (its level is in `test`)
    test: str = ""  # how the key number was decided: "paired t over 5 seeds, 95 %", "TOST ...", "Welch t ..."
    seeds: list[int] = field(default_factory=list)  # the seeds the decision used
    init: str = ""  # the init recipe the verdict was judged under
    init_dependent: bool | None = None  # None: not checked; True: the other recipe gave another verdict
    other_init: dict[str, Any] = field(default_factory=dict)  # the other recipe's verdict, number and interval
    # the sequential seed rounds: {"look": k, "looks": K, "alpha": level of this look, "n_seeds": seeds at it};
    # empty where the claim looks once
    look: dict[str, Any] = field(default_factory=dict)
    # where the verdict holds: {factor: {level: verdict}} over the nuisance levels the study measured (the init
    # recipe, context, width), the primary level first; a factor whose decisive verdicts disagree makes the
    # verdict `depends on <factor>` (scope.scope_verdict)
    scope: dict[str, dict[str, str]] = field(default_factory=dict)
    # the factors of `scope` whose levels give opposite decisive verdicts: the outcome is `depends on` them, while
    # `verdict` stays the rule's word at the claim's own levels (scope.scope_verdict)
    depends_on: list[str] = field(default_factory=list)
    # an inconclusive verdict's kind (report/outcome.WHY) and about how many seeds in all would decide it (None: no
    # projection); set by the study's power plan (study/power.py)
    why: str = ""
    needed: int | None = None
    # what `needed` counts: seeds, or "timing rounds" where the interval left open is a measurement's (C10's norm
    # timing), and how many of those it was judged on (None: its seeds)
    unit: str = "seeds"
    unit_count: int | None = None
    bundled: bool = False  # its verdict is its parts combined (`combine`; corrected for them: `Claim.corrected`)
    # the family-wise control of the study's primary decisions (study/family.py): {"level": the α this verdict was
    # decided at, "step": its Holm step, "m": the family's size, "alone": the verdict at α = 0.05 alone}
    family: dict[str, Any] = field(default_factory=dict)
    # the same claim on the design seeds (study/design.py): {"verdict", "reading", "seeds", "replicated"}; empty
    # where no design record exists for the preset
    design: dict[str, Any] = field(default_factory=dict)
    # the primary test's failure split, where the claim's evidence is one (its `test_kind` is "sign": C1, C4, C8,
    # C11, C14, F7, F8, F12): what the power plan reads to tell whether more seeds could decide it (study/power.py);
    # verdicts.json keeps it in `details`
    evidence: SignSplit | None = None

    @property
    def outcome(self) -> Outcome:
        """The verdict as a typed value: the rule's word, the factors it depends on, the levels that left it open
        (of the factors that do not split it), and an inconclusive verdict's kind."""
        _, open_levels = split_and_open(self.scope)
        return Outcome(self.verdict, tuple(self.depends_on), open_levels if decisive(self.verdict) else (),
                       self.why if self.verdict == INCONCLUSIVE and not self.depends_on else "", self.needed,
                       self.unit_count or len(self.seeds) or self.n_seeds or None, self.unit)

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> "Verdict":
        """A verdicts.json row back as a Verdict: its rule's word is `primary`; `outcome` is derived, not stored."""
        names = {f.name for f in dataclasses.fields(cls)} - {"evidence"}
        outcome = outcome_of(row)  # a row from before typed outcomes is read from its data, never its words
        details = dict(row.get("details") or {})
        return cls(**{**{k: v for k, v in row.items() if k in names}, "verdict": outcome.verdict,
                      "depends_on": list(outcome.depends_on), "details": details,
                      "evidence": SignSplit.from_dict(details.pop("evidence", None))})

    def to_dict(self) -> dict[str, Any]:
        """As verdicts.json holds it: `verdict` is the outcome's text (`depends on init`), `primary` the rule's word
        at the claim's own levels, `outcome` the typed outcome."""
        outcome = self.outcome
        row = {**asdict(self), "verdict": outcome.text, "primary": self.verdict, "outcome": outcome.to_dict()}
        del row["evidence"]
        if self.evidence is not None:
            row["details"] = {**row["details"], "evidence": self.evidence.to_dict()}
        return row


@dataclass(frozen=True)
class Knobs:
    """A claim's settings that a preset may change, each with the claim's default. Every claim has these two; a
    claim with settings of its own declares them in a subclass beside it (`class Knobs(Claim.Knobs)`, C14's stress
    lrs), where it also changes these two defaults if its own differ. A preset changes them per claim
    (`Preset.knobs`), and the claim reads them with `self.knobs(preset)`."""

    # on the preset's schedule of sequential seed rounds (`Preset.seed_rounds`): a claim whose next round is cheap
    # takes it where its first look is undecided; the others look once, at the full α
    rounds: bool = False
    # judged under the other init recipe too, where the preset's init pass is the claims' own choice
    # (`Preset.init_pass = "chosen"`): a claim whose verdict turned on the init, or whose runs are cheap
    init_pass: bool = False


class Claim:
    """Base class; one subclass per claim, registered in CLAIMS under its id by `@claim`, which sets the id and
    the four texts below (the statement from the subclass's docstring)."""

    id: ClassVar[str] = ""
    title: ClassVar[str] = ""
    statement: ClassVar[str] = ""
    sources: ClassVar[str] = ""  # the seed articles that make the claim
    paper: ClassVar[str] = ""  # the paper and section whose setup the measurement follows
    # the init recipe of that paper's setup (`model.init`); the study's init pass re-measures under the other one
    init: ClassVar[str] = "xiong"
    # the preset whose base is the claim's setup (its papers'), where it has one: a study on another preset's base
    # refuses it; "": judged on any preset
    home: ClassVar[str] = ""
    # a loss gap's reading, for claims whose key number is "A's loss − B's": (A, " than B"), said as
    # "A ends 0.123 nats worse than B" (a positive gap is worse: lower loss is better)
    gap: ClassVar[tuple[str, str] | None] = None
    # the kind of test its verdict rests on (study/power.py: TESTS): "t" (a loss gap, a slope, a ratio over seeds),
    # "sign" (a failure split over seeds, whose exact test cannot go below ½ⁿ), "measured" (no seeds)
    test_kind: ClassVar[str] = "t"
    Knobs: ClassVar[type[Knobs]] = Knobs  # what a preset may change, with defaults (a claim's own: a subclass)

    def __init__(self, level: Level = Level()):
        """`level`: what every decision of this claim is made at, handed to each (`compare(a, b, self.level)`):
        α = 0.05 alone at a single look, unless the study judges it at a Holm step's level or a look's share."""
        self.level = level

    @classmethod
    def knobs(cls, preset) -> Knobs:
        """This claim's knobs at `preset`: its defaults, changed where the preset says (`Preset.knobs[id]`)."""
        return cls.knobs_from(preset.knobs.get(cls.id, {}))

    @classmethod
    def knobs_from(cls, values: dict[str, Any]) -> Knobs:
        """This claim's knobs with `values` changed; a name it has no knob of is an error naming the ones it has."""
        names = [f.name for f in dataclasses.fields(cls.Knobs)]
        unknown = [k for k in values if k not in names]
        if unknown:
            raise ConfigError(f"claim {cls.id} has no knob {unknown[0]!r}; its knobs: {', '.join(names)}")
        return cls.Knobs(**values)

    def runs(self, preset) -> list[Change]:
        """The runs this claim needs, each a typed change to the preset's base config (`Change(scheme="pre",
        lr=1e-3)`); the study adds the seeds."""
        return []

    def round_runs(self, preset) -> list[Change]:
        """The runs a seed round adds at its new seeds: all of `runs` unless the claim's test reads fewer (C4:
        the shallowest and deepest depths)."""
        return self.runs(preset)

    def measure(self, preset) -> dict[str, Any] | None:
        """Measurements that are not training runs (timings, constants, causality); stored once per study."""
        return None

    def measure_key(self, preset) -> str | None:
        """What `measure` measured, as a key its stored value carries (`"key"`): a study whose key differs (a
        recipe's meaning moved) measures again. None: a measurement never goes stale."""
        return None

    def followups(self, records: list[RunRecord], preset) -> list[tuple[RunRecord, Change]]:
        """Runs that start from trained runs (fine-tuning), chosen once those are done: (source record, its change
        to the source's config). The runner sets `train.init_from` to the source's directory."""
        return []

    def verdict(self, records: list[RunRecord], measurement: dict[str, Any] | None, preset) -> Verdict:
        raise NotImplementedError

    def figures(self, records: list[RunRecord], measurement: dict[str, Any] | None, preset) -> list[Figure]:
        return []

    def make(self, verdict: str | None, statistic: str, value: float | None, n_seeds: int, settings: dict[str, Any],
             summary: str, *, missing: str | None = None, parts: list["Part"] | None = None,
             interval: list[float] | None = None, test: str = "", seeds: list[int] | None = None,
             reading: str | None = None, why: str = "", evidence: SignSplit | None = None,
             **details: Any) -> Verdict:
        """`missing`: the reading when the key number could not be computed, saying why (Post-LN did not train
        at 16 layers), so a verdict beside `n/a` never seems to rest on nothing. `reading`: the key number in
        words where `self.reading(value)` cannot say it (it needs more than the value). `parts`: the sub-verdicts
        of a bundled claim; with `verdict=None` the claim's verdict is theirs combined (`combine`). `evidence`: the
        primary test's failure split, where the claim decides by one (`statistics.sign_evidence`)."""
        settings = {**settings, "paper": settings.get("paper") or self.paper} if self.paper else settings
        parts = parts or []
        bundled = verdict is None and len(parts) > 1
        if verdict is None:
            verdict = combine(parts)
        value = json_safe(value)
        finite = isinstance(value, (int, float)) and math.isfinite(value)
        reading = (reading or self.reading(value)) if finite else (missing or "")
        return Verdict(self.id, verdict, statistic, value, n_seeds, settings, json_safe(details), summary,
                       reading=reading or "", parts=[p.to_dict() for p in parts],
                       interval=json_safe(list(interval)) if interval else None, test=test,
                       seeds=sorted(set(seeds or [])), bundled=bundled, why=why, evidence=evidence)

    def judge(self, records: list[RunRecord], measurement: dict[str, Any] | None, preset) -> Verdict:
        """`verdict`, with a bundled claim's "does not hold" corrected for its parts (`corrected`)."""
        return self.corrected(self.verdict(records, measurement, preset),
                              lambda strict: strict.verdict(records, measurement, preset))

    def corrected(self, verdict: Verdict, again) -> Verdict:
        """A bundled claim (its verdict its k parts combined) holds when every part holds, each at the claim's level:
        an intersection-union test, at that level as it is. It does not hold when *some* part does not: a union of
        k decisions, so that part must not hold at the level split over the parts (Bonferroni, `Level.split`).
        `again(claim)`: the same verdict from this claim at another level. A "does not hold" that no part reaches
        at the split level is inconclusive, and the summary says so."""
        k = len(verdict.parts)
        if not verdict.bundled or verdict.verdict != FAILS:
            return verdict
        level = self.level.split(k)
        strict = again(type(self)(level))
        details = {**verdict.details, "does_not_hold_level": level.alpha}
        if not any(p["verdict"] == FAILS for p in strict.parts):
            return replace(verdict, verdict=INCONCLUSIVE, details=details, summary=verdict.summary + (
                f"; a part does not hold at α = {self.level.alpha:g} but none at {level.alpha:g}, the "
                f"level split over its {k} parts that a bundled claim's 'does not hold' needs"))
        return replace(verdict, details=details)

    def reading(self, value: float) -> str | None:
        """The key number said in the claim's direction (which side is better, by how much); None: `statistic =
        value` says it well enough."""
        if self.gap is None:
            return None
        who, than = self.gap
        return f"{who} ends {abs(value):.3f} nats {'worse' if value > 0 else 'better'}{than}"


@dataclass
class Part:
    """One sub-verdict of a bundled claim (C1: Post-LN's warmup penalty / Pre-LN's equivalence), with the number
    it rests on, that number's interval and the test that gave it."""

    name: str
    verdict: str
    statistic: str
    value: float | None
    interval: list[float] | None = None
    test: str = ""
    seeds: list[int] = field(default_factory=list)
    summary: str = ""
    # the boundaries its interval is decided against; () for the usual ones: 0, and ±LOSS_MARGIN for a loss gap in
    # nats. A band's two ends (C2's 1/√L), a ratio's 1 − SPEED_SAME (C10), F1's 4×: what more data must clear
    bounds: tuple[float, ...] = ()
    # a measurement's interval is over this many timing rounds, not over seeds (C10's norm timing): more rounds
    # would narrow it, more seeds would not. None: over its seeds
    rounds: int | None = None
    # "log": the interval is a t interval of logs, exponentiated (a ratio, a factor); it narrows on that scale
    # (`power.needed`). "": on its own scale
    scale: str = ""

    def to_dict(self) -> dict[str, Any]:
        return json_safe({**asdict(self), "seeds": sorted(set(self.seeds)), "bounds": list(self.bounds),
                          "interval": list(self.interval) if self.interval else None})


def combine(parts: list[Part]) -> str:
    """A conjunctive claim: it holds when every part holds, does not hold when any part does not (at the level split
    over the parts: `Claim.corrected`, which the study applies)."""
    verdicts = [p.verdict for p in parts]
    if not verdicts:
        return INCONCLUSIVE
    if FAILS in verdicts:
        return FAILS
    return HOLDS if all(v == HOLDS for v in verdicts) else INCONCLUSIVE
