"""The study's power plan: for each claim, the test its verdict rests on, the smallest p that test can reach at its
seeds, and the level it must beat (Holm's step, the look's share); which claims get seed rounds and how each spends
α across its looks; and, once judged, why an inconclusive verdict says nothing and about how many seeds would decide.

Why this exists: an exact sign test over n seeds cannot go below ½ⁿ (5 of 5 failures: 1/32 = 0.031), while Holm
over 16 claims asks a claim at its first step for α/16 = 0.0031. A claim whose evidence is a failure split (C1's
failures, C4, C8, C11, C14) could then never decide at 5 seeds however clear its data. The plan gives such claims
the seeds their test needs (the preset's cap) and spends almost all of their α at the look that can use it.

The spending is fixed from the plan before any data: a claim whose test has a floor (`Claim.test_kind = "sign"`)
that its first look's share cannot reach at the strictest Holm step spends `FLOOR_FIRST` of α there (kept for the
loss tests it also makes) and the rest at its last look; every other claim on the schedule spends SPENDING's
(0.7, 0.3). Bonferroni over the looks (the union bound) holds the family-wise level whatever the shares.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from normlab.report.outcome import EQUIVALENT, INCONCLUSIVE, OFF_GRID, OFF_SCALE, TOO_FEW_TRAINED, UNDERPOWERED
from normlab.study.claims import CLAIMS, Verdict
from normlab.study.claims.quality import WARMUP_ROUNDS
from normlab.study.claims.statistics import (ALPHA, LOSS_MARGIN, MIN_SEEDS, SPENDING, Evidence, OpenInterval,
                                             SignSplit, sign_test)

# what a claim's primary test is, and the smallest p it can reach at n seeds (`floor`)
TESTS = {
    "t": "paired t / TOST over seeds (a continuous statistic: no floor)",
    "sign": "exact sign test over the seeds where one arm alone failed, one-sided (floor ½ⁿ)",
    "measured": "an exact measurement, not sampled over seeds (no floor)",
}
FLOOR_FIRST = 0.1  # the share of α a floored test's first look spends (its loss tests may still decide there)
SCHEME = (f"spending: Bonferroni over the looks; a claim whose exact test cannot reach its first look's level at "
          f"Holm's strictest step spends {FLOOR_FIRST:g} of α there and {1 - FLOOR_FIRST:g} at its last look, every "
          f"other claim on the schedule {' and '.join(f'{x:g}' for x in SPENDING[2])} (of two looks); a seed round "
          "goes to a claim whose evidence leans one way (a failure split's majority, an interval straddling its "
          "boundary), up to the preset's cap")
MAX_NEEDED = 200  # "about k seeds needed" is projected up to this many; beyond it: more than that


def floor(test: str, n: int) -> float:
    """The smallest one-sided p `test` can reach at n seeds."""
    if test not in TESTS:
        raise ValueError(f"unknown test {test!r}; valid: {', '.join(TESTS)}")
    return 0.5 ** n if test == "sign" else 0.0


def shares(test: str, schedule: list[int], m: int, alpha: float = ALPHA) -> tuple[float, ...] | None:
    """How a claim with this test spends α over the looks of `schedule` (seeds at each look) in a family of m
    claims; None: one look. A floored test whose first look cannot reach its level at Holm's strictest step
    (α/m times SPENDING's first share) spends FLOOR_FIRST there and the rest at the last look."""
    if len(schedule) < 2:
        return None
    default = SPENDING[len(schedule)]
    if floor(test, schedule[0]) >= alpha / m * default[0]:
        return (FLOOR_FIRST,) + (0.0,) * (len(schedule) - 2) + (1 - FLOOR_FIRST,)
    return default


@dataclass(frozen=True)
class PlanRow:
    """One claim's line of the plan: its test, seeds at each look, each look's share of α, the floor of its test
    there, and the level it must beat there at Holm's strictest step (α/m) and at its loosest (α)."""

    claim: str
    test: str
    seeds: tuple[int, ...]
    shares: tuple[float, ...]
    floors: tuple[float, ...]
    strictest: tuple[float, ...]
    loosest: tuple[float, ...]
    # what the design seeds say of the seeds it needs (`sized`): its test's effect and spread there against its
    # boundaries (the margin, 1, a band), as a trial sizes an equivalence test; "" without a design record
    design: str = ""

    @property
    def reachable(self) -> str:
        """Whether its last look's floor is below its level: `yes` (at every Holm step), `from step k` or `no`."""
        f, low, high = self.floors[-1], self.strictest[-1], self.loosest[-1]
        return "yes" if f < low else "no" if f >= high else "at later Holm steps"

    def text(self) -> str:
        """`sign test; seeds 5, 10; α shares 0.1, 0.9; floor 0.031, 0.00098; level 0.00031, 0.0028; reachable: yes`."""
        def nums(xs):
            return ", ".join(f"{x:.2g}" for x in xs)
        return (f"{self.test} test; seeds {', '.join(map(str, self.seeds))}; α shares "
                f"{', '.join(f'{x:g}' for x in self.shares)}; floor of p {nums(self.floors)}; level at Holm's "
                f"strictest step {nums(self.strictest)}; reachable at the last look: {self.reachable}"
                + (f"; design seeds: {self.design}" if self.design else ""))

    def to_dict(self) -> dict[str, Any]:
        return {"claim": self.claim, "test": self.test, "seeds": list(self.seeds), "shares": list(self.shares),
                "floors": list(self.floors), "level_strictest": list(self.strictest),
                "level_loosest": list(self.loosest), "reachable": self.reachable, "design": self.design}


def plan(spec, design: dict[str, Any] | None) -> list[PlanRow]:
    """Every claim's line of the power plan, before anything trains (`design`: the preset's design-seed verdicts,
    `design.design_record`, that size each claim's seeds)."""
    m = len(spec.claims)
    rows = []
    for cid in spec.claims:
        test = CLAIMS.get(cid).test_kind
        on_schedule = CLAIMS.get(cid).knobs(spec.preset).rounds and len(spec.preset.seed_rounds) > 1
        seeds = tuple(spec.preset.seed_rounds) if on_schedule else (len(spec.preset.seeds),)
        s = shares(test, list(seeds), m) or (1.0,)
        rows.append(PlanRow(cid, test, seeds, tuple(s), tuple(floor(test, n) for n in seeds),
                            tuple(ALPHA / m * x for x in s), tuple(ALPHA * x for x in s),
                            sized(design, cid, seeds[-1])))
    return rows


def sized(design: dict[str, Any] | None, claim_id: str, cap: int) -> str:
    """What the preset's design-seed study says of the seeds `claim_id` needs, against the cap of its schedule:
    decided there at how many seeds; or its effect seen but not past its level, with about how many seeds its
    interval (narrowing as 1/√n on the scale it is built on, `needed`) would settle it, and whether the cap does;
    or why more seeds would not. "" without a design record for it."""
    row = ((design or {}).get("verdicts") or {}).get(claim_id)
    if not row:
        return ""
    out = row.get("outcome") or {}
    seeds = out.get("seeds")
    if out.get("kind", out.get("verdict")) != INCONCLUSIVE:
        word = out.get("text", out.get("verdict"))
        return f"{word} at {seeds} {out.get('unit') or 'seeds'}" if seeds and seeds > 1 else f"{word} (measured)"
    if out.get("why") != UNDERPOWERED:
        return f"inconclusive ({out.get('why') or 'no kind recorded'}): more seeds would not settle it"
    needed, unit = out.get("needed"), out.get("unit") or "seeds"
    if unit != "seeds":
        return (f"about {needed} {unit} needed" if needed else f"more {unit} needed") + " (a measurement's, not seeds)"
    if needed is None:  # past MAX_NEEDED, or nothing to project it from
        return (f"effect seen at {seeds} seeds, no projection within {MAX_NEEDED}: the cap ({cap}) may leave it "
                "unsettled")
    return (f"about {needed} seeds needed" + (f", within the cap ({cap})" if needed <= cap else
                                              f": the cap ({cap}) leaves it unsettled; about {needed} would settle it"))


def plan_text(rows: list[PlanRow]) -> list[str]:
    """The plan as Markdown table lines (the report's method section, `normlab study --plan`)."""
    out = ["| claim | primary test | seeds (looks) | share of α per look | floor of p at each look | "
           "level at Holm's strictest step | reachable at the last look | sized on the design seeds |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r.claim} | {r.test} | {', '.join(map(str, r.seeds))} | "
                   f"{', '.join(f'{x:g}' for x in r.shares)} | {', '.join(f'{x:.2g}' for x in r.floors)} | "
                   f"{', '.join(f'{x:.2g}' for x in r.strictest)} | {r.reachable} | {r.design or '—'} |")
    return out


# -- evidence, leaning and "about k needed" ------------------------------------------------------------------------
def evidence(verdict: Verdict) -> Evidence | None:
    """The primary test's evidence: the failure split the verdict recorded (`Verdict.evidence`), or else the
    interval still open (`OpenInterval`): an inconclusive part's where the verdict has parts (one over seeds before
    a measurement's over timing rounds), the verdict's own otherwise; with the boundaries it is decided against
    (`Part.bounds`, `details["bounds"]`) and what more of would narrow it (seeds, or a measurement's timing
    rounds)."""
    found = verdict.evidence
    if found and found.n:
        return found
    details = verdict.details or {}
    open_parts = sorted((p for p in verdict.parts if p["verdict"] == INCONCLUSIVE and _finite(p.get("interval"))),
                        key=lambda p: bool(p.get("rounds")))
    unmeasured = [p for p in verdict.parts
                  if p["verdict"] == INCONCLUSIVE and p.get("rounds") and not p.get("interval")]
    if not open_parts and unmeasured:  # a timing whose rounds were too few for any interval at its level
        p = unmeasured[0]
        return OpenInterval(None, p.get("statistic") or "", tuple(p.get("bounds") or ()), "timing rounds",
                            p["rounds"])
    source = open_parts[0] if open_parts else ({"interval": verdict.interval, "statistic": verdict.statistic,
                                                "bounds": details.get("bounds")} if not verdict.parts else None)
    if source and _finite(source.get("interval")):
        rounds = source.get("rounds")
        lo, hi = source["interval"]
        return OpenInterval((lo, hi), source.get("statistic") or "", tuple(source.get("bounds") or ()),
                            "timing rounds" if rounds else "seeds", rounds or len(verdict.seeds) or verdict.n_seeds,
                            source.get("scale") or ("" if verdict.parts else details.get("scale", "")))
    return found  # a split with no discordant seed, or None: nothing to narrow


def _finite(interval) -> bool:
    return bool(interval) and all(isinstance(x, (int, float)) and math.isfinite(x) for x in interval)


def leans(verdict: Verdict) -> bool:
    """Could more seeds decide it? A failure split whose majority falls one way, where the verdict is inconclusive
    or the split is at an open level of its scope (C1 at an lr); else, for an inconclusive verdict, an interval
    (of the verdict or an open part) that straddles its boundary."""
    if verdict.why in (OFF_SCALE, OFF_GRID):  # the claim said more seeds would not decide it
        return False
    e = evidence(verdict)
    if e and e.unit != "seeds":  # a measurement's timing rounds: a seed round adds none
        return False
    if isinstance(e, SignSplit) and e.n and (verdict.verdict == INCONCLUSIVE or e.open):
        return e.leans()
    if verdict.verdict != INCONCLUSIVE:
        return False
    open_parts = [p for p in verdict.parts if p["verdict"] == INCONCLUSIVE]
    return any(p.get("interval") for p in open_parts) if open_parts else bool(verdict.interval)


def needed(e: Evidence, alpha: float) -> int | None:
    """About how many seeds in all would bring the evidence past `alpha`, if added seeds fall as these did: for a
    failure split, the same share of discordant seeds and of them the same share one way; for an interval, its
    half-width shrinking as 1/√n until it clears every boundary it straddles (the evidence's `bounds`, else 0 and
    ±margin for a loss gap in nats). For a measurement over timing rounds, the same in rounds. None: nothing to
    project."""
    seeds = e.count or 0
    if seeds < 1:
        return None
    if isinstance(e, OpenInterval) and e.interval is None:  # timing rounds too few for the median's interval to
        # exist: the order statistics cover the median at 1 − α from 2·½ⁿ ≤ α on (`statistics.median_interval`),
        # and the first round is a warm-up the rule discards
        return math.ceil(math.log2(2 / alpha)) + WARMUP_ROUNDS
    if isinstance(e, SignSplit):
        if not e.leans():
            return None
        for total in range(seeds + 1, MAX_NEEDED + 1):  # at `seeds` it did not pass: it is inconclusive
            d = round(e.n * total / seeds)
            if sign_test(round(e.k * total / seeds), d) < alpha:
                return total
        return None
    lo, hi = e.interval
    bounds = list(e.bounds)
    if e.scale == "log":  # built on logs: it narrows there, symmetric about the log of its centre
        if lo <= 0 or any(b <= 0 for b in bounds):
            return None
        lo, hi, bounds = math.log(lo), math.log(hi), [math.log(b) for b in bounds] or [0.0]
    centre, half = (lo + hi) / 2, (hi - lo) / 2
    if not bounds and "nats" in e.statistic:
        # a loss gap decided as `decisions.compare` decides it: beyond the margin, by excluding 0; within it, by
        # lying inside ±margin. The distance that decides is the one on the side its centre lies
        target = abs(centre) if abs(centre) > LOSS_MARGIN else LOSS_MARGIN - abs(centre)
    else:  # the boundaries the interval straddles (its own, else 0): past each
        inside = [abs(centre - b) for b in bounds or [0.0] if lo < b < hi]
        target = min(inside) if inside else 0.0
    if target <= 0 or half <= target:
        return None
    total = math.ceil(seeds * (half / target) ** 2 - 1e-9)  # 4.0000000001 seeds are 4
    return max(total, seeds + 1) if total <= MAX_NEEDED else None


def explain(verdict: Verdict, alpha: float) -> Verdict:
    """The verdict with an inconclusive verdict's kind (`why`) and, where more seeds would decide it, about how
    many (`needed`) at `alpha`, the level of its last look. Too few trained: nothing to test (no interval, no
    discordant seeds). No effect larger than the margin: a loss gap whose interval lies inside ±margin, or a
    failure split with no discordant seed among ≥ MIN_SEEDS. Otherwise an effect is seen but not past the level."""
    if verdict.verdict != INCONCLUSIVE or verdict.why:  # a claim that said its own kind (OFF_SCALE) keeps it
        return verdict
    e = evidence(verdict)
    if e is None:
        return dataclasses.replace(verdict, why=TOO_FEW_TRAINED)
    if isinstance(e, SignSplit) and not e.n:
        return dataclasses.replace(verdict, why=EQUIVALENT if e.seeds >= MIN_SEEDS else TOO_FEW_TRAINED)
    if isinstance(e, OpenInterval) and e.interval and "nats" in e.statistic and -LOSS_MARGIN < e.interval[0] \
            and e.interval[1] < LOSS_MARGIN:
        return dataclasses.replace(verdict, why=EQUIVALENT)
    measured = {"unit": e.unit, "unit_count": e.count} if e.unit != "seeds" else {}
    return dataclasses.replace(verdict, why=UNDERPOWERED, needed=needed(e, alpha), **measured)


def last_alpha(verdict: Verdict) -> float:
    """The level of the verdict's last look at the Holm step it was judged at (its `family` and `look`)."""
    family = (verdict.family or {}).get("level", ALPHA)
    look = verdict.look or {}
    share = look.get("shares", [1.0])[-1] if look else 1.0
    return family * share

