"""The numbers a claim's decisions rest on: the error level they are made at, t intervals, exact sign tests,
Wilson intervals, rank correlation and slopes. Thresholds are module constants and are printed in the report.

A decision's level is a value, never a setting in the air: a claim is made with its `Level` (the family's α, a
look's share of it) and hands it to every decision (`decisions.py`), so the same data judged at two levels are two
calls that can be read side by side.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import Any

# nats: val-loss differences smaller than this count as "the same". Why 0.02: under 1 % of the standard preset's
# loss (≈ 2.44 nats), below what a user changing a norm would act on, and about 4× the seed-to-seed sd of its
# 4-layer Pre-LN run (0.005 nats over 5 seeds, the standard run of 2026-11-24)
LOSS_MARGIN = 0.02
ALPHA = 0.05  # the family-wise error level of a study's decisions; a claim alone at a single look decides at it
MIN_SEEDS = 2
TRAINS = 0.8  # a configuration "trains" when at least this fraction of its seeds trained (C11, C14)
# Sequential seed rounds (`Preset.seed_rounds`): a fixed schedule of looks, and the share of ALPHA each look spends.
# Bonferroni over the looks (the union bound): the chance of a false decision at any look is at most the sum of the
# looks' levels, ALPHA, however the looks are correlated. These are the shares of the claims whose tests are
# continuous (a loss gap's t interval can reach any level): 0.7 at the first of two looks, where most of them
# decide. A claim whose exact test has a floor that its first look cannot reach under Holm (5–0: 1/32, against
# 0.05/16 × 0.7) spends its α at its last look instead: its shares come from the power plan (study/power.py)
SPENDING = {1: (1.0,), 2: (0.7, 0.3), 3: (0.6, 0.25, 0.15)}


def look_alpha(look: int, looks: int) -> float:
    """The level look `look` (1-based) of a schedule of `looks` spends (SPENDING)."""
    if looks not in SPENDING:
        raise ValueError(f"no spending schedule for {looks} looks; valid: {', '.join(map(str, SPENDING))}")
    return round(ALPHA * SPENDING[looks][look - 1], 12)  # 0.035, not 0.034999999999999996


@dataclass(frozen=True)
class Level:
    """The error level a claim's decisions are made at: `family`, the family-wise level (ALPHA, or a Holm step's
    α/(m − j) when the study controls the family of its claims: study/family.py), times the share of it that
    `look` spends where the claim is on a schedule of seed rounds ((look, of how many); None: it looks once),
    divided among `parts` where one decision is a union of several (a bundled claim's "does not hold").

    `shares`: the claim's own spending over its looks, where its power plan sets one (study/power.py: a first look
    whose exact test cannot reach its level spends 0.1 of α, the last look the rest); None: SPENDING's."""

    family: float = ALPHA
    look: tuple[int, int] | None = None
    shares: tuple[float, ...] | None = None
    parts: int = 1

    def __post_init__(self):
        if self.look is not None and self.shares is None:
            look_alpha(*self.look)  # a schedule with no spending is refused here, with the valid ones
        if self.shares is not None and (self.look is None or len(self.shares) != self.look[1]
                                        or abs(sum(self.shares) - 1) > 1e-9 or min(self.shares) < 0):
            raise ValueError(f"shares {self.shares} are not one share ≥ 0 per look of {self.look}, summing to 1")

    @property
    def share(self) -> float:
        """The share of the family's level this look spends (1 at a single look)."""
        if self.look is None:
            return 1.0
        look, looks = self.look
        return (self.shares or SPENDING[looks])[look - 1]

    @property
    def alpha(self) -> float:
        """Each test's α: a sign test's level, each one-sided half of a TOST."""
        return round(self.family * self.share / self.parts, 12)

    def split(self, k: int) -> "Level":
        """This level divided among k decisions (Bonferroni)."""
        return replace(self, parts=self.parts * k)

    @property
    def two_sided(self) -> float:
        """The level of a "differs" interval (two-sided): 0.95 at a single look."""
        return 1 - self.alpha

    @property
    def tost(self) -> float:
        """The level of a TOST interval (each one-sided test at `alpha`): 0.90 at a single look."""
        return 1 - 2 * self.alpha


# the levels of a claim alone at a single look, as the report prints its thresholds. "differs": the two-sided 95 % t
# interval of the difference (paired, or Welch) excludes 0; "the same" (TOST at α = 0.05, Schuirmann 1987): the 90 %
# interval lies inside ±margin; more runs of one arm did not train: one-sided exact sign test over the discordant seeds
CONFIDENCE, EQUIVALENCE, SIGN_LEVEL = Level().two_sided, Level().tost, Level().alpha


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile. scipy.stats is imported here, not at the top: it takes 0.7 s, which every
    `normlab -h` would pay (the CLI lists the presets, whose module imports the claims)."""
    from scipy.stats import t

    return float(t.ppf(p, df))


def t_interval(values: list[float], coverage: float) -> list[float] | None:
    """The two-sided t interval of the mean of `values` that covers it with probability `coverage` (a level's
    `two_sided`, or its `tost` for an equivalence test); None below 2 values."""
    values = [v for v in values if v is not None and math.isfinite(v)]
    if len(values) < 2:
        return None
    mean, sd = statistics.fmean(values), statistics.stdev(values)
    half = t_quantile(0.5 + coverage / 2, len(values) - 1) * sd / math.sqrt(len(values))
    return [mean - half, mean + half]


def median_interval(values: list[float], coverage: float) -> list[float] | None:
    """A distribution-free interval of the median of `values` that covers it with probability at least `coverage`:
    the order statistics x₍ₖ₎ and x₍ₙ₋ₖ₊₁₎ with k the largest rank whose binomial tail P(Bin(n, ½) < k) stays
    within (1 − coverage)/2. One outlying value moves its ends by at most one rank. None: too few values for the
    coverage (n = 14 reaches 99.9 %)."""
    xs = sorted(v for v in values if v is not None and math.isfinite(v))
    n, tail = len(xs), (1 - coverage) / 2
    k = 0
    while k < n // 2 and sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n <= tail:
        k += 1  # P(Bin(n, ½) ≤ k − 1) ≤ tail: rank k is still inside
    return [xs[k - 1], xs[n - k]] if k >= 1 else None


def sign_test(k: int, n: int) -> float:
    """One-sided exact sign test: P(at least k of n discordant pairs fall one way | each way equally likely)."""
    return sum(math.comb(n, i) for i in range(k, n + 1)) / 2 ** n if n else 1.0


@dataclass(frozen=True)
class SignSplit:
    """A claim's failure split, its primary test's evidence as the study's power plan reads it (study/power.py:
    whether it leans, about how many seeds would decide it): `k` of the `n` discordant seeds fall the majority way,
    of `seeds` paired; `what` says which split it is. `open`: the split is at an open level of the verdict's scope
    (C1 at an lr), so it may lean where the verdict at the claim's own level is decided. A claim hands it to
    `Claim.make(evidence=...)`; verdicts.json keeps it as `details["evidence"]`."""

    k: int
    n: int
    seeds: int
    what: str
    open: bool = False
    test = "sign"  # class constants, not fields: what the power plan asks of any evidence
    unit = "seeds"

    @property
    def p_one_sided(self) -> float:
        return sign_test(self.k, self.n)

    @property
    def count(self) -> int:
        return self.seeds

    def leans(self) -> bool:
        """Its majority falls one way."""
        return bool(self.n) and 2 * self.k > self.n

    def to_dict(self) -> dict[str, Any]:
        return {"test": self.test, "k": self.k, "n": self.n, "seeds": self.seeds, "what": self.what,
                "p_one_sided": self.p_one_sided, **({"open": True} if self.open else {})}

    @classmethod
    def from_dict(cls, row: dict[str, Any] | None) -> "SignSplit | None":
        """A verdicts.json `details["evidence"]` back as a split (None stays None)."""
        if not row:
            return None
        return cls(row["k"], row["n"], row["seeds"], row.get("what", ""), bool(row.get("open")))


@dataclass(frozen=True)
class OpenInterval:
    """An interval still open, the evidence of a verdict without a split (study/power.py reads it): the key number's,
    or an inconclusive part's, with the boundaries it is decided against (`bounds`: () for the usual ones, 0 and
    ±LOSS_MARGIN for a loss gap in nats) and over how many of what it was built (`count` `unit`: seeds, or a
    measurement's timing rounds, which more seeds would not narrow). `interval` None: timing rounds too few for
    any interval at the level. `scale` "log": built on logs, and narrows there."""

    interval: tuple[float, float] | None
    statistic: str
    bounds: tuple[float, ...]
    unit: str
    count: int
    scale: str = ""
    test = "t"


def sign_evidence(k: int, against: int, seeds: int, what: str, open: bool = False) -> SignSplit:
    """A failure split where `k` seeds fall the way the claim says and `against` the other way, of `seeds` paired."""
    return SignSplit(max(k, against), k + against, seeds, what, open)


Evidence = SignSplit | OpenInterval


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """Wilson score interval for k successes in n trials (Wilson 1927)."""
    if n == 0:
        return None
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def mean_over_seeds(values: list[list[float | None]]) -> list[float | None]:
    """Elementwise mean of per-layer lists (None where any seed lacks the value)."""
    if not values:
        return []
    out = []
    for column in zip(*values):
        out.append(None if any(v is None for v in column) else statistics.fmean(column))
    return out


def spearman(x: list[float], y: list[float]) -> float | None:
    """Rank correlation (no ties correction needed for distinct layer indices)."""
    pairs = [(a, b) for a, b in zip(x, y) if a is not None and b is not None]
    if len(pairs) < 3:
        return None
    rx, ry = _ranks([a for a, _ in pairs]), _ranks([b for _, b in pairs])
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    den = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return num / den if den else None


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def slope(x: list[float], y: list[float]) -> float | None:
    """Least-squares slope of y on x (None below 2 points or with no spread in x)."""
    pts = [(a, b) for a, b in zip(x, y) if a is not None and b is not None and math.isfinite(b)]
    if len(pts) < 2:
        return None
    mx, my = statistics.fmean(p[0] for p in pts), statistics.fmean(p[1] for p in pts)
    den = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / den if den else None


def loglog_slope(x: list[float], y: list[float]) -> float | None:
    """Least-squares slope of log y on log x (the exponent p in y ∝ x^p)."""
    pts = [(math.log(a), math.log(b)) for a, b in zip(x, y) if a and b and a > 0 and b > 0]
    if len(pts) < 2:
        return None
    mx = statistics.fmean(p[0] for p in pts)
    my = statistics.fmean(p[1] for p in pts)
    den = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / den if den else None
