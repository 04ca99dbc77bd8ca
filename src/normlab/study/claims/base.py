"""What a claim is in code: the runs it needs, how its verdict is computed, and its figures.

A verdict is `holds`, `does not hold` or `inconclusive` (too few seeds, too much
spread, too small a budget), always with the statistic, its value, the number of
seeds and the settings. Thresholds are module constants and are printed in the report.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Iterable

from scipy.stats import t as student_t

from normlab.jsonsafe import json_safe
from normlab.registry import Registry
from normlab.study.records import RunRecord

CLAIMS: Registry[type["Claim"]] = Registry("claim")

HOLDS, FAILS, INCONCLUSIVE = "holds", "does not hold", "inconclusive"
LOSS_MARGIN = 0.02  # nats: val-loss differences smaller than this count as "the same"
CONFIDENCE = 0.95  # a difference must also clear this two-sided t interval (Welch) of the difference of means
MIN_SEEDS = 2


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Series:
    label: str
    x: list[Any]
    y: list[float | None]
    yerr: list[float | None] | None = None


@dataclass
class Figure:
    """A plot as data; `normlab.report` draws it. kind: line | bar | dot | heatmap (see report/plots.py)."""

    title: str
    xlabel: str
    ylabel: str
    series: list[Series] = field(default_factory=list)
    kind: str = "line"
    logx: bool = False
    logy: bool = False
    matrix: list[list[float | None]] | None = None  # heatmap values, rows × cols
    rows: list[str] | None = None
    cols: list[str] | None = None
    caption: str = ""
    cell_text: list[list[str]] | None = None  # a heatmap's cell labels, where its numbers alone would mislead

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Claim:
    """Base class; one subclass per claim, registered in CLAIMS under its id."""

    id: ClassVar[str] = ""
    title: ClassVar[str] = ""
    statement: ClassVar[str] = ""
    sources: ClassVar[str] = ""  # the seed articles that make the claim
    paper: ClassVar[str] = ""  # the paper and section whose setup the measurement follows

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

    def make(self, verdict: str, statistic: str, value: float | None, n_seeds: int, settings: dict[str, Any],
             summary: str, *, missing: str | None = None, **details: Any) -> Verdict:
        """`missing`: the reading when the key number could not be computed, saying why (Post-LN did not train
        at 16 layers), so a verdict beside `n/a` never seems to rest on nothing."""
        settings = {**settings, "paper": settings.get("paper") or self.paper} if self.paper else settings
        value = json_safe(value)
        finite = isinstance(value, (int, float)) and math.isfinite(value)
        reading = self.reading(value) if finite else (missing or "")
        return Verdict(self.id, verdict, statistic, value, n_seeds, settings, json_safe(details), summary,
                       reading=reading or "")

    def reading(self, value: float) -> str | None:
        """The key number said in the claim's direction (which side is better, by how much); None: `statistic =
        value` says it well enough."""
        return None


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
        half = float(student_t.ppf(0.5 + CONFIDENCE / 2, self.n - 1)) * self.sd / math.sqrt(self.n)
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
    chosen = select(records, strict, **where)
    losses = [r.val_loss for r in chosen if r.status == "completed" and r.val_loss is not None
              and math.isfinite(r.val_loss)]
    return Group(losses, len(chosen), sum(r.diverged for r in chosen), sum(r.failed_to_train for r in chosen),
                 dict(where))


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
    """`0/2 did not train`, or `1 diverged + 1 failed to train of 2`."""
    if not g.n_failed:
        return f"0/{g.n_runs} did not train"
    parts = [f"{n} {what}" for n, what in ((g.n_diverged, "diverged"), (g.n_failed_to_train, "failed to train")) if n]
    return f"{' + '.join(parts)} of {g.n_runs}"


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """Wilson score interval for k successes in n trials (Wilson 1927)."""
    if n == 0:
        return None
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


COMPARISON_WORDS = {"same": "the same within the margin", "unclear": "unclear: its interval spans the margin",
                    "too-few-seeds": "too few runs trained to compare"}


def said(comparison: str) -> str:
    """A `compare` outcome in words for a summary: `too-few-seeds` reads "too few runs trained to compare"."""
    return COMPARISON_WORDS.get(comparison, comparison)


def compare(a: Group, b: Group, margin: float = LOSS_MARGIN, sides: tuple[str, str] = ("a", "b")
            ) -> tuple[str, dict[str, Any]]:
    """How a's mean val loss stands to b's: worse | better | same | unclear | too-few-seeds.

    worse/better: the difference exceeds both `margin` and the half-width of its 95 % Welch t interval
    (at 2 seeds a side that is 4.3 standard errors: two seeds prove little);
    same: |difference| ≤ margin and the half-width ≤ margin; otherwise unclear.
    `sides` names a and b for a reader (the report's comparison tables: "mean Post-LN", "mean Pre-LN").
    """
    if a.n < MIN_SEEDS or b.n < MIN_SEEDS:
        return "too-few-seeds", {"n_a": a.n, "n_b": b.n}
    diff = a.mean - b.mean
    va, vb = a.sd ** 2 / a.n, b.sd ** 2 / b.n
    se = math.sqrt(va + vb)
    # Welch–Satterthwaite degrees of freedom; a 95 % two-sided t interval of the difference of means
    df = (va + vb) ** 2 / (va ** 2 / (a.n - 1) + vb ** 2 / (b.n - 1)) if va + vb > 0 else a.n + b.n - 2
    half = float(student_t.ppf(0.5 + CONFIDENCE / 2, df)) * se
    bar = max(margin, half)
    info = {"diff": diff, "se": se, "bar": bar, "mean_a": a.mean, "mean_b": b.mean, "df": df,
            "ci95": [diff - half, diff + half], "sides": list(sides)}
    if diff > bar:
        return "worse", info
    if diff < -bar:
        return "better", info
    if abs(diff) <= margin and half <= margin:
        return "same", info
    return "unclear", info


def init_text(preset) -> str:
    """The init every scheme of a claim starts from, in words, read from the preset's base config."""
    base = preset.base
    if base.get("model.init", "normal") == "xavier":
        scaled = base.get("model.init_residual_scaling", True)
        return ("Xavier-normal" + (" with GPT-2's 1/√(2L) residual scaling" if scaled else ", no residual scaling")
                + ", the same for every scheme (Xiong et al. 2020, arXiv 2002.04745, §3.1; DeepNorm sets its own)")
    return (f"normal(0, {base.get('model.init_std', 0.02):g})"
            + (" with GPT-2's 1/√(2L) residual scaling" if base.get("model.init_residual_scaling", True) else "")
            + ", the same for every scheme")


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


def loglog_slope(x: list[float], y: list[float]) -> float | None:
    """Least-squares slope of log y on log x (the exponent p in y ∝ x^p)."""
    pts = [(math.log(a), math.log(b)) for a, b in zip(x, y) if a and b and a > 0 and b > 0]
    if len(pts) < 2:
        return None
    mx = statistics.fmean(p[0] for p in pts)
    my = statistics.fmean(p[1] for p in pts)
    den = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / den if den else None
