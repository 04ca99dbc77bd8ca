"""A verdict's outcome as a value: what it says, where it was shown, and why it says nothing when it does not.

A claim's rule gives one of three words at the claim's own levels (holds, does not hold, inconclusive). The study
then judges it again under every other level of the factors it measured (the init recipe, context, width; C1's lr)
and at the same family-wise level: a factor whose levels give opposite decisive verdicts makes the outcome
`depends on <factor>`; a level where it is inconclusive leaves a decisive verdict standing, but *where judged*,
never *under every level measured*, and the two are counted apart. An inconclusive verdict says which kind it is
(`WHY`). This is the lowest floor that reads verdicts: the study builds outcomes, the report and the terminal read
them, and one function (`replicated`) says what replicates, for all of them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

HOLDS, FAILS, INCONCLUSIVE = "holds", "does not hold", "inconclusive"
DEPENDS = "depends on"  # the verdict differs across the levels of a factor; never counts as holds
OUTCOMES = (HOLDS, FAILS, DEPENDS, INCONCLUSIVE)  # the four outcomes, in the order a totals line gives them

# the kinds of inconclusive, each with what would change it
EQUIVALENT = "no effect larger than the margin"  # the interval lies inside ±margin, but the claim needs a side
UNDERPOWERED = "effect seen, not past the family-wise level"  # more seeds would decide: about `needed`
TOO_FEW_TRAINED = "too few runs trained to compare"  # nothing to test: no interval, no discordant seeds
# the claim's own: the paper states its effect where this study cannot reach (nGPT's 4× at ≈ 200k steps, a gap
# finer than the lr grid's steps); more seeds would not decide it, a run at the paper's scale would
OFF_SCALE = "not at the paper's scale"
# the claim's own: its limits lie beyond the lr grid (every arm trains at the grid's top, or none at any lr of it);
# more seeds would not decide it, a wider grid would
OFF_GRID = "beyond the lr grid"
WHY = (EQUIVALENT, UNDERPOWERED, TOO_FEW_TRAINED, OFF_SCALE, OFF_GRID)

EVERY_LEVEL, WHERE_JUDGED = "under every level measured", "where judged"


def decisive(verdict: str) -> bool:
    """holds or does not hold: a rule's word that says something about the claim."""
    return verdict in (HOLDS, FAILS)


@dataclass(frozen=True)
class Outcome:
    """`verdict`: the rule's word at the claim's own levels. `depends_on`: the factors whose levels give opposite
    decisive verdicts. `open_levels`: the levels (`init gpt2`, `d 128`) where a decisive verdict was inconclusive.
    `why` and `needed`: an inconclusive verdict's kind (`WHY`) and, where more seeds would decide, about how many
    it needs in all (None: no projection). `unit`: what `needed` and `seeds` count, seeds unless the interval left
    open is a measurement's, over timing rounds."""

    verdict: str
    depends_on: tuple[str, ...] = ()
    open_levels: tuple[str, ...] = ()
    why: str = ""
    needed: int | None = None
    seeds: int | None = None  # the seeds (or `unit`s) it was judged on, for `needed`'s sentence
    unit: str = "seeds"

    def __post_init__(self):
        if self.verdict not in (HOLDS, FAILS, INCONCLUSIVE):
            raise ValueError(f"a rule's verdict is one of {HOLDS}, {FAILS}, {INCONCLUSIVE}; got {self.verdict!r}")
        if self.why and self.why not in WHY:
            raise ValueError(f"an inconclusive verdict's kind is one of {', '.join(WHY)}; got {self.why!r}")

    @property
    def kind(self) -> str:
        """One of the four OUTCOMES."""
        return DEPENDS if self.depends_on else self.verdict

    @property
    def decisive(self) -> bool:
        """The one definition of a decisive verdict, which every output counts by (the report's totals, cost.json,
        the make-run record, the README): holds, does not hold, or depends on a factor (opposite decisive verdicts
        at its levels), each decided by its tests; not inconclusive."""
        return self.kind != INCONCLUSIVE

    @property
    def complete(self) -> bool:
        """Decisive under every level measured (no factor splits it, no level left it open)."""
        return decisive(self.kind) and not self.open_levels

    @property
    def text(self) -> str:
        """`holds`, `depends on init, width`: the verdict as the table's cell names it."""
        return f"{DEPENDS} {', '.join(self.depends_on)}" if self.depends_on else self.verdict

    @property
    def total_key(self) -> str:
        """What the totals count it as: `holds` (under every level measured), `holds where judged`, `does not
        hold`, `does not hold where judged`, `depends on`, `inconclusive`."""
        if decisive(self.kind) and self.open_levels:
            return f"{self.kind} {WHERE_JUDGED}"
        return self.kind

    @property
    def scope_text(self) -> str:
        """`under every level measured`, `where judged (inconclusive under gpt2, d 128)`, or ''."""
        if not decisive(self.kind):
            return ""
        return f"{WHERE_JUDGED} (inconclusive under {', '.join(self.open_levels)})" if self.open_levels \
            else EVERY_LEVEL

    @property
    def why_text(self) -> str:
        """An inconclusive verdict's kind in words: `effect seen, not past the family-wise level at 10 seeds:
        about 14 needed`; '' for the others."""
        if self.kind != INCONCLUSIVE or not self.why:
            return ""
        if self.why != UNDERPOWERED:
            return self.why
        at = f" at {self.seeds} {self.unit}" if self.seeds else ""
        return self.why + at + (f": about {self.needed} needed" if self.needed else f": more {self.unit} would decide")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "verdict": self.verdict, "depends_on": list(self.depends_on),
                "open_levels": list(self.open_levels), "total": self.total_key, "scope": self.scope_text,
                "why": self.why, "needed": self.needed, "seeds": self.seeds, "unit": self.unit, "text": self.text,
                "why_text": self.why_text}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Outcome":
        return cls(data["verdict"], tuple(data.get("depends_on") or ()), tuple(data.get("open_levels") or ()),
                   data.get("why") or "", data.get("needed"), data.get("seeds"), data.get("unit") or "seeds")


def split_and_open(scope: dict[str, dict[str, str]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """From a verdict's scope ({factor: {level: verdict}}): the factors whose levels give opposite decisive
    verdicts, and the levels (of the factors that do not split) where it was not decisive."""
    split = tuple(f for f, by_level in scope.items() if {HOLDS, FAILS} <= set(by_level.values()))
    open_levels = tuple(level for f, by_level in scope.items() if f not in split
                        for level, v in by_level.items() if not decisive(v))
    return split, open_levels


def outcome_of(row: dict[str, Any]) -> Outcome:
    """A verdicts.json row's outcome: its typed `outcome` where it has one; a row written before outcomes were
    typed is read from its own data (its verdict at its own levels and its scope), never from its words."""
    if row.get("outcome"):
        return Outcome.from_dict(row["outcome"])
    own = row.get("primary") or row.get("verdict") or INCONCLUSIVE
    if own not in (HOLDS, FAILS, INCONCLUSIVE):  # an older row's "depends on …" with no primary: its scope says
        own = INCONCLUSIVE
    split, open_levels = split_and_open(row.get("scope") or {})
    return Outcome(own, split, open_levels if decisive(own) else ())


def outcome_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How many verdicts (verdicts.json rows) of each total: holds under every level measured and holds where
    judged counted apart, and the same for does not hold; depends on; inconclusive."""
    keys = [HOLDS, f"{HOLDS} {WHERE_JUDGED}", FAILS, f"{FAILS} {WHERE_JUDGED}", DEPENDS, INCONCLUSIVE]
    counts = dict.fromkeys(keys, 0)
    for row in rows:
        counts[outcome_of(row).total_key] += 1
    return counts


def totals_text(counts: dict[str, int]) -> str:
    """`4 holds (1 of them only where judged), 4 does not hold, 1 depends on, 6 inconclusive`: the totals line, each
    word counting every verdict it names, those decisive only where judged said beside it, never subtracted (a
    line that read "0 holds (+1 where judged)" said nothing holds)."""
    parts = []
    for word in OUTCOMES:
        judged = counts.get(f"{word} {WHERE_JUDGED}", 0)
        n = counts.get(word, 0) + judged
        parts.append(f"{n} {word}" + (f" ({judged} of them only {WHERE_JUDGED})" if judged else ""))
    return ", ".join(parts)


def replicated(row: dict[str, Any], design: dict[str, Any] | None = None) -> bool:
    """The one definition of a replicated verdict: decisive under every level measured, and the same outcome on
    the design seeds (`design`: the design seeds' row, or the row's own `design` record)."""
    seen = design if design is not None else (row.get("design") or {})
    if not seen:
        return False
    mine = outcome_of(row)
    theirs = outcome_of(seen).text if seen.get("outcome") else seen.get("verdict")  # a record from before outcomes
    return mine.complete and theirs == mine.text


@dataclass
class Totals:
    """A study's totals in one place: the counts and how many replicated (`replicated`)."""

    counts: dict[str, int] = field(default_factory=dict)
    replicated: int = 0
    decisive: int = 0  # `Outcome.decisive`: holds, does not hold or depends on
    claims: int = 0

    @classmethod
    def of(cls, rows: list[dict[str, Any]]) -> "Totals":
        return cls(outcome_counts(rows), sum(replicated(r) for r in rows),
                   sum(outcome_of(r).decisive for r in rows), len(rows))

    def text(self) -> str:
        return (totals_text(self.counts) + f"; {self.decisive} of {self.claims} decisive"
                + (f"; {self.replicated} replicated on the design seeds (decisive under every level measured and "
                   "the same there)" if self.replicated else ""))
