"""What a claim is in code: the runs it needs, how its verdict is computed, and its figures.

A verdict is `holds`, `does not hold` or `inconclusive` (too few seeds, too much
spread, too small a budget), always with the statistic, its value, the number of
seeds and the settings. Thresholds are module constants and are printed in the report.
"""
from __future__ import annotations

import contextvars
import math
import statistics
import sys
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Iterable


from normlab.jsonsafe import json_safe
from normlab.registry import Registry
from normlab.report.figure import Figure, Series  # noqa: F401 (the claims draw with these, from here)
from normlab.report.format import DEPENDS, OUTCOMES, outcome_of  # noqa: F401 (the four outcomes, from here too)
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
        cls.id, cls.title, cls.sources, cls.paper = cid, title, sources, paper
        cls.statement = " ".join((doc or "").split())
        return CLAIMS.register(cid)(cls)
    return add


HOLDS, FAILS, INCONCLUSIVE = "holds", "does not hold", "inconclusive"
# the fourth outcome, DEPENDS: the verdict differs across the levels of a nuisance factor the study varied (init
# recipe, context, width), e.g. "depends on init"; it never counts as `holds` (report/format.py: `outcome_of`)


def decisive(verdict: str) -> bool:
    """holds or does not hold: a verdict that says something about the claim (not `depends on`, not inconclusive)."""
    return verdict in (HOLDS, FAILS)
# nats: val-loss differences smaller than this count as "the same". Why 0.02: under 1 % of the standard preset's
# loss (≈ 2.44 nats), below what a user changing a norm would act on, and about 4× the seed-to-seed sd of its
# 4-layer Pre-LN run (0.005 nats over 5 seeds, the standard run of 2026-11-24)
LOSS_MARGIN = 0.02
ALPHA = 0.05  # the error level of every decision, at a study that looks once
CONFIDENCE = 1 - ALPHA  # "differs": the two-sided 95 % t interval of the difference (paired, or Welch) excludes 0
EQUIVALENCE = 1 - 2 * ALPHA  # "the same" (TOST at α = 0.05, Schuirmann 1987): the 90 % interval lies inside ±margin
SIGN_LEVEL = ALPHA  # more runs of one arm did not train: one-sided exact sign test over the discordant seeds
# Sequential seed rounds (`Preset.seed_rounds`): a fixed schedule of looks, and the share of ALPHA each look spends.
# Bonferroni over the looks (the union bound): the chance of a false decision at any look is at most the sum of the
# looks' levels, ALPHA, however the looks are correlated. Why 0.7 at the first of two: it keeps the 5-seed 5–0
# sign test (p = 1/32 = 0.031 < 0.035) decisive at the first look; the second look, at 10 seeds, has 0.015
SPENDING = {1: (1.0,), 2: (0.7, 0.3), 3: (0.6, 0.25, 0.15)}
# the family-wise level a claim's decisions are made at before its look's share (`at_level`): ALPHA, or a Holm
# step's α/(m − j) when the study controls the family of its claims' primary decisions (study/family.py)
_LEVEL: contextvars.ContextVar[float] = contextvars.ContextVar("level", default=ALPHA)
_ALPHA: contextvars.ContextVar[float | None] = contextvars.ContextVar("alpha", default=None)
MIN_SEEDS = 2
TRAINS = 0.8  # a configuration "trains" when at least this fraction of its seeds trained (C11, C14)


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile. scipy.stats is imported here, not at the top: it takes 0.7 s, which every
    `normlab -h` would pay (the CLI lists the presets, whose module imports the claims)."""
    from scipy.stats import t

    return float(t.ppf(p, df))


def alpha() -> float:
    """The error level of the decisions being made now: the family level (`at_level`: ALPHA, or a Holm step's
    share of it), times a look's share of it where the claim is on a schedule of looks (`at_look`)."""
    share = _ALPHA.get()
    return _LEVEL.get() if share is None else round(_LEVEL.get() * share, 12)


def confidence() -> float:
    """The level of a "differs" interval now (two-sided): 0.95 at a single look."""
    return 1 - alpha()


def equivalence() -> float:
    """The level of a TOST interval now (each one-sided test at `alpha()`): 0.90 at a single look."""
    return 1 - 2 * alpha()


def pct(level: float) -> str:
    """`95 %`, `96.5 %`: an interval's level in words."""
    return f"{100 * level:.4g} %"


def look_alpha(look: int, looks: int) -> float:
    """The level look `look` (1-based) of a schedule of `looks` spends (SPENDING)."""
    if looks not in SPENDING:
        raise ValueError(f"no spending schedule for {looks} looks; valid: {', '.join(map(str, SPENDING))}")
    return round(ALPHA * SPENDING[looks][look - 1], 12)  # 0.035, not 0.034999999999999996


@contextmanager
def at_look(look: int, looks: int):
    """Decisions inside are made at look `look` of `looks`: every interval, TOST and sign test at its share of
    the level now (ALPHA, or the Holm step's level inside `at_level`)."""
    look_alpha(look, looks)  # a schedule with no spending is refused here, with the valid ones
    token = _ALPHA.set(SPENDING[looks][look - 1])
    try:
        yield
    finally:
        _ALPHA.reset(token)


@contextmanager
def at_level(level: float):
    """Decisions inside are made at the family level `level` instead of ALPHA (a Holm step), before any look's
    share: every interval, TOST and sign test of the claims judged inside."""
    token = _LEVEL.set(level)
    try:
        yield
    finally:
        _LEVEL.reset(token)


@dataclass
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
    # verdict `depends on <factor>` (runner.scope_verdict)
    scope: dict[str, dict[str, str]] = field(default_factory=dict)
    primary: str = ""  # the verdict at the claim's own levels, before `scope` made it `depends on …` ("": no scope)
    # the family-wise control of the study's primary decisions (study/family.py): {"level": the α this verdict was
    # decided at, "step": its Holm step, "m": the family's size, "alone": the verdict at α = 0.05 alone}
    family: dict[str, Any] = field(default_factory=dict)
    # the same claim on the design seeds (study/design.py): {"verdict", "reading", "seeds", "replicated"}; empty
    # where no design record exists for the preset
    design: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    # a loss gap's reading, for claims whose key number is "A's loss − B's": (A, " than B"), said as
    # "A ends 0.123 nats worse than B" (a positive gap is worse: lower loss is better)
    gap: ClassVar[tuple[str, str] | None] = None

    def runs(self, preset) -> list[dict[str, Any]]:
        """Config overrides (dotted keys) this claim needs, one dict per run; the study adds the seeds."""
        return []

    def measure(self, preset) -> dict[str, Any] | None:
        """Measurements that are not training runs (timings, constants, causality); stored once per study."""
        return None

    def followups(self, records: list[RunRecord], preset) -> list[tuple[RunRecord, dict[str, Any]]]:
        """Runs that start from trained runs (fine-tuning), chosen once those are done: (source record,
        overrides on the source's config). The runner sets `train.init_from` to the source's directory."""
        return []

    def verdict(self, records: list[RunRecord], measurement: dict[str, Any] | None, preset) -> Verdict:
        raise NotImplementedError

    def figures(self, records: list[RunRecord], measurement: dict[str, Any] | None, preset) -> list[Figure]:
        return []

    def make(self, verdict: str | None, statistic: str, value: float | None, n_seeds: int, settings: dict[str, Any],
             summary: str, *, missing: str | None = None, parts: list["Part"] | None = None,
             interval: list[float] | None = None, test: str = "", seeds: list[int] | None = None,
             reading: str | None = None, **details: Any) -> Verdict:
        """`missing`: the reading when the key number could not be computed, saying why (Post-LN did not train
        at 16 layers), so a verdict beside `n/a` never seems to rest on nothing. `reading`: the key number in
        words where `self.reading(value)` cannot say it (it needs more than the value). `parts`: the sub-verdicts
        of a bundled claim; with `verdict=None` the claim's verdict is theirs combined (`combine`)."""
        settings = {**settings, "paper": settings.get("paper") or self.paper} if self.paper else settings
        parts = parts or []
        if verdict is None:
            verdict = combine(parts)
        value = json_safe(value)
        finite = isinstance(value, (int, float)) and math.isfinite(value)
        reading = (reading or self.reading(value)) if finite else (missing or "")
        return Verdict(self.id, verdict, statistic, value, n_seeds, settings, json_safe(details), summary,
                       reading=reading or "", parts=[p.to_dict() for p in parts],
                       interval=json_safe(list(interval)) if interval else None, test=test,
                       seeds=sorted(set(seeds or [])))

    def reading(self, value: float) -> str | None:
        """The key number said in the claim's direction (which side is better, by how much); None: `statistic =
        value` says it well enough."""
        if self.gap is None:
            return None
        who, than = self.gap
        return f"{who} ends {abs(value):.3f} nats {'worse' if value > 0 else 'better'}{than}"


# -- statistics shared by the claims ------------------------------------------------------
@dataclass
class Group:
    """Final val losses of one configuration over seeds, of the runs that trained; the runs that diverged or
    failed to train (never left the unigram plateau) are counted apart, as a rate, never inside the mean."""

    losses: list[float]
    n_runs: int
    n_diverged: int
    n_failed_to_train: int = 0
    where: dict[str, Any] = field(default_factory=dict)  # the configuration, as `group` selected it
    seeds: list[int] = field(default_factory=list)  # the seed of each loss in `losses` (empty: not paired)
    outcomes: dict[int, bool] = field(default_factory=dict)  # seed -> trained, over all its runs
    # runs `train.plateau_stop` stopped on the plateau before their budget: censored, not failures (whether they
    # would have trained is unknown), so they are in none of the counts above and none of the pairs
    n_censored: int = 0

    @property
    def by_seed(self) -> dict[int, float]:
        """{seed: final val loss} of the runs that trained (empty where the group carries no seeds)."""
        return dict(zip(self.seeds, self.losses)) if len(self.seeds) == len(self.losses) else {}

    @property
    def n_failed(self) -> int:
        """Runs that did not train: diverged or failed to train."""
        return self.n_diverged + self.n_failed_to_train

    @property
    def failure_rate(self) -> float | None:
        return self.n_failed / self.n_runs if self.n_runs else None

    @property
    def failure_interval(self) -> tuple[float, float] | None:
        """95 % Wilson score interval of the failure rate (meaningful at any n, including 0 or n failures)."""
        return wilson_interval(self.n_failed, self.n_runs)

    @property
    def two_mode(self) -> bool:
        """Some seeds trained and some did not: a mean over the ones that trained describes half the story."""
        return 0 < self.n_failed < self.n_runs

    @property
    def n(self) -> int:
        return len(self.losses)

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.losses) if self.losses else None

    @property
    def sd(self) -> float | None:
        return statistics.stdev(self.losses) if len(self.losses) >= 2 else None

    @property
    def mean_interval(self) -> list[float] | None:
        """95 % t interval of the mean val loss of the runs that trained (None below 2 of them)."""
        if self.n < 2:
            return None
        half = t_quantile(0.5 + CONFIDENCE / 2, self.n - 1) * self.sd / math.sqrt(self.n)
        return [self.mean - half, self.mean + half]

    @property
    def divergence_rate(self) -> float | None:
        return self.n_diverged / self.n_runs if self.n_runs else None


def select(records: Iterable[RunRecord], strict: bool = True, **where: Any) -> list[RunRecord]:
    """Records with these config values (and, strict, the base config everywhere else)."""
    return [r for r in records if r.matches(strict, **where)]


def from_runs(records: Iterable[RunRecord], overrides: list[dict[str, Any]]) -> list[RunRecord]:
    """Records of exactly these runs (a claim's `runs()` overrides, any seed)."""
    wheres = [{k.replace(".", "__"): v for k, v in o.items()} for o in overrides]
    return [r for r in records if any(r.matches(**w) for w in wheres)]


def group(records: Iterable[RunRecord], strict: bool = True, **where: Any) -> Group:
    """The runs of one configuration; a run stopped on the plateau before its budget is censored: counted apart
    (`n_censored`), neither a failure nor a loss."""
    selected = select(records, strict, **where)
    chosen = [r for r in selected if not r.censored]
    trained = [r for r in chosen if r.status == "completed" and r.val_loss is not None and math.isfinite(r.val_loss)]
    ids = {r.id for r in trained}
    return Group([r.val_loss for r in trained], len(chosen), sum(r.diverged for r in chosen),
                 sum(r.failed_to_train for r in chosen), dict(where), seeds=[r.seed for r in trained],
                 outcomes={r.seed: r.id in ids for r in chosen if r.id in ids or r.did_not_train},
                 n_censored=len(selected) - len(chosen))


# how a configuration's settings read: the scheme and norm by name, the rest as `L 4`, `lr 0.01`, `warmup 0`
SETTING_NAMES = {"model__scheme": "", "model__norm": "", "model__n_layer": "L", "model__d_model": "d",
                 "train__lr": "lr", "train__warmup_steps": "warmup", "train__steps": "steps"}


def setting_text(where: dict[str, Any]) -> str:
    """`post · lr 0.01 · warmup 0 · L 4`: a group's configuration as a reader names it."""
    known = [k for k in SETTING_NAMES if k in where]
    parts = []
    for key in known + sorted(k for k in where if k not in SETTING_NAMES):
        value = where[key]
        text = f"{value:g}".replace("e-0", "e-").replace("e+0", "e") if isinstance(value, float) else str(value)
        name = SETTING_NAMES.get(key, key.split("__")[-1].replace("_", " "))
        parts.append(f"{name} {text}" if name else text)
    return " · ".join(parts)


def failures(g: Group) -> str:
    """`0/2 did not train`, or `1 diverged + 1 failed to train of 2`, and the runs censored by the plateau stop."""
    censored = f"; {g.n_censored} stopped on the plateau, censored" if g.n_censored else ""
    if not g.n_failed:
        return f"0/{g.n_runs} did not train{censored}"
    parts = [f"{n} {what}" for n, what in ((g.n_diverged, "diverged"), (g.n_failed_to_train, "failed to train")) if n]
    return f"{' + '.join(parts)} of {g.n_runs}{censored}"


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """Wilson score interval for k successes in n trials (Wilson 1927)."""
    if n == 0:
        return None
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


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

    def to_dict(self) -> dict[str, Any]:
        return json_safe({**asdict(self), "seeds": sorted(set(self.seeds)),
                          "interval": list(self.interval) if self.interval else None})


def combine(parts: list[Part]) -> str:
    """A conjunctive claim: it holds when every part holds, does not hold when any part does not."""
    verdicts = [p.verdict for p in parts]
    if not verdicts:
        return INCONCLUSIVE
    if FAILS in verdicts:
        return FAILS
    return HOLDS if all(v == HOLDS for v in verdicts) else INCONCLUSIVE


def t_interval(values: list[float], level: float | None = None) -> list[float] | None:
    """The two-sided `level` t interval of the mean of `values` (None below 2 values); `level` None: the level of
    a decision now (`confidence()`)."""
    level = confidence() if level is None else level
    values = [v for v in values if v is not None and math.isfinite(v)]
    if len(values) < 2:
        return None
    mean, sd = statistics.fmean(values), statistics.stdev(values)
    half = t_quantile(0.5 + level / 2, len(values) - 1) * sd / math.sqrt(len(values))
    return [mean - half, mean + half]


def band(interval: list[float] | None, low: float, high: float) -> str:
    """holds when the interval lies inside (low, high), does not hold when it lies wholly outside, else
    inconclusive (an equivalence test of a number against a range the claim names)."""
    if interval is None:
        return INCONCLUSIVE
    if low < interval[0] and interval[1] < high:
        return HOLDS
    if interval[1] <= low or interval[0] >= high:
        return FAILS
    return INCONCLUSIVE


def sign(interval: list[float] | None, claimed: int) -> str:
    """holds when the interval excludes 0 on the claimed side (+1: above, −1: below), does not hold when it
    excludes 0 on the other side, else inconclusive."""
    if interval is None:
        return INCONCLUSIVE
    lo, hi = (interval[0], interval[1]) if claimed > 0 else (-interval[1], -interval[0])
    return HOLDS if lo > 0 else FAILS if hi < 0 else INCONCLUSIVE


def sign_test(k: int, n: int) -> float:
    """One-sided exact sign test: P(at least k of n discordant pairs fall one way | each way equally likely)."""
    return sum(math.comb(n, i) for i in range(k, n + 1)) / 2 ** n if n else 1.0


def fails_more(a: Group, b: Group) -> dict[str, Any]:
    """Does arm a fail to train more often than arm b? Paired by seed where both have seeds: the seeds where
    exactly one arm did not train are the evidence (McNemar's exact test, one-sided); unpaired arms fall back to
    comparing counts. `more`: significant at the level of a decision now (`alpha()`: SIGN_LEVEL at one look)."""
    if a.outcomes and b.outcomes:
        common = sorted(set(a.outcomes) & set(b.outcomes))
        only_a = sum(1 for s in common if not a.outcomes[s] and b.outcomes[s])
        only_b = sum(1 for s in common if a.outcomes[s] and not b.outcomes[s])
        p = sign_test(only_a, only_a + only_b)
        return {"more": only_a > only_b and p < alpha(), "fewer": only_b > only_a and
                sign_test(only_b, only_a + only_b) < alpha(), "only_a_failed": only_a, "only_b_failed": only_b,
                "p_one_sided": p, "test": f"exact sign test over the seeds where one arm alone did not train "
                                          f"({only_a + only_b} of {len(common)}), one-sided", "seeds": common}
    return {"more": a.n_failed > b.n_failed, "fewer": a.n_failed < b.n_failed, "only_a_failed": a.n_failed,
            "only_b_failed": b.n_failed, "p_one_sided": None, "test": "counts (runs not paired by seed)",
            "seeds": []}


COMPARISON_WORDS = {"same": "the same within the margin (TOST)", "unclear": "unclear: its interval spans the margin",
                    "too-few-seeds": "too few runs trained to compare",
                    "not worse": "not worse by more than the margin (one-sided, {tost} interval)"}


def said(comparison: str) -> str:
    """A `compare` outcome in words for a summary: `too-few-seeds` reads "too few runs trained to compare"."""
    return COMPARISON_WORDS.get(comparison, comparison).format(tost=pct(equivalence()))


def difference(a: Group, b: Group) -> dict[str, Any] | None:
    """a's mean val loss − b's, with its 95 % and 90 % t intervals. Paired by seed (a paired t over the seeds
    where both arms trained) when both groups carry seeds and share at least MIN_SEEDS of them: runs that share a
    seed share their init and their data order, so the seed-to-seed spread cancels. Otherwise Welch's t.
    None: too few runs trained to compare."""
    pa, pb = a.by_seed, b.by_seed
    common = sorted(set(pa) & set(pb))
    if len(common) >= MIN_SEEDS:
        diffs = [pa[s] - pb[s] for s in common]
        n = len(diffs)
        diff, se = statistics.fmean(diffs), statistics.stdev(diffs) / math.sqrt(n)
        df, test, seeds = n - 1, f"paired t over {n} seeds", common
        mean_a, mean_b = statistics.fmean(pa[s] for s in common), statistics.fmean(pb[s] for s in common)
    elif a.n < MIN_SEEDS or b.n < MIN_SEEDS:
        return None
    else:
        diff = a.mean - b.mean
        va, vb = a.sd ** 2 / a.n, b.sd ** 2 / b.n
        se = math.sqrt(va + vb)
        # Welch–Satterthwaite degrees of freedom
        df = (va + vb) ** 2 / (va ** 2 / (a.n - 1) + vb ** 2 / (b.n - 1)) if va + vb > 0 else a.n + b.n - 2
        test, seeds = f"Welch t ({a.n} vs {b.n} runs, not paired by seed)", sorted(set(a.seeds) | set(b.seeds))
        mean_a, mean_b = a.mean, b.mean
    levels = {"ci95": confidence(), "ci90": equivalence()}
    half = {key: t_quantile(0.5 + level / 2, df) * se for key, level in levels.items()}
    # paired: the means over the seeds compared, so that diff = mean_a − mean_b as the report's tables show them.
    # "ci95" / "ci90" name the two intervals by their levels at a single look; `levels` says what they are now
    return {"diff": diff, "se": se, "df": df, "test": test, "seeds": seeds, "mean_a": mean_a, "mean_b": mean_b,
            "ci95": [diff - half["ci95"], diff + half["ci95"]], "ci90": [diff - half["ci90"], diff + half["ci90"]],
            "half95": half["ci95"], "levels": levels}


def compare(a: Group, b: Group, margin: float = LOSS_MARGIN, sides: tuple[str, str] = ("a", "b")
            ) -> tuple[str, dict[str, Any]]:
    """How a's mean val loss stands to b's: worse | better | same | unclear | too-few-seeds.

    worse/better: the difference exceeds `margin` and its 95 % interval excludes 0 (at 2 unpaired seeds a side
    that is 4.3 standard errors: two seeds prove little); same: the 90 % interval lies inside ±margin (two
    one-sided tests at α = 0.05, TOST); otherwise unclear. Paired by seed where the arms share seeds
    (`difference`). `sides` names a and b for a reader ("mean Post-LN", "mean Pre-LN").
    """
    info = difference(a, b)
    if info is None:
        return "too-few-seeds", {"n_a": a.n, "n_b": b.n}
    diff, half = info.pop("diff"), info.pop("half95")
    info = {"diff": diff, **info, "bar": max(margin, half), "margin": margin, "sides": list(sides)}
    if diff > margin and info["ci95"][0] > 0:
        return "worse", info
    if diff < -margin and info["ci95"][1] < 0:
        return "better", info
    if -margin < info["ci90"][0] and info["ci90"][1] < margin:
        return "same", info
    return "unclear", info


def noninferior(a: Group, b: Group, margin: float = LOSS_MARGIN, sides: tuple[str, str] = ("a", "b")
                ) -> tuple[str, dict[str, Any]]:
    """Is a at least as good as b (a's loss not above b's by more than `margin`)? A one-sided test at α = 0.05:
    `not worse` when the 90 % interval's upper end is below +margin, `worse` when its lower end is above
    +margin (a is worse by more than the margin), else `unclear`; `too-few-seeds` as `compare`."""
    outcome, info = compare(a, b, margin, sides)
    if outcome == "too-few-seeds":
        return outcome, info
    lo, hi = info["ci90"]
    return ("not worse" if hi < margin else "worse" if lo > margin else "unclear"), info


def loss_interval(info: dict[str, Any]) -> list[float] | None:
    """The interval a comparison's verdict rests on: the 95 % one of a difference test."""
    return info.get("ci95")


@dataclass
class Contrast:
    """Arm a against arm b, judged by `worse` or `not_worse`: the verdict, the loss comparison's outcome and
    numbers (`compare` or `noninferior`), and the failure count (`fails_more`)."""

    verdict: str
    outcome: str
    info: dict[str, Any]
    failed: dict[str, Any]
    sides: tuple[str, str] = ("a", "b")  # what a and b are, for a reader (the numbers are a − b)


def by_failures(failed: dict[str, Any], two_sided: bool = False) -> bool:
    """Is a contrast decided by its failures (`fails_more`) rather than by its losses? Yes when the failures' sign
    test could reach the level now at its number D of discordant seeds: its smallest p, ½^D (twice that two-sided),
    is below α. A rule that reads failures or losses makes exactly one of the two tests, chosen by D alone (never by
    which way the failures fell), so it errs at most at the level now without splitting α between them (5 of 5
    failures on one side, p = 1/32, still decide at α = 0.05; one discordant seed leaves the losses to decide)."""
    n = failed["only_a_failed"] + failed["only_b_failed"]
    return failed["p_one_sided"] is not None and n > 0 and (2 if two_sided else 1) * 0.5 ** n < alpha()


def worse(a: Group, b: Group, sides: tuple[str, str] = ("a", "b")) -> Contrast:
    """"a is worse than b" (Post-LN without warmup than with it, a stack without its final norm than with it).
    Where the failures decide (`by_failures`): holds when a fails to train significantly more often, does not
    hold when significantly less often. Otherwise the losses: holds when a ends worse by more than the margin,
    does not hold when it is not worse by more than the margin and fails no more often. Else inconclusive."""
    outcome, info = compare(a, b, sides=sides)
    failed = fails_more(a, b)
    if by_failures(failed):
        verdict = HOLDS if failed["more"] else FAILS if failed["fewer"] else INCONCLUSIVE
    elif outcome == "worse":
        verdict = HOLDS
    elif noninferior(a, b)[0] == "not worse" and a.n_failed <= b.n_failed:
        verdict = FAILS
    else:
        verdict = INCONCLUSIVE
    return Contrast(verdict, outcome, info, failed, sides)


def not_worse(a: Group, b: Group, sides: tuple[str, str] = ("a", "b")) -> Contrast:
    """"a does at least as well as b" (Pre-LN without warmup, the LLaMA recipe). Where the failures decide
    (`by_failures`): does not hold when a fails significantly more often; otherwise inconclusive unless the
    losses settle it as below. Where they do not: holds when a is not worse by more than the margin
    (`noninferior`) and fails no more often, does not hold when it is worse by more than the margin."""
    outcome, info = noninferior(a, b, sides=sides)
    failed = fails_more(a, b)
    if by_failures(failed):
        verdict = FAILS if failed["more"] else (
            HOLDS if outcome == "not worse" and a.n_failed <= b.n_failed else INCONCLUSIVE)
    elif outcome == "worse":
        verdict = FAILS
    elif outcome == "not worse" and a.n_failed <= b.n_failed:
        verdict = HOLDS
    else:
        verdict = INCONCLUSIVE
    return Contrast(verdict, outcome, info, failed, sides)


def beats(a: Group, b: Group, sides: tuple[str, str] = ("a", "b")) -> Contrast:
    """"a beats b" (Derf beats DyT, HybridNorm beats Pre-LN): b is worse than a (`worse(b, a)`): holds when b
    fails to train more often or ends worse by more than the margin; does not hold when a fails to train more
    often, or b is not worse than a by more than the margin and fails no more often. The numbers are b − a."""
    return worse(b, a, sides=(sides[1], sides[0]))


def same(a: Group, b: Group, sides: tuple[str, str] = ("a", "b")) -> Contrast:
    """"a matches b" (DyT matches LayerNorm): holds when the 90 % interval of a − b lies inside ±margin (TOST)
    and neither arm fails to train more often; does not hold when they differ by more than the margin (95 %
    interval) or one arm fails more often; else inconclusive."""
    outcome, info = compare(a, b, sides=sides)
    failed = fails_more(a, b)
    if by_failures(failed, two_sided=True):  # either arm may fail more: a two-sided sign test, α/2 a side
        with at_level(_LEVEL.get() / 2):
            failed = fails_more(a, b)
        return Contrast(FAILS if failed["more"] or failed["fewer"] else INCONCLUSIVE, outcome, info, failed, sides)
    if outcome in ("worse", "better"):
        return Contrast(FAILS, outcome, info, failed, sides)
    if outcome == "same" and a.n_failed == b.n_failed == 0:
        return Contrast(HOLDS, outcome, info, failed, sides)
    return Contrast(INCONCLUSIVE, outcome, info, failed, sides)


# -- words shared by the claims' summaries ------------------------------------------------
def describe(g: Group) -> dict[str, Any]:
    """One configuration over seeds: the loss of the runs that trained (mean, sd, 95 % t interval), and the
    runs that did not, as a rate with its 95 % Wilson interval; `two_mode` when some seeds trained and some not."""
    interval = g.failure_interval
    return {"setting": setting_text(g.where), "mean_val_loss": g.mean, "sd": g.sd, "mean_ci95": g.mean_interval,
            "n_runs": g.n_runs,
            "n_trained": g.n, "n_diverged": g.n_diverged, "n_failed_to_train": g.n_failed_to_train,
            "did_not_train_rate": g.failure_rate, "did_not_train_ci95": list(interval) if interval else None,
            "two_mode": g.two_mode, "n_censored": g.n_censored}


def fmt(value: float | None, spec: str = ".3f") -> str:
    """A number for a summary; `n/a` where it could not be computed."""
    return "n/a" if value is None else format(value, spec)


def ci_text(interval: list[float] | None, spec: str = "+.3f") -> str:
    """An interval for a summary, `[-0.012, +0.034]`; `n/a` where there is none."""
    return "n/a" if not interval else f"[{interval[0]:{spec}}, {interval[1]:{spec}}]"


def loss_test(info: dict[str, Any], failed: dict[str, Any] | None = None) -> str:
    """The tests a loss comparison (and, where given, its failure count) rests on, in words."""
    level = info.get("levels", {}).get("ci95", confidence())  # the level the interval was computed at
    loss = f"{info['test']}, {pct(level)} interval" if "test" in info else "too few runs trained for a loss test"
    return loss + (f"; failures: {failed['test']}" if failed else "")


def tost_test(info: dict[str, Any]) -> str:
    """The one-sided equivalence test a "not worse" rests on, in words."""
    return (f"one-sided equivalence (TOST half) at α = {alpha():g}: {info['test']}, {pct(equivalence())} interval "
            "inside +margin"
            if "test" in info else "too few runs trained for an equivalence test")


def sign_p(failed: dict[str, Any]) -> str:
    """` (sign test p = 0.031)` after a failure count, where some seeds failed on one side only."""
    return "" if failed["p_one_sided"] is None or not (failed["only_a_failed"] + failed["only_b_failed"]) else \
        f" (sign test p = {failed['p_one_sided']:.3f})"


def init_text(recipe: str) -> str:
    """An init recipe in words with its paper, the same for every scheme of a claim (a scheme's own override,
    DeepNorm's β, is its own)."""
    from normlab.nn.init import INIT_RECIPES

    known = INIT_RECIPES.get(recipe)
    return f"{recipe}: {known.text}, for every scheme (DeepNorm sets its own β)" if known else recipe


def n_seeds(records: Iterable[RunRecord]) -> int:
    return len({r.seed for r in records})


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
