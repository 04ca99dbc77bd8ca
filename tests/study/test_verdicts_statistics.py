"""The statistics every claim decides with, on small hand-computed cases: t intervals at a level, Welch and
paired differences, TOST, the exact sign test of failures (claims/statistics.py, claims/decisions.py), and the runs
of one configuration counted over seeds (claims/grouping.py)."""
from __future__ import annotations

import dataclasses
import json
import math

import pytest

from normlab.config import RunConfig
from normlab.study.claims import FAILS, HOLDS, INCONCLUSIVE
from normlab.study.claims.base import Part, combine
from normlab.study.claims.decisions import band, compare, fails_more, noninferior, sign
from normlab.study.claims.grouping import Group, failures, group, n_seeds
from normlab.study.claims.statistics import (CONFIDENCE, LOSS_MARGIN, MIN_SEEDS, Level, loglog_slope, mean_over_seeds,
                                             sign_test, spearman, t_interval, wilson_interval)
from normlab.study.records import RunRecord, flatten
from tests.study.scenarios import LR, approx, rec, runs

ALONE = Level()  # a claim alone at a single look: every decision at α = 0.05


def G(*losses):
    return Group(list(losses), len(losses), 0)


def test_thresholds():
    assert (LOSS_MARGIN, CONFIDENCE, MIN_SEEDS) == (0.02, 0.95, 2)


def test_compare_worse_and_better():
    # means 2.01 vs 1.91; each sd = 0.01·√2, se = √(2e-4/2 + 2e-4/2) = 0.01·√2; equal variances and n = 2
    # a side: Welch df = 2, t(0.975, 2) = 4.302653 (tables), half-width 4.302653·se = 0.06085 < diff 0.10
    cmp, info = compare(G(2.00, 2.02), G(1.90, 1.92), ALONE)
    assert cmp == "worse"
    assert info["diff"] == approx(0.10) and info["df"] == approx(2.0)
    assert info["se"] == approx(0.01 * math.sqrt(2))
    assert info["bar"] == pytest.approx(4.302653 * 0.01 * math.sqrt(2), rel=1e-6)
    assert info["ci95"] == [pytest.approx(0.10 - info["bar"]), pytest.approx(0.10 + info["bar"])]
    assert (info["mean_a"], info["mean_b"]) == (approx(2.01), approx(1.91))
    assert compare(G(1.90, 1.92), G(2.00, 2.02), ALONE)[0] == "better"


def test_compare_same():
    # diff −0.005, se = √(8e-6/2 · 2) ≈ 0.00283, df 2, half-width 4.30·se ≈ 0.0122 ≤ 0.02
    cmp, info = compare(G(1.903, 1.907), G(1.908, 1.912), ALONE)
    assert cmp == "same" and info["diff"] == approx(-0.005) and info["bar"] == LOSS_MARGIN


def test_compare_two_seeds_prove_little():
    """The same data that 2 standard errors called "worse" / "same" are unclear with a t interval at 2 seeds,
    and decided again at 5 seeds with the same means and spreads."""
    assert compare(G(2.00, 2.04), G(1.95, 1.95), ALONE)[0] == "unclear"  # diff 0.07, 2·se = 0.04, t·se = 0.086
    assert compare(G(2.00, 2.04, 2.00, 2.04, 2.02), G(1.95, 1.95, 1.95, 1.95, 1.95), ALONE)[0] == "worse"
    assert compare(G(1.90, 1.91), G(1.905, 1.915), ALONE)[0] == "unclear"  # 2·se 0.014 ≤ margin, t·se 0.030 is not


def test_compare_unclear():
    cmp, info = compare(G(1.80, 2.20), G(1.90, 1.91), ALONE)  # diff 0.095 < half-width of a t interval, df ≈ 1
    assert cmp == "unclear"
    assert info["df"] == pytest.approx((0.04 + 0.000025) ** 2 / (0.04 ** 2 + 0.000025 ** 2), rel=1e-9)
    assert compare(G(1.80, 2.00), G(1.90, 1.90), ALONE)[0] == "unclear"  # diff 0 but the interval is ±1.27 nats


def test_compare_too_few_seeds():
    cmp, info = compare(G(2.5), G(1.9, 1.91), ALONE)
    assert cmp == "too-few-seeds" and info == {"n_a": 1, "n_b": 2}
    assert compare(Group([], 2, 2), G(1.9, 1.91), ALONE)[0] == "too-few-seeds"


def test_compare_margin_boundary_and_custom_margin():
    # a difference exactly at the margin is neither worse (not beyond it) nor the same (TOST needs the interval
    # strictly inside ±margin)
    cmp, info = compare(G(2.5, 2.5), G(2.0, 2.0), ALONE, margin=0.5)
    assert cmp == "unclear" and info["diff"] == 0.5 and info["se"] == 0.0
    assert compare(G(2.5, 2.5), G(2.0, 2.0), ALONE, margin=0.51)[0] == "same"
    assert compare(G(2.5, 2.5), G(2.0, 2.0), ALONE, margin=0.25)[0] == "worse"


def PG(by_seed: dict[int, float], failed: tuple[int, ...] = ()) -> Group:
    """A group paired by seed: {seed: loss} of the runs that trained, `failed` seeds did not train."""
    return Group(list(by_seed.values()), len(by_seed) + len(failed), 0, len(failed), seeds=list(by_seed),
                 outcomes={**{s: True for s in by_seed}, **{s: False for s in failed}})


def test_paired_difference_cancels_the_seed_spread():
    """Seeds spread the loss by ±0.2 nats, but each seed's b run is exactly 0.03 above its a run (± 0.002): Welch
    cannot tell them apart, the paired t over the seeds' differences can, and says which test it used."""
    base = {s: 2.0 + 0.1 * ((-1) ** s) * s for s in range(5)}
    a = PG({s: v - 0.03 + 0.002 * (s % 2) for s, v in base.items()})
    b = PG(base)
    cmp, info = compare(a, b, ALONE)
    assert cmp == "better" and info["test"] == "paired t over 5 seeds" and info["seeds"] == [0, 1, 2, 3, 4]
    diffs = [a.by_seed[s] - b.by_seed[s] for s in range(5)]
    assert info["diff"] == approx(sum(diffs) / 5)
    se = (sum((d - info["diff"]) ** 2 for d in diffs) / 4) ** 0.5 / 5 ** 0.5
    assert info["ci95"] == [pytest.approx(info["diff"] - 2.776445 * se, rel=1e-5),
                            pytest.approx(info["diff"] + 2.776445 * se, rel=1e-5)]
    unpaired = compare(Group(a.losses, 5, 0), Group(b.losses, 5, 0), ALONE)
    assert unpaired[0] == "unclear" and unpaired[1]["test"].startswith("Welch")


def test_paired_uses_only_the_seeds_both_arms_trained():
    a = PG({0: 2.0, 1: 2.1, 2: 2.2}, failed=(3,))
    b = PG({0: 2.01, 2: 2.21, 3: 2.31}, failed=(1,))
    info = compare(a, b, ALONE)[1]
    assert info["seeds"] == [0, 2] and info["test"] == "paired t over 2 seeds"


def test_equivalence_is_tost_at_90_percent():
    # differences 0.010 ± 0.002 over 5 seeds: the 90 % interval ≈ [0.0081, 0.0119] lies inside ±0.02
    a = PG({s: 2.0 + 0.1 * s + 0.010 + 0.002 * (-1) ** s for s in range(5)})
    b = PG({s: 2.0 + 0.1 * s for s in range(5)})
    cmp, info = compare(a, b, ALONE)
    assert cmp == "same" and info["ci90"][1] < LOSS_MARGIN
    assert noninferior(a, b, ALONE)[0] == "not worse"
    # 0.018 ± 0.004: the 90 % interval reaches past +0.02: not the same, not worse by more than the margin either
    a = PG({s: 2.0 + 0.1 * s + 0.018 + 0.004 * (-1) ** s for s in range(5)})
    assert compare(a, b, ALONE)[0] in ("unclear", "worse") and noninferior(a, b, ALONE)[0] == "unclear"
    # 0.05 ± 0.002: worse by more than the margin
    a = PG({s: 2.0 + 0.1 * s + 0.05 + 0.002 * (-1) ** s for s in range(5)})
    assert compare(a, b, ALONE)[0] == "worse" and noninferior(a, b, ALONE)[0] == "worse"
    # better by a lot is still "not worse"
    assert noninferior(b, a, ALONE)[0] == "not worse"


def test_fails_more_is_an_exact_sign_test_over_discordant_seeds():
    a, b = PG({}, failed=(0, 1, 2, 3, 4)), PG({s: 2.0 for s in range(5)})
    info = fails_more(a, b, ALONE)
    assert info["more"] and info["p_one_sided"] == approx(1 / 32) and info["only_a_failed"] == 5
    # 4 of 5 discordant one way: p = 1/16 > 0.05, not significant at 5 seeds
    a = PG({0: 2.0}, failed=(1, 2, 3, 4))
    assert not fails_more(a, b, ALONE)["more"] and fails_more(a, b, ALONE)["p_one_sided"] == approx(1 / 16)
    assert fails_more(b, PG({}, failed=(0, 1, 2, 3, 4)), ALONE)["fewer"]
    assert sign_test(3, 3) == approx(1 / 8) and sign_test(0, 0) == 1.0


def test_band_and_sign_reach_every_outcome():
    assert band([-0.6, -0.4], -0.75, -0.25) == HOLDS
    assert band([-0.2, 0.1], -0.75, -0.25) == FAILS
    assert band([-0.3, -0.1], -0.75, -0.25) == INCONCLUSIVE
    assert band(None, 0, 1) == INCONCLUSIVE
    assert sign([0.1, 0.3], +1) == HOLDS and sign([0.1, 0.3], -1) == FAILS and sign([-0.1, 0.3], 1) == INCONCLUSIVE
    assert t_interval([1.0], ALONE.two_sided) is None
    lo, hi = t_interval([1.0, 2.0, 3.0], ALONE.two_sided)
    assert (lo + hi) / 2 == approx(2.0) and hi - 2.0 == pytest.approx(4.302653 / 3 ** 0.5, rel=1e-6)
    assert combine([]) == INCONCLUSIVE
    assert combine([Part("a", HOLDS, "", 1.0), Part("b", INCONCLUSIVE, "", 1.0)]) == INCONCLUSIVE
    assert combine([Part("a", HOLDS, "", 1.0), Part("b", FAILS, "", 1.0)]) == FAILS
    assert combine([Part("a", HOLDS, "", 1.0), Part("b", HOLDS, "", 1.0)]) == HOLDS


def test_group_counts_diverged_apart_and_drops_non_finite():
    records = (runs([1.9, None, 2.1], scheme="pre") + [rec(scheme="pre", seed=7, val_loss=float("nan"))]
               + [rec(scheme="pre", seed=8, status="failed", val_loss=None)] + runs([5.0], scheme="post"))
    g = group(records, scheme="pre", lr=LR)
    assert g.losses == [1.9, 2.1]
    assert (g.n_runs, g.n_diverged, g.n) == (5, 1, 2)
    assert g.mean == approx(2.0) and g.sd == approx(math.sqrt(0.02))
    assert g.failure_rate == approx(g.n_failed / 5)
    assert Group([], 0, 0).failure_rate is None and Group([], 0, 0).mean is None and G(1.0).sd is None
    assert n_seeds(records) == 5


def test_failure_to_train_is_a_rate_with_an_interval_never_a_loss():
    records = runs([1.9, 2.1], scheme="pre") + [rec(scheme="pre", seed=5, val_loss=3.34, status="failed_to_train"),
                                                 rec(scheme="pre", seed=6, status="diverged", val_loss=None)]
    g = group(records, scheme="pre", lr=LR)
    assert g.losses == [1.9, 2.1] and (g.n_failed_to_train, g.n_diverged, g.n_failed) == (1, 1, 2)
    assert g.failure_rate == approx(0.5) and g.two_mode
    low, high = g.failure_interval
    assert low == pytest.approx(0.150, abs=1e-3) and high == pytest.approx(0.850, abs=1e-3)  # Wilson, 2 of 4
    assert failures(g) == "1 diverged + 1 failed to train of 4"
    assert wilson_interval(0, 5)[0] == 0.0 and wilson_interval(0, 5)[1] == pytest.approx(0.4345, abs=1e-4)
    assert wilson_interval(0, 0) is None
    assert not group(runs([1.9, 2.1], scheme="pre"), scheme="pre", lr=LR).two_mode


def test_record_config_access():
    r = rec(scheme="post", lr=1e-2, warmup=0, n_layer=8, seed=3)
    assert r.get("model.scheme") == "post" and r.get("model.final_norm") is None and r.get("nope.x") is None
    assert r.matches({"model.scheme": "post", "train.lr": 1e-2, "train.warmup_steps": 0, "model.n_layer": 8})
    assert r.seed == 3 and not r.diverged and rec(status="diverged").diverged
    back = RunRecord.from_dict(json.loads(json.dumps(r.to_dict())))
    assert isinstance(back.config, RunConfig) and back.config == r.config and back == r  # typed both ways


def test_spearman():
    assert spearman([0, 1, 2, 3], [10, 20, 30, 40]) == approx(1.0)
    assert spearman([0, 1, 2, 3], [40, 30, 20, 10]) == approx(-1.0)
    assert spearman([0, 1, 2, 3], [1, 3, 2, 4]) == approx(1 - 6 * 2 / (4 * 15))  # 0.8
    # ties: y ranks [0.5, 0.5, 2] vs [0, 1, 2] → 1.5 / √(2·1.5)
    assert spearman([1, 2, 3], [1, 1, 2]) == approx(1.5 / math.sqrt(3))
    assert spearman([0, 1, 2, 3], [1, None, 2, 3]) == approx(1.0)  # None pairs dropped
    assert spearman([0, 1], [1, 2]) is None  # < 3 pairs
    assert spearman([0, 1, 2], [5, 5, 5]) is None  # constant: undefined


def test_loglog_slope():
    xs = [1, 2, 4, 8]
    assert loglog_slope(xs, [3 * x ** 2 for x in xs]) == approx(2.0)
    assert loglog_slope(xs, [x ** -0.5 for x in xs]) == approx(-0.5)
    assert loglog_slope(xs, [7.0] * 4) == approx(0.0)
    assert loglog_slope([1, 2, 0, 4], [1, 2, 5, None]) == approx(1.0)  # zero / None points dropped
    assert loglog_slope([2], [4]) is None
    assert loglog_slope([2, 2], [1, 4]) is None  # no spread in x


def test_mean_over_seeds():
    assert mean_over_seeds([[1.0, 2.0], [3.0, None]]) == [2.0, None]
    assert mean_over_seeds([]) == []
