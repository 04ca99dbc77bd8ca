"""The rules a claim decides with, each at the `Level` it is handed: how one arm's loss stands to another's
(`compare`, `noninferior`), whether one fails to train more often (`fails_more`), the whole two-arm rules (`worse`,
`not_worse`, `beats`, `same`), and an interval against a claimed range or side (`band`, `sign`). Loss comparisons
pair runs by seed where the arms share seeds."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import Any

from normlab.study.claims.base import FAILS, HOLDS, INCONCLUSIVE
from normlab.study.claims.grouping import Group
from normlab.study.claims.statistics import LOSS_MARGIN, MIN_SEEDS, Level, sign_test, t_quantile


def difference(a: Group, b: Group, level: Level) -> dict[str, Any] | None:
    """a's mean val loss − b's, with its t intervals at `level` ("ci95": two-sided, "ci90": TOST, so named by
    their levels at a single look; `levels` says what they are). Paired by seed (a paired t over the seeds where
    both arms trained) when both groups carry seeds and share at least MIN_SEEDS of them: runs that share a seed
    share their init and their data order, so the seed-to-seed spread cancels. Otherwise Welch's t.
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
    levels = {"ci95": level.two_sided, "ci90": level.tost}
    half = {key: t_quantile(0.5 + coverage / 2, df) * se for key, coverage in levels.items()}
    # paired: the means over the seeds compared, so that diff = mean_a − mean_b as the report's tables show them
    return {"diff": diff, "se": se, "df": df, "test": test, "seeds": seeds, "mean_a": mean_a, "mean_b": mean_b,
            "ci95": [diff - half["ci95"], diff + half["ci95"]], "ci90": [diff - half["ci90"], diff + half["ci90"]],
            "half95": half["ci95"], "levels": levels}


def compare(a: Group, b: Group, level: Level, margin: float = LOSS_MARGIN, sides: tuple[str, str] = ("a", "b")
            ) -> tuple[str, dict[str, Any]]:
    """How a's mean val loss stands to b's at `level`: worse | better | same | unclear | too-few-seeds.

    worse/better: the difference exceeds `margin` and its two-sided interval (95 % at a single look) excludes 0
    (at 2 unpaired seeds a side that is 4.3 standard errors: two seeds prove little); same: the TOST interval (90 %)
    lies inside ±margin (two one-sided tests at `level.alpha`); otherwise unclear. Paired by seed where the arms
    share seeds (`difference`). `sides` names a and b for a reader ("mean Post-LN", "mean Pre-LN").
    """
    info = difference(a, b, level)
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


def noninferior(a: Group, b: Group, level: Level, margin: float = LOSS_MARGIN, sides: tuple[str, str] = ("a", "b")
                ) -> tuple[str, dict[str, Any]]:
    """Is a at least as good as b (a's loss not above b's by more than `margin`)? A one-sided test at
    `level.alpha`: `not worse` when the TOST interval's upper end is below +margin, `worse` when its lower end is
    above +margin (a is worse by more than the margin), else `unclear`; `too-few-seeds` as `compare`."""
    outcome, info = compare(a, b, level, margin, sides)
    if outcome == "too-few-seeds":
        return outcome, info
    lo, hi = info["ci90"]
    return ("not worse" if hi < margin else "worse" if lo > margin else "unclear"), info


def loss_interval(info: dict[str, Any]) -> list[float] | None:
    """The interval a comparison's verdict rests on: the two-sided one of a difference test."""
    return info.get("ci95")


def fails_more(a: Group, b: Group, level: Level) -> dict[str, Any]:
    """Does arm a fail to train more often than arm b? Paired by seed where both have seeds: the seeds where
    exactly one arm did not train are the evidence (McNemar's exact test, one-sided); unpaired arms fall back to
    comparing counts. `more`: significant at `level.alpha` (SIGN_LEVEL at a single look)."""
    if a.outcomes and b.outcomes:
        common = sorted(set(a.outcomes) & set(b.outcomes))
        only_a = sum(1 for s in common if not a.outcomes[s] and b.outcomes[s])
        only_b = sum(1 for s in common if a.outcomes[s] and not b.outcomes[s])
        p = sign_test(only_a, only_a + only_b)
        return {"more": only_a > only_b and p < level.alpha, "fewer": only_b > only_a and
                sign_test(only_b, only_a + only_b) < level.alpha, "only_a_failed": only_a, "only_b_failed": only_b,
                "p_one_sided": p, "test": f"exact sign test over the seeds where one arm alone did not train "
                                          f"({only_a + only_b} of {len(common)}), one-sided", "seeds": common}
    return {"more": a.n_failed > b.n_failed, "fewer": a.n_failed < b.n_failed, "only_a_failed": a.n_failed,
            "only_b_failed": b.n_failed, "p_one_sided": None, "test": "counts (runs not paired by seed)",
            "seeds": []}


@dataclass
class Contrast:
    """Arm a against arm b, judged by `worse` or `not_worse`: the verdict, the loss comparison's outcome and
    numbers (`compare` or `noninferior`), and the failure count (`fails_more`)."""

    verdict: str
    outcome: str
    info: dict[str, Any]
    failed: dict[str, Any]
    sides: tuple[str, str] = ("a", "b")  # what a and b are, for a reader (the numbers are a − b)


def by_failures(failed: dict[str, Any], level: Level, two_sided: bool = False) -> bool:
    """Is a contrast decided by its failures (`fails_more`) rather than by its losses? Yes when the failures' sign
    test could reach `level` at its number D of discordant seeds: its smallest p, ½^D (twice that two-sided), is
    below α. A rule that reads failures or losses makes exactly one of the two tests, chosen by D alone (never by
    which way the failures fell), so it errs at most at `level` without splitting α between them (5 of 5 failures
    on one side, p = 1/32, still decide at α = 0.05; one discordant seed leaves the losses to decide)."""
    n = failed["only_a_failed"] + failed["only_b_failed"]
    return failed["p_one_sided"] is not None and n > 0 and (2 if two_sided else 1) * 0.5 ** n < level.alpha


def worse(a: Group, b: Group, level: Level, sides: tuple[str, str] = ("a", "b")) -> Contrast:
    """"a is worse than b" (Post-LN without warmup than with it, a stack without its final norm than with it).
    Where the failures decide (`by_failures`): holds when a fails to train significantly more often, does not
    hold when significantly less often. Otherwise the losses: holds when a ends worse by more than the margin,
    does not hold when it is not worse by more than the margin and fails no more often. Else inconclusive."""
    outcome, info = compare(a, b, level, sides=sides)
    failed = fails_more(a, b, level)
    if by_failures(failed, level):
        verdict = HOLDS if failed["more"] else FAILS if failed["fewer"] else INCONCLUSIVE
    elif outcome == "worse":
        verdict = HOLDS
    elif noninferior(a, b, level)[0] == "not worse" and a.n_failed <= b.n_failed:
        verdict = FAILS
    else:
        verdict = INCONCLUSIVE
    return Contrast(verdict, outcome, info, failed, sides)


def not_worse(a: Group, b: Group, level: Level, sides: tuple[str, str] = ("a", "b")) -> Contrast:
    """"a does at least as well as b" (Pre-LN without warmup, the LLaMA recipe). Where the failures decide
    (`by_failures`): does not hold when a fails significantly more often; otherwise inconclusive unless the
    losses settle it as below. Where they do not: holds when a is not worse by more than the margin
    (`noninferior`) and fails no more often, does not hold when it is worse by more than the margin."""
    outcome, info = noninferior(a, b, level, sides=sides)
    failed = fails_more(a, b, level)
    if by_failures(failed, level):
        verdict = FAILS if failed["more"] else (
            HOLDS if outcome == "not worse" and a.n_failed <= b.n_failed else INCONCLUSIVE)
    elif outcome == "worse":
        verdict = FAILS
    elif outcome == "not worse" and a.n_failed <= b.n_failed:
        verdict = HOLDS
    else:
        verdict = INCONCLUSIVE
    return Contrast(verdict, outcome, info, failed, sides)


def beats(a: Group, b: Group, level: Level, sides: tuple[str, str] = ("a", "b")) -> Contrast:
    """"a beats b" (Derf beats DyT, HybridNorm beats Pre-LN): b is worse than a (`worse(b, a)`): holds when b
    fails to train more often or ends worse by more than the margin; does not hold when a fails to train more
    often, or b is not worse than a by more than the margin and fails no more often. The numbers are b − a."""
    return worse(b, a, level, sides=(sides[1], sides[0]))


def same(a: Group, b: Group, level: Level, sides: tuple[str, str] = ("a", "b")) -> Contrast:
    """"a matches b" (DyT matches LayerNorm): holds when the TOST interval of a − b lies inside ±margin and
    neither arm fails to train more often; does not hold when they differ by more than the margin (two-sided
    interval) or one arm fails more often; else inconclusive."""
    outcome, info = compare(a, b, level, sides=sides)
    failed = fails_more(a, b, level)
    if by_failures(failed, level, two_sided=True):  # either arm may fail more: a two-sided sign test, α/2 a side
        failed = fails_more(a, b, replace(level, family=level.family / 2))
        return Contrast(FAILS if failed["more"] or failed["fewer"] else INCONCLUSIVE, outcome, info, failed, sides)
    if outcome in ("worse", "better"):
        return Contrast(FAILS, outcome, info, failed, sides)
    if outcome == "same" and a.n_failed == b.n_failed == 0:
        return Contrast(HOLDS, outcome, info, failed, sides)
    return Contrast(INCONCLUSIVE, outcome, info, failed, sides)


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


def limit_verdict(mine: float | None, theirs: float | None, top: float, pooled: dict[str, Any]) -> tuple[str, str]:
    """(verdict, why) of "this arm trains at a higher lr than that one" over an lr grid: each decision is an exact
    sign test's at the claim's level (`pooled`: its `fewer` / `more`, this arm failing less / more: over the grid's
    pairs, or over the seeds whose own limits differ), the two limits saying which way: holds when this arm fails
    less often and its limit is no lower; does not hold when it fails more often and its limit is no higher. A
    limit the test does not back decides nothing (one lr's seeds cannot reach a family-wise level)."""
    higher, lower = (mine or 0) > (theirs or 0), (mine or 0) < (theirs or 0)
    if pooled["fewer"] and not lower:
        return HOLDS, ("a higher highest trainable lr" if higher else "the same highest lr") + \
            ", backed by the sign test"
    if pooled["more"] and not higher:
        return FAILS, ("a lower highest trainable lr" if lower else "the same highest lr") + \
            ", backed by the sign test"
    if higher or lower:
        return INCONCLUSIVE, (f"a {'higher' if higher else 'lower'} limit, but too few seeds whose own limits differ "
                              "to call it one: more seeds would decide")
    if mine == top:
        return INCONCLUSIVE, f"both train at every lr up to {top:g}: higher lrs would decide"
    return INCONCLUSIVE, f"the same limit, {mine:g}, and no more failures on either side than the test can call"
