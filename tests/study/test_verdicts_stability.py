"""Verdicts of the claims about whether a placement trains at all (claims/stability.py: C1, C11, C4, C8, C14) on
synthetic run records: each claim gets situations that must give `holds`, `does not hold` and `inconclusive`, with
its `value` checked against a number computed by hand (scenarios.py builds the records; test_verdicts.py checks
what holds of every claim). The scenarios include the edge cases that once crashed or contradicted a rule (Pre-LN
diverging without warmup, DeepNorm diverging everywhere).
"""
from __future__ import annotations

from typing import Any

from normlab.report.format import failure_groups
from normlab.study.claims import FAILS, HOLDS, INCONCLUSIVE
from normlab.study.claims.statistics import LOSS_MARGIN, wilson_interval
from normlab.study.records import RunRecord
from tests.study.scenarios import (DEEP, LR, LRS, PLATEAU, PLATEAU_REASON, STUCK, STUCK_LOSS, Case, P, Scenarios, W,
                                   approx, five, mean, rec, runs, table_tests, with_knobs)

scenario = Scenarios()  # @scenario(claim, expected, value): a synthetic situation that must give `expected`


# =========================================================================================
# C1 — Pre-LN needs no warmup; Post-LN does (value: mean(post, w=0) − mean(post, w=W))
# =========================================================================================
def _c1(pre0, preW, post0, postW, **kw) -> list[RunRecord]:
    out = (runs(pre0, scheme="pre", warmup=0, **kw) + runs(preW, scheme="pre", warmup=W, **kw)
           + runs(post0, scheme="post", warmup=0, **kw) + runs(postW, scheme="post", warmup=W, **kw))
    # noise the verdict must ignore: other lr, other depth
    out += runs([None, None], scheme="pre", warmup=0, lr=1e-2) + runs([9.0, 9.0], scheme="post", warmup=0, n_layer=8)
    return out


@scenario("C1", HOLDS, 0.15)
def post_clearly_worse_without_warmup():
    def check(v):
        assert v.n_seeds == 5
        assert v.details["post"]["diff"] == approx(0.15) and v.details["post"]["test"] == "paired t over 5 seeds"
        assert [(p["name"].split(":")[0], p["verdict"]) for p in v.parts] == [
            ("Post-LN needs warmup", HOLDS), ("Pre-LN is barely affected", HOLDS)]
        assert v.interval == v.parts[0]["interval"] and v.seeds == [0, 1, 2, 3, 4]
        assert v.parts[1]["interval"][1] < LOSS_MARGIN  # the 90 % interval of Pre-LN's change, inside the margin
        assert v.settings["lr"] == LR and v.settings["warmup_steps"] == W and v.settings["n_layer"] == 4
    return Case(_c1(five(1.905, 0.001), five(1.905), five(2.105, 0.002), five(1.955)), check=check)


@scenario("C1", HOLDS, None)
def post_diverges_without_warmup():
    # diverged runs count as diverged, not as losses: Post-LN has no completed no-warmup run, so no penalty;
    # its 5 of 5 failures are a rate (and a sign test, p = 1/32), not a mean
    def check(v):
        assert v.details["post_no_warmup"] == {
            "setting": f"post · L 4 · lr {LR:g} · warmup 0", "mean_val_loss": None, "sd": None, "mean_ci95": None,
            "n_runs": 5, "n_trained": 0, "n_diverged": 5, "n_failed_to_train": 0, "did_not_train_rate": 1.0,
            "did_not_train_ci95": list(wilson_interval(5, 5)), "two_mode": False, "n_censored": 0}
        assert "p = 0.031" in v.parts[0]["summary"] and "sign test" in v.parts[0]["test"]
    return Case(_c1(five(1.905, 0.001), five(1.905), [None] * 5, five(1.955)), check=check)


@scenario("C1", INCONCLUSIVE, 0.0)
def post_diverges_in_one_seed_without_warmup():
    # one diverged seed of 5 is no evidence by itself (p = 1/2), and the other 4 end as with warmup
    def check(v):
        assert v.details["post_no_warmup"]["mean_val_loss"] == approx(mean(five(1.955)[1:]))
        assert v.details["post_no_warmup"]["n_trained"] == 4 and v.details["post_no_warmup"]["n_diverged"] == 1
        assert v.parts[0]["verdict"] == INCONCLUSIVE
    return Case(_c1(five(1.905, 0.001), five(1.905), [None] + five(1.955)[1:], five(1.955)), check=check)


@scenario("C1", HOLDS, None)
def post_fails_to_train_without_warmup():
    # stuck on the unigram plateau (3.34) is a failure, counted with divergence and never averaged in
    def check(v):
        assert v.details["post_no_warmup"]["n_failed_to_train"] == 5 and v.details["post_no_warmup"]["n_trained"] == 0
        assert "5 failed to train of 5" in v.summary
    return Case(_c1(five(1.905, 0.001), five(1.905), [STUCK] * 5, five(1.955)), check=check)


@scenario("C1", FAILS, 0.0)
def post_unaffected_by_warmup():
    return Case(_c1(five(1.905, 0.001), five(1.905), five(1.955, 0.001), five(1.955)))


@scenario("C1", FAILS, 0.15)
def pre_clearly_worse_without_warmup():
    def check(v):
        assert [p["verdict"] for p in v.parts] == [HOLDS, FAILS]
    return Case(_c1(five(2.055, 0.001), five(1.905), five(2.105, 0.002), five(1.955)), check=check)


@scenario("C1", "depends on lr", 0.0)
def c1_holds_only_at_a_larger_lr():
    # at the fixed lr (3e-3) Post-LN trains without warmup as with it (does not hold); at 1e-2 it fails in every
    # seed without warmup and trains with it, while Pre-LN trains either way (holds): the verdict depends on lr,
    # and its scope gives the boundary
    def check(v):
        assert v.verdict == FAILS and v.scope["lr"] == {"lr 0.001": INCONCLUSIVE, "lr 0.003": FAILS,
                                                         "lr 0.01": HOLDS}
        assert v.details["lr_boundary"] == "holds at lr ≥ 0.01, does not hold at lr ≤ 0.003"
        # the region along lr, in the headline and the summary: which scheme needs warmup where
        assert v.details["regions"] == {"0.001": "Post-LN undecided, Pre-LN undecided", "0.003": "neither needs warmup",
                                        "0.01": "Post-LN needs warmup, Pre-LN does not"}
        assert v.reading.startswith("Post-LN undecided, Pre-LN undecided at lr 0.001; neither needs warmup at lr "
                                    "0.003; Post-LN needs warmup, Pre-LN does not at lr 0.01; at lr 0.003: ")
        assert "along lr: " in v.summary
    records = (runs(five(1.905, 0.001), scheme="pre", warmup=0) + runs(five(1.905), scheme="pre", warmup=W)
               + runs(five(1.955, 0.001), scheme="post", warmup=0) + runs(five(1.955), scheme="post", warmup=W))
    at = dict(lr=1e-2)
    records += (runs(five(1.805, 0.001), scheme="pre", warmup=0, **at) + runs(five(1.805), scheme="pre", warmup=W, **at)
                + runs([None] * 5, scheme="post", warmup=0, **at) + runs(five(1.855), scheme="post", warmup=W, **at))
    return Case(records, check=check)


@scenario("C1", INCONCLUSIVE, None)
def c1_single_seed():
    return Case(_c1([1.90], [1.90], [2.50], [1.95]))


@scenario("C1", INCONCLUSIVE, 0.15)
def c1_pre_change_straddles_the_margin():
    # Pre-LN without warmup +0.016 ± 0.01 nats: its 90 % interval reaches past +0.02 (as in the standard run of
    # 2026-11-24): neither within the margin nor beyond it; more seeds would decide
    def check(v):
        lo, hi = v.parts[1]["interval"]
        assert lo < LOSS_MARGIN < hi and v.parts[1]["verdict"] == INCONCLUSIVE
    return Case(_c1(five(1.921, 0.01), five(1.905), five(2.105, 0.002), five(1.955)), check=check)


@scenario("C1", FAILS, 0.15)
def pre_diverges_without_warmup():
    # 6 seeds: one part's "does not hold" makes the bundle's only at the level split over its 2 parts (1/64 < 0.025)
    return Case(_c1([None] * 6, five(1.905) + [1.91], five(2.105, 0.002) + [2.11], five(1.955) + [1.96]))


@scenario("C1", INCONCLUSIVE, 0.15)
def pre_diverges_without_warmup_in_five_seeds():
    # 5 of 5: p = 1/32 = 0.031 is past α = 0.05 but not past 0.025, the level a bundled claim's "does not hold"
    # needs from one of its 2 parts (Bonferroni over the parts)
    def check(v):
        assert v.parts[1]["verdict"] == FAILS and v.details["does_not_hold_level"] == 0.025
        assert "none at 0.025, the level split over its 2 parts" in v.summary
    return Case(_c1([None] * 5, five(1.905), five(2.105, 0.002), five(1.955)), check=check)


# =========================================================================================
# C11 — Pre-LN tolerates larger lrs (value: highest trainable lr Pre-LN / Post-LN, warmup W). The limits say which
#       way; a decision is the exact sign test over the seeds whose own highest trainable lr differs (one outcome
#       per seed; `decisions.limit_verdict`). 5 of 5 on one side: p = 1/32
# =========================================================================================
def _c11(pre: dict, post: dict, seeds=5) -> list[RunRecord]:
    """pre/post: lr -> a loss every seed ends at (+ 0.01·seed; None: every seed diverged), or a list with one
    entry per seed as `runs` reads it (None diverged, PLATEAU censored); at warmup W. Post-LN also runs without
    warmup and diverges there (what C1 reads: it must not enter C11's limits)."""
    out = []
    for scheme, table in (("pre", pre), ("post", post)):
        for lr, loss in table.items():
            per_seed = loss if isinstance(loss, list) else [None if loss is None else loss + 0.01 * s
                                                            for s in range(seeds)]
            out += runs(per_seed, scheme=scheme, lr=lr)
            out += runs([None] * len(per_seed), scheme=scheme, lr=lr, warmup=0) if scheme == "post" else []
    return out


TRAIN_ALL = {1e-3: 1.95, 3e-3: 1.90, 1e-2: 1.92}  # trains at every lr of the grid
POST_TOP_FAILS = {1e-3: 1.97, 3e-3: 1.95, 1e-2: None}  # Post-LN's limit 3e-3: every seed diverges at 1e-2


@scenario("C11", HOLDS, 1e-2 / 3e-3)
def post_diverges_at_top_lr():
    # Post-LN diverges at 1e-2 in all 5 seeds, Pre-LN trains in all 5: in every seed Pre-LN's own limit is the higher,
    # p = 1/32 < 0.05. Pre-LN trains at the grid's top: 3.33× is a lower bound
    def check(v):
        assert v.details["max_stable_lr"][str(W)] == {"pre": 1e-2, "post": 3e-3}
        assert v.details["max_stable_lr"]["0"]["post"] is None  # every no-warmup Post-LN run diverged
        paired = v.details["limits_paired"]
        assert (paired["a_higher"], paired["b_higher"]) == (5, 0) and paired["higher"]
        assert paired["p_higher"] == approx(1 / 32) and v.seeds == [0, 1, 2, 3, 4]
        assert v.details["seed_limits"]["post"] == {str(s): 3e-3 for s in range(5)}
        assert v.details["limit_censored_by_grid"] is True
        assert v.reading == "Pre-LN's highest trainable lr is at least 3.33× Post-LN's (Pre-LN trains at the grid's top lr)"
        assert "(the grid's top: its limit is at or above it)" in v.summary
        assert v.test == ("exact sign test over the 5 of 5 seeds whose highest trainable lr differs between the "
                          "schemes (one outcome per seed), one-sided")
    return Case(_c11(TRAIN_ALL, POST_TOP_FAILS), check=check)


@scenario("C11", HOLDS, 1e-2 / 1e-3)
def a_seed_whose_limit_is_two_lrs_lower_counts_once():
    # Post-LN fails in 2 seeds at 3e-3 (3 of 5 train: its limit falls to 1e-3) and in all 5 at 1e-2. At the lr that
    # separates the limits, 3e-3, 2 seeds (p = 1/4) could not decide; per seed, Pre-LN's own limit is the higher in
    # all 5 (p = 1/32): the two seeds two lrs apart count once each, not as 2 pairs
    def check(v):
        paired = v.details["limits_paired"]
        assert (paired["a_higher"], paired["b_higher"]) == (5, 0)
        assert v.details["seed_limits"]["post"] == {"0": 1e-3, "1": 1e-3, "2": 3e-3, "3": 3e-3, "4": 3e-3}
    return Case(_c11(TRAIN_ALL, {1e-3: 1.97, 3e-3: [STUCK, None, 1.95, 1.96, 1.97], 1e-2: None}), check=check)


@scenario("C11", INCONCLUSIVE, 1e-2 / 3e-3)
def post_trains_in_too_few_seeds_at_top_lr():
    # Post-LN trains in 3 of 5 seeds at 1e-2 (60 % < 80 %): by the threshold its limit is 3e-3, but 2 pairs over the
    # grid are p = 1/4: a two-mode cell backs no limit
    def check(v):
        assert v.details["max_stable_lr"][str(W)] == {"pre": 1e-2, "post": 3e-3}
        assert "80%" in v.settings["trainable"]
        assert "a higher limit, but too few seeds whose own limits differ" in v.summary
    return Case(_c11(TRAIN_ALL, {1e-3: 1.97, 3e-3: 1.95, 1e-2: [STUCK, STUCK, 1.93, 1.94, 1.95]}), check=check)


@scenario("C11", FAILS, 3e-3 / 1e-2)
def pre_diverges_first():
    # the limits the other way round: Pre-LN alone fails at 1e-2 in 5 of 5 seeds (p = 1/32)
    def check(v):
        paired = v.details["limits_paired"]
        assert (paired["a_higher"], paired["b_higher"]) == (0, 5) and paired["lower"]
        assert v.details["limit_censored_by_grid"] is False and v.reading == "Pre-LN's highest trainable lr is 0.3× Post-LN's"
    return Case(_c11({1e-3: 1.95, 3e-3: 1.90, 1e-2: None}, {1e-3: 1.97, 3e-3: 1.95, 1e-2: 1.93}), check=check)


@scenario("C11", INCONCLUSIVE, 1.0)
def same_limit_below_top():
    # the same limit (3e-3), both failing in every seed above it: no pair where one alone failed, no test, no
    # decision (Pre-LN failing at the next lr up says nothing about Post-LN doing better there)
    def check(v):
        assert v.details["limits_paired"]["ties"] == 5
        assert "the same limit, 0.003, and no more failures on either side than the test can call" in v.summary
        assert v.why == ""
    return Case(_c11({1e-3: 1.95, 3e-3: 1.90, 1e-2: None}, POST_TOP_FAILS), check=check)


@scenario("C11", INCONCLUSIVE, 1.0)
def sweep_finds_no_limit():
    def check(v):
        assert "both train at every lr up to 0.01: higher lrs would decide" in v.summary
        assert v.details["limit_censored_by_grid"] is True
    return Case(_c11(TRAIN_ALL, {1e-3: 1.97, 3e-3: 1.95, 1e-2: 1.93}), check=check)


@scenario("C11", INCONCLUSIVE, 1e-2 / 3e-3)
def c11_single_seed():
    def check(v):
        assert v.n_seeds == 1
    return Case(_c11(TRAIN_ALL, POST_TOP_FAILS, seeds=1), check=check)


@scenario("C11", INCONCLUSIVE, None)
def c11_everything_diverged():
    def check(v):
        assert "neither trains at any lr of the grid: lower lrs would decide" in v.summary
    return Case(_c11({lr: None for lr in LRS}, {lr: None for lr in LRS}), check=check)


@scenario("C11", HOLDS, 1e-2 / 3e-3)
def post_censored_seed_is_left_out_of_the_split():
    # 6 seeds: Post-LN diverges at 1e-2 in seeds 0–4, and the plateau stop ended seed 5's run there. Censored, its
    # limit is unknown: 5 seeds paired, 5–0 (p = 1/32)
    def check(v):
        paired = v.details["limits_paired"]
        assert (paired["a_higher"], paired["b_higher"], paired["censored_seeds"]) == (5, 0, [5])
        cell = v.details["sweep"]["post"][str(W)]["0.01"]
        assert (cell["n_runs"], cell["n_diverged"], cell["n_censored"]) == (5, 5, 1)
    return Case(_c11(TRAIN_ALL, {1e-3: 1.97, 3e-3: 1.95, 1e-2: [None] * 5 + [PLATEAU]}, seeds=6), check=check)


@scenario("C11", INCONCLUSIVE, 1e-2 / 3e-3)
def post_failures_at_the_split_partly_censored():
    # Post-LN at 1e-2: 3 seeds diverged, 2 stopped on the plateau. Counted as failures they would make 5–0 (holds);
    # censored, two seeds' limits are unknown: 3 seeds paired, 3–0, p = 1/8
    def check(v):
        assert v.details["limits_paired"]["a_higher"] == 3
        assert "above Post-LN's in 3 seeds and below it in 0 (sign test p = 0.125; 2 seeds' limits censored)" in v.summary
    return Case(_c11(TRAIN_ALL, {1e-3: 1.97, 3e-3: 1.95, 1e-2: [None, None, None, PLATEAU, PLATEAU]}), check=check)


# =========================================================================================
# C4 — Post-LN gets harder with depth (value: Post-LN − Pre-LN val loss at the deepest depth). Decided by a per-seed
#      sign test (is Post-LN's deficit to Pre-LN larger at the deepest depth than at the shallowest? a failure where
#      the other trained is an infinite deficit) AND Post-LN worse at the deepest; the Spearman is descriptive only
# =========================================================================================
def _c4(post: dict, pre: dict | None = None) -> list[RunRecord]:
    pre = pre or {d: [1.903, 1.907] for d in P.depths}
    out = []
    for d in P.depths:
        out += runs(pre[d], scheme="pre", n_layer=d) + runs(post[d], scheme="post", n_layer=d)
    out += runs([None, None], scheme="pre", n_layer=8, lr=1e-2)  # other lr: ignored
    return out


PRE5 = {d: five(1.905) for d in P.depths}  # Pre-LN at every depth, 5 seeds


@scenario("C4", HOLDS, 2.105 - 1.905)
def gap_grows_with_depth():
    # per seed, Post-LN's deficit is 0.01 (± 0.001) at 2 layers and 0.2 (± 0.001) at 8: larger in 5 of 5 seeds
    # (p = 1/32), and at 8 layers Post-LN is worse by 0.2 (paired t)
    def check(v):
        grow = v.details["deficit_growth"]
        assert (grow["up"], grow["down"], grow["n"], grow["depths"], grow["harder"]) == (5, 0, 5, [2, 8], True)
        assert grow["p_up"] == approx(1 / 32)
        assert v.details["depth_trend_spearman"] == approx(1.0)  # descriptive, in the details
        assert v.settings["depths"] == [2, 4, 8]
        assert v.test.startswith("exact sign test over the seeds where Post-LN's deficit at 8 layers differs from "
                                 "that at 2 (5 of 5), one-sided; at the deepest depth: paired t over 5 seeds")
    return Case(_c4({2: five(1.915, 0.001), 4: five(1.955, 0.001), 8: five(2.105, 0.001)}, PRE5), check=check)


@scenario("C4", INCONCLUSIVE, 2.105 - 1.905)
def gap_grows_with_depth_in_two_seeds():
    # the same growth at 2 seeds: 2 of 2, p = 1/4, though Post-LN is clearly worse at 8 layers and the rank
    # correlation is 1 (before issue 32 that correlation alone decided: holds)
    def check(v):
        assert "larger at 8 than at 2 layers in 2 seeds and smaller in 0 (sign test p = 0.25)" in v.summary
        assert v.details["depth_trend_spearman"] == approx(1.0)
    return Case(_c4({2: [1.913, 1.917], 4: [1.953, 1.957], 8: [2.103, 2.107]}), check=check)


@scenario("C4", HOLDS, None)
def post_diverges_at_deepest():
    def check(v):  # the verdict holds on the failure rate: its reading says so instead of a bare n/a
        assert v.reading.startswith("at 8 layers too few Post-LN runs trained to compare (5 diverged of 5) "
                                    "where Pre-LN's did")
        assert "8 layers n/a: 5/5 Post-LN runs did not train" in v.summary and "{" not in v.summary
        assert v.details["failures_deepest"]["p_one_sided"] == approx(1 / 32)
        assert v.details["deficit_growth"]["up"] == 5  # an infinite deficit at 8 layers, a finite one at 2
        labels = [label for label, _ in failure_groups(v.details)]
        assert "post · L 8 · lr 0.003 · warmup 50" in labels and len(labels) == len(set(labels))
    return Case(_c4({2: five(1.915), 4: five(1.955), 8: [None] * 5}, PRE5), check=check)


@scenario("C4", INCONCLUSIVE, None)
def post_diverges_at_deepest_in_two_seeds_only():
    # 2 of 2 seeds diverged where Pre-LN trained: p = 1/4 by the sign test, not evidence yet
    return Case(_c4({2: [1.913, 1.917], 4: [1.953, 1.957], 8: [None, None]}))


@scenario("C4", INCONCLUSIVE, None)
def post_stopped_on_the_plateau_at_deepest_is_censored():
    # at 8 layers Post-LN diverges in seeds 0–3 and seed 4 is stopped on the plateau: counted as a failure it would
    # make 5 of 5 (holds); censored, 4 seeds are left: 4–0 is p = 1/16, for the deficit test and the failures alike
    def check(v):
        grow = v.details["deficit_growth"]
        assert (grow["up"], grow["n"], grow["seeds"]) == (4, 4, [0, 1, 2, 3])
        assert v.details["by_depth"]["8"]["post"]["n_censored"] == 1
        assert "(4 diverged of 4; 1 stopped on the plateau, censored)" in v.summary
    return Case(_c4({2: five(1.915), 4: five(1.955), 8: [None] * 4 + [PLATEAU]}, PRE5), check=check)


@scenario("C4", FAILS, 0.0)
def post_same_at_every_depth():
    return Case(_c4({d: [1.903, 1.907] for d in P.depths}))


@scenario("C4", FAILS, 1.805 - 1.905)
def post_better_at_deepest():
    return Case(_c4({2: [1.913, 1.917], 4: [1.953, 1.957], 8: [1.803, 1.807]}))


@scenario("C4", FAILS, 2.105 - 1.905)
def post_deficit_shrinks_with_depth():
    # Post-LN is still worse at 8 layers (by 0.2), but its deficit was 0.4 at 2: smaller in 5 of 5 seeds (p = 1/32)
    def check(v):
        grow = v.details["deficit_growth"]
        assert (grow["down"], grow["easier"]) == (5, True) and grow["p_down"] == approx(1 / 32)
    return Case(_c4({2: five(2.305, 0.001), 4: five(2.205, 0.001), 8: five(2.105, 0.001)}, PRE5), check=check)


@scenario("C4", FAILS, None)
def pre_breaks_at_depth():
    # Pre-LN diverges at 8 layers in all 5 seeds where Post-LN trains: it is Pre-LN that breaks (p = 1/32)
    def check(v):
        assert v.details["deficit_growth"]["down"] == 5  # Pre-LN alone failing: a deficit of −∞
    return Case(_c4({d: five(1.915) for d in P.depths}, {**PRE5, 8: [None] * 5}), check=check)


@scenario("C4", INCONCLUSIVE, None)
def c4_single_seed():
    def check(v):  # both sides trained, just too few of them: the reading must not say Post-LN failed
        assert v.reading.startswith("no loss gap at 8 layers: too few runs trained to compare")
    return Case(_c4({2: [1.91], 4: [1.95], 8: [2.10]}, {d: [1.90] for d in P.depths}), check=check)


@scenario("C4", INCONCLUSIVE, 2.105 - 1.905)
def post_worse_but_gap_shrinks_with_depth():
    # the deficit shrinks in 2 of 2 seeds (p = 1/4): not yet "easier", and Post-LN is worse at 8 layers
    return Case(_c4({2: [2.303, 2.307], 4: [2.203, 2.207], 8: [2.103, 2.107]}))


@scenario("C4", INCONCLUSIVE, 2.1 - 1.905)
def c4_spread_too_large_at_deepest():
    return Case(_c4({2: [1.913, 1.917], 4: [1.953, 1.957], 8: [1.80, 2.40]}))


# =========================================================================================
# C8 — DeepNorm trains very deep models (value: DeepNorm − Pre-LN val loss at the deepest)
# =========================================================================================
def _c8(deep, post, pre, depth=16) -> list[RunRecord]:
    kw = dict(n_layer=depth, d_model=32)
    return (runs(deep, scheme="deepnorm", **kw) + runs(post, scheme="post", **kw) + runs(pre, scheme="pre", **kw)
            + runs([1.0, 1.0], scheme="pre", n_layer=8, d_model=32))  # shallower: not the deepest depth


@scenario("C8", HOLDS, 2.005 - 2.105)
def deepnorm_stable_post_diverges_beats_pre():
    # at 16 layers DeepNorm trains in every seed, Post-LN diverges in all 5 (p = 1/32), DeepNorm beats Pre-LN by 0.1
    def check(v):
        assert v.test.startswith("paired t over 5 seeds") and v.interval[1] < 0
        assert v.details["post_vs_deepnorm"]["more"]
    return Case(_c8(five(2.005, 0.002), [None] * 5, five(2.105)), preset=DEEP, check=check)


@scenario("C8", INCONCLUSIVE, 2.005 - 2.105)
def post_diverges_in_two_seeds_only():
    # 2 of 2 Post-LN seeds diverged (p = 1/4): not yet evidence that Post-LN fails where DeepNorm trains
    return Case(_c8([2.003, 2.007], [None, None], [2.103, 2.107]), preset=DEEP)


@scenario("C8", FAILS, 2.205 - 2.005)
def deepnorm_worse_than_pre():
    # DeepNorm trains and Post-LN diverges, but DeepNorm ends 0.2 nats worse than Pre-LN
    return Case(_c8([2.203, 2.207], [None, None], [2.003, 2.007]), preset=DEEP)


@scenario("C8", FAILS, 2.010 - 2.005)
def deepnorm_cannot_beat_pre():
    # DeepNorm trains and Post-LN diverges, but DeepNorm ends 0.005 nats above Pre-LN: no difference shows, and
    # Pre-LN is not worse by more than the margin, so DeepNorm cannot beat it; the summary says so
    def check(v):
        assert "so DeepNorm cannot beat it" in v.summary
    return Case(_c8([2.008, 2.012], [None, None], [2.003, 2.007]), preset=DEEP, check=check)


@scenario("C8", FAILS, 2.005 - 2.105)
def post_does_not_fail():
    # Post-LN trains as well as DeepNorm at 16 layers: nothing DeepNorm rescues
    return Case(_c8([2.003, 2.007], [2.003, 2.007], [2.103, 2.107]), preset=DEEP)


@scenario("C8", INCONCLUSIVE, None)
def no_deep_depths_in_preset():
    # the preset has no very deep models: not measured
    def check(v):
        assert v.n_seeds == 0
    return Case(_c8([2.003, 2.007], [None, None], [2.103, 2.107]), preset=P, check=check)


@scenario("C8", INCONCLUSIVE, None)
def c8_single_seed():
    # one seed per scheme: too few to compare DeepNorm with Pre-LN
    return Case(_c8([2.00], [None], [2.10]), preset=DEEP)


@scenario("C8", INCONCLUSIVE, 2.0 - 2.105)
def c8_spread_too_large():
    # DeepNorm's two seeds 0.6 nats apart: better than Pre-LN on average, but unclear
    return Case(_c8([1.70, 2.30], [None, None], [2.103, 2.107]), preset=DEEP)


@scenario("C8", FAILS, None)
def deepnorm_diverges_everywhere():
    # DeepNorm itself diverges in every seed where Pre-LN trains: 5 of 5, exact sign test p = 1/32
    return Case(_c8([None] * 5, [None] * 5, five(2.105)), preset=DEEP)


@scenario("C8", INCONCLUSIVE, None)
def deepnorm_diverges_in_one_seed():
    # one diverged seed of two decides nothing (p = 1/2): a failure is counted by its test, not by its presence
    def check(v):
        assert v.details["by_depth"]["16"]["deepnorm"]["n_diverged"] == 1
        assert v.details["by_depth"]["16"]["deepnorm"]["two_mode"] is True
    return Case(_c8([None, 1.80], [None, None], [2.103, 2.107]), preset=DEEP, check=check)


@scenario("C8", INCONCLUSIVE, None)
def deepnorm_diverges_while_pre_is_stuck():
    # both fail in every seed: no seed where one alone failed, so no test tells them apart at this budget
    return Case(_c8([None, None], [None, None], [STUCK, STUCK]), preset=DEEP)


@scenario("C8", INCONCLUSIVE, None)
def deepnorm_and_pre_fail_to_train():
    # nothing leaves the unigram plateau at this depth and budget: too short to say anything about DeepNorm
    def check(v):
        assert v.details["by_depth"]["16"]["deepnorm"]["n_failed_to_train"] == 2
        assert v.details["by_depth"]["16"]["pre"]["n_failed_to_train"] == 2
        assert "2 failed to train of 2" in v.summary
    return Case(_c8([STUCK, STUCK], [None, None], [STUCK, STUCK]), preset=DEEP, check=check)


@scenario("C8", INCONCLUSIVE, None)
def deepnorm_fails_to_train_and_pre_stuck_in_one_seed():
    # Pre-LN also failed to train (in one seed): the budget, not DeepNorm, may be what is too small
    return Case(_c8([STUCK, STUCK], [None, None], [STUCK, 2.10]), preset=DEEP)


@scenario("C8", INCONCLUSIVE, None)
def deepnorm_fails_to_train_and_no_pre_runs():
    # no Pre-LN at this depth to tell a short budget from a DeepNorm failure
    records = [r for r in _c8([STUCK, STUCK], [None, None], [2.103, 2.107])
               if not (r.get("model.scheme") == "pre" and r.get("model.n_layer") == 16)]
    return Case(records, preset=DEEP)


@scenario("C8", FAILS, None)
def deepnorm_fails_to_train_where_pre_trains():
    # Pre-LN left the plateau at this depth and budget in 5 of 5 seeds; DeepNorm in none (p = 1/32)
    def check(v):
        assert v.details["by_depth"]["16"]["pre"]["n_trained"] == 5
        assert v.details["by_depth"]["16"]["deepnorm"]["n_trained"] == 0
    return Case(_c8([STUCK] * 5, [None] * 5, five(2.105)), preset=DEEP, check=check)


@scenario("C8", INCONCLUSIVE, None)
def deepnorm_fails_to_train_in_one_seed_where_pre_trains():
    # one DeepNorm seed stuck on the plateau while every Pre-LN seed trained: p = 1/2, no decision
    return Case(_c8([STUCK, 2.00], [None, None], [2.103, 2.107]), preset=DEEP)


@scenario("C8", INCONCLUSIVE, None)
def c8_no_deepnorm_runs():
    # no DeepNorm run at the deepest depth: nothing to judge
    records = [r for r in _c8([2.003, 2.007], [None, None], [2.103, 2.107]) if r.get("model.scheme") != "deepnorm"]
    return Case(records, preset=DEEP)


# =========================================================================================
# C14 — Peri-LN is a further stabilizer (value: of the seeds where both schemes' limits are known, the share where
#       Peri-LN's highest trainable lr is above Pre-LN's). One outcome per seed: each seed's highest lr of C14's own
#       runs (Peri-LN's and Pre-LN's lr sweep without warmup at the base depth 4, over the preset's stress lrs) at
#       which it trained, paired by seed, one-sided exact sign test over the seeds where they differ. Post-LN's
#       runs, here at every cell, are other claims' and never enter
# =========================================================================================
# C14's own lrs (stress lrs), as the standard preset's: 3e-3 and 1e-2 inside the unit grid, two beyond it
P14 = with_knobs(P, "unit-stress", C14={"stress_lrs": [3e-3, 1e-2, 3e-2, 0.1]})
C14_LRS = [3e-3, 1e-2, 3e-2, 0.1]  # C14's lrs under P14 (1e-3 is not one)
C14_CELLS = [(lr, 0, 4) for lr in C14_LRS]  # (lr, warmup, depth): 4 per scheme, 8 with 2 seeds, 20 with 5
# other claims' runs, never C14's: the with-warmup lr sweep (C1/C7/C11), the grid lr below lr_fixed without warmup,
# and the depth sweep at lr LR with warmup (C4's)
OUTSIDE_CELLS = [(lr, W, 4) for lr in LRS] + [(1e-3, 0, 4)] + [(LR, W, d) for d in P.depths if d != 4]


def _c14(diverge: dict[str, Any], seeds=(0, 1), schemes=("peri", "pre", "post"),
         stuck: dict[str, Any] | None = None, censored: dict[str, Any] | None = None) -> list[RunRecord]:
    """C14's runs under P14 (C14_CELLS) plus OUTSIDE_CELLS, which belong to other claims and must not enter the
    rates or the seeds' limits.
    diverge[scheme] / stuck[scheme] / censored[scheme]: a set of (lr, warmup, depth) cells that diverge / fail to
    train / are stopped on the plateau (censored) in every seed, or a dict {cell: seeds} of the seeds that do."""
    stuck, censored = stuck or {}, censored or {}
    cells = C14_CELLS + OUTSIDE_CELLS

    def hit(spec, cell, seed):
        return seed in spec.get(cell, ()) if isinstance(spec, dict) else cell in spec

    out = []
    for s in schemes:
        for lr, w, d in cells:
            for seed in seeds:
                plateau = hit(censored.get(s, set()), (lr, w, d), seed)
                status = ("diverged" if hit(diverge.get(s, set()), (lr, w, d), seed) else
                          "failed_to_train" if plateau or hit(stuck.get(s, set()), (lr, w, d), seed) else "completed")
                out.append(rec(scheme=s, lr=lr, warmup=w, n_layer=d, seed=seed, status=status,
                               val_loss={"diverged": None, "failed_to_train": STUCK_LOSS}.get(status, 1.9 + 0.01 * seed),
                               **({"reason": PLATEAU_REASON} if plateau else {})))
    return out


def _limits(v) -> dict[str, dict[str, float | None]]:
    """C14's per-seed limits, {scheme: {seed: limit}}, as the verdict's details hold them."""
    return v.details["seed_limits"]


@scenario("C14", HOLDS, 5 / 5)
def peri_never_diverges():
    # Pre-LN fails at 0.1 in all 5 seeds, Peri-LN in none: each seed's limit is 0.1 for Peri-LN and 3e-2 for Pre-LN,
    # higher in 5 of 5 seeds (p = 1/32); Post-LN's failures are not C14's, nor is anything with warmup
    def check(v):
        assert v.details["did_not_train_rate"] == approx({"peri": 0.0, "pre": 5 / 20})
        assert v.details["max_stable_lr_no_warmup"] == {"peri": 0.1, "pre": 3e-2}
        assert _limits(v) == {"peri": {str(s): 0.1 for s in range(5)}, "pre": {str(s): 3e-2 for s in range(5)}}
        paired = v.details["limits_paired"]
        assert (paired["a_higher"], paired["b_higher"], paired["ties"], paired["higher"]) == (5, 0, 0, True)
        assert paired["p_higher"] == approx(1 / 32) and paired["censored_seeds"] == []
        assert v.n_seeds == 5 and v.settings["lr_sweep_warmup_steps"] == 0 and v.settings["lrs"] == C14_LRS
        assert v.seeds == [0, 1, 2, 3, 4]
        assert v.test == ("exact sign test over the 5 of 5 seeds whose highest trainable lr differs between the "
                          "schemes (one outcome per seed), one-sided")
        assert v.reading == ("Peri-LN's highest trainable lr without warmup is above Pre-LN's in 5 of 5 seeds and "
                             "below it in 0 (sign test p = 0.0312)")
    return Case(_c14({"pre": {(0.1, 0, 4)}, "post": {(3e-2, 0, 4), (0.1, 0, 4), (1e-2, W, 4)}}, seeds=range(5)),
                preset=P14, check=check)


@scenario("C14", HOLDS, 5 / 5)
def peri_diverges_only_outside_its_own_runs():
    # Peri-LN diverges in every run outside C14's set (12: the with-warmup sweep, lr 1e-3 without warmup, depths 2
    # and 8): counted, they would make it the least stable and leave it no limit; C14's own runs say it trains
    # at 0.1 in every seed, where Pre-LN does not
    def check(v):
        assert v.details["did_not_train_rate"] == approx({"peri": 0.0, "pre": 5 / 20})
        assert v.details["max_stable_lr_no_warmup"] == {"peri": 0.1, "pre": 3e-2}
        assert _limits(v)["peri"] == {str(s): 0.1 for s in range(5)}
    return Case(_c14({"peri": set(OUTSIDE_CELLS), "pre": {(0.1, 0, 4)}, "post": {(0.1, 0, 4)}}, seeds=range(5)),
                preset=P14, check=check)


@scenario("C14", INCONCLUSIVE, 2 / 5)
def peri_fails_once_below_a_higher_limit():
    # Peri-LN fails at 1e-2 in seed 0 and at 3e-2 in seed 1, and trains above, at 0.1, in both: a seed's limit is
    # the highest lr it trained at, 0.1 in every seed. Pre-LN fails at 0.1 in seeds 0 and 1 (limit 3e-2 there,
    # 0.1 elsewhere): higher in 2 seeds, the same in 3, p = 1/4 (the standard run of 2026-11-25 at 0.5: Pre-LN 3 of
    # 5 trained, Peri-LN 5 of 5)
    def check(v):
        assert "not significant at α = 0.05 (sign test p = 0.25): more seeds would decide" in v.summary
        assert v.details["did_not_train_rate"] == approx({"peri": 2 / 20, "pre": 2 / 20})
        assert _limits(v) == {"peri": {str(s): 0.1 for s in range(5)},
                              "pre": {"0": 3e-2, "1": 3e-2, "2": 0.1, "3": 0.1, "4": 0.1}}
        assert (v.details["limits_paired"]["a_higher"], v.details["limits_paired"]["ties"]) == (2, 3)
    return Case(_c14({"peri": {(1e-2, 0, 4): {0}, (3e-2, 0, 4): {1}}, "pre": {(0.1, 0, 4): {0, 1}},
                      "post": {(3e-2, 0, 4), (0.1, 0, 4)}}, seeds=range(5)), preset=P14, check=check)


# Peri-LN fails at 3e-2 and 0.1 in every seed, Pre-LN in seeds {0, 2} and {0, 2, 3}
PERI_WORSE = {"peri": {(3e-2, 0, 4), (0.1, 0, 4)}, "pre": {(3e-2, 0, 4): {0, 2}, (0.1, 0, 4): {0, 2, 3}},
              "post": {(1e-2, 0, 4), (3e-2, 0, 4), (0.1, 0, 4)}}


@scenario("C14", INCONCLUSIVE, 0 / 5)
def peri_fails_more_often_in_three_seeds():
    # Peri-LN fails in 10 of its 20 runs, Pre-LN in 5: 5 discordant (lr, seed) pairs, all Peri-LN's, which as
    # independent pairs gave p = 1/32 (before issue 32: does not hold). They share seeds: one outcome per seed gives
    # Peri-LN 1e-2 in every seed, Pre-LN 1e-2, 0.1, 1e-2, 3e-2, 0.1 — lower in 3 seeds, the same in 2, p = 1/8
    def check(v):
        paired = v.details["limits_paired"]
        assert (paired["a_higher"], paired["b_higher"], paired["ties"], paired["lower"]) == (0, 3, 2, False)
        assert paired["p_lower"] == approx(1 / 8)
        assert _limits(v)["pre"] == {"0": 1e-2, "1": 0.1, "2": 1e-2, "3": 3e-2, "4": 0.1}
        assert v.details["did_not_train_rate"] == approx({"peri": 10 / 20, "pre": 5 / 20})
        assert v.details["max_stable_lr_no_warmup"] == {"peri": 1e-2, "pre": 1e-2}
    return Case(_c14(PERI_WORSE, seeds=range(5)), preset=P14, check=check)


@scenario("C14", INCONCLUSIVE, 0 / 2)
def peri_fails_more_often_in_two_seeds():
    # the same pattern at seeds 0 and 1: seed 0 ties at 1e-2, seed 1 is lower (1e-2 against 0.1), p = 1/2
    def check(v):
        paired = v.details["limits_paired"]
        assert (paired["b_higher"], paired["ties"], paired["p_lower"]) == (1, 1, approx(0.5))
    return Case(_c14(PERI_WORSE), preset=P14, check=check)


@scenario("C14", FAILS, 0 / 5)
def peri_fails_to_train_where_pre_trains():
    # failing to train (stuck on the unigram plateau to the end) counts with divergence: Peri-LN stuck at lr 0.1 in
    # every seed, where Pre-LN trains (Post-LN diverges there): lower in 5 of 5 seeds, p = 1/32
    def check(v):
        assert v.details["did_not_train_rate"] == approx({"peri": 5 / 20, "pre": 0.0})
        assert _limits(v) == {"peri": {str(s): 3e-2 for s in range(5)}, "pre": {str(s): 0.1 for s in range(5)}}
        assert v.details["limits_paired"]["lower"] and v.details["limits_paired"]["p_lower"] == approx(1 / 32)
        assert v.reading == ("Peri-LN's highest trainable lr without warmup is above Pre-LN's in 0 of 5 seeds and "
                             "below it in 5 (sign test p = 0.0312)")
    return Case(_c14({"post": {(0.1, 0, 4)}}, stuck={"peri": {(0.1, 0, 4)}}, seeds=range(5)), preset=P14,
                check=check)


@scenario("C14", INCONCLUSIVE, 0 / 5)
def peri_lower_limit_in_two_seeds():
    # Peri-LN stuck at lr 0.1 in seeds 0 and 1: lower in 2 seeds, the same in 3 (p = 1/4)
    def check(v):
        assert v.details["max_stable_lr_no_warmup"] == {"peri": 3e-2, "pre": 0.1}  # the 80 % threshold: below
        assert not v.details["limits_paired"]["lower"] and v.details["limits_paired"]["b_higher"] == 2
    return Case(_c14({}, stuck={"peri": {(0.1, 0, 4): {0, 1}}}, seeds=range(5)), preset=P14, check=check)


@scenario("C14", INCONCLUSIVE, 0 / 2)
def nothing_diverges():
    # as stable as Pre-LN at every lr tried: no room here to show a further stabilizer; larger lrs would decide
    def check(v):
        assert v.details["max_stable_lr_no_warmup"] == {"peri": 0.1, "pre": 0.1}
        assert ("the same highest trainable lr in all 2 seeds, as stable as Pre-LN on this grid: lrs above 0.1 "
                "would decide") in v.summary
    return Case(_c14({}), preset=P14, check=check)


@scenario("C14", INCONCLUSIVE, 0 / 2)
def both_fail_at_the_top_lr_alike():
    # both train up to 3e-2 and fail at 0.1 in every seed (the standard run of 2026-11-25 at 0.3 and 1): the same
    # limit in every seed; what decides is an lr between the two, not one above the top
    def check(v):
        assert v.details["max_stable_lr_no_warmup"] == {"peri": 3e-2, "pre": 3e-2}
        assert "lrs between the grid's, or more seeds, would decide" in v.summary
    return Case(_c14({"peri": {(0.1, 0, 4)}, "pre": {(0.1, 0, 4)}}), preset=P14, check=check)


@scenario("C14", INCONCLUSIVE, 0 / 2)
def both_fail_everywhere():
    # neither scheme trains at any of C14's lrs: every seed's limit is "none"; only lower lrs can show one
    def check(v):
        assert v.details["max_stable_lr_no_warmup"] == {"peri": None, "pre": None}
        assert _limits(v) == {"peri": {"0": 0.0, "1": 0.0}, "pre": {"0": 0.0, "1": 0.0}}
        assert "seed 0: Peri-LN none, Pre-LN none" in v.summary and "lrs below 0.003 would decide" in v.summary
    return Case(_c14({"peri": set(C14_CELLS), "pre": set(C14_CELLS)}), preset=P14, check=check)


@scenario("C14", INCONCLUSIVE, 0 / 2)
def nothing_diverges_without_stress_lrs():
    # a preset without stress lrs (the unit preset P, as quick): C14's lr is only the grid's top, 1e-2, where nobody
    # fails; Peri-LN's divergences at 3e-2 and 0.1 are runs this preset's C14 does not run, and are not counted
    def check(v):
        assert v.settings["lrs"] == [1e-2]
        assert v.details["did_not_train_rate"] == approx({"peri": 0.0, "pre": 0.0})
        assert _limits(v) == {"peri": {"0": 1e-2, "1": 1e-2}, "pre": {"0": 1e-2, "1": 1e-2}}
        assert "lrs above 0.01 would decide" in v.summary
    return Case(_c14({"peri": {(3e-2, 0, 4), (0.1, 0, 4)}}), preset=P, check=check)


@scenario("C14", INCONCLUSIVE, 1 / 1)
def c14_single_seed():
    # one seed per scheme: one paired outcome says nothing (even though only Peri-LN trains at 0.1)
    def check(v):
        assert "1 seeds with both limits known (0 unknown: a run censored by the plateau stop or missing): more seeds would decide" in v.summary
    return Case(_c14({"pre": {(0.1, 0, 4)}, "post": {(0.1, 0, 4)}}, seeds=(0,)), preset=P14, check=check)


@scenario("C14", INCONCLUSIVE, None)
def c14_no_pre_records():
    # no Pre-LN runs to compare Peri-LN with
    def check(v):
        assert v.details["did_not_train_rate"]["pre"] is None and v.details["limits_paired"]["seeds"] == []
    return Case(_c14({"post": {(0.1, 0, 4)}}, schemes=("peri", "post")), preset=P14, check=check)


@scenario("C14", HOLDS, 5 / 5)
def censored_runs_leave_their_seed_out_only_above_its_limit():
    # 6 seeds. Pre-LN fails at 0.1 in seeds 0–4; seed 5's run there was stopped on the plateau: above its highest
    # trained lr (3e-2), so its limit is unknown and seed 5 is left out. Peri-LN's seed 0 was stopped at 1e-2, below
    # the 0.1 it trained at: its limit stands. 5 paired seeds, higher in 5 (p = 1/32)
    def check(v):
        assert v.details["censored"] == {"peri": 1, "pre": 1}
        assert v.details["did_not_train_rate"] == approx({"peri": 0 / 23, "pre": 5 / 23})  # censored: not counted
        assert _limits(v)["peri"]["0"] == 0.1 and _limits(v)["pre"]["5"] is None
        assert v.details["limits_paired"]["censored_seeds"] == [5] and v.seeds == [0, 1, 2, 3, 4]
        assert "(censored by the plateau stop: Peri-LN 1, Pre-LN 1)" in v.summary
        assert "seed 5: Peri-LN 0.1, Pre-LN censored" in v.summary
    return Case(_c14({"pre": {(0.1, 0, 4): {0, 1, 2, 3, 4}}}, seeds=range(6),
                     censored={"pre": {(0.1, 0, 4): {5}}, "peri": {(1e-2, 0, 4): {0}}}), preset=P14, check=check)


@scenario("C14", INCONCLUSIVE, 3 / 3)
def pre_failures_partly_censored():
    # Pre-LN at 0.1: diverged in seeds 0–2, stopped on the plateau in seeds 3 and 4. Counted as failures they would
    # make 5 of 5 (holds); censored, seeds 3 and 4 have no known limit: 3 of 3, p = 1/8
    def check(v):
        paired = v.details["limits_paired"]
        assert (paired["a_higher"], paired["seeds"], paired["censored_seeds"]) == (3, [0, 1, 2], [3, 4])
        assert "not significant at α = 0.05 (sign test p = 0.125): more seeds would decide" in v.summary
    return Case(_c14({"pre": {(0.1, 0, 4): {0, 1, 2}}}, seeds=range(5), censored={"pre": {(0.1, 0, 4): {3, 4}}}),
                preset=P14, check=check)



test_verdict, test_verdict_and_figures_are_json_serializable = table_tests(scenario)


# =========================================================================================
# The power plan on a failure split: what Holm over the standard preset's 16 claims asks of C4 (study/power.py)
# =========================================================================================
def test_c4s_five_of_five_is_underpowered_under_holm_and_ten_of_ten_decides_at_the_last_look():
    from normlab.report.outcome import UNDERPOWERED
    from normlab.study.claims import CLAIMS
    from normlab.study.claims.statistics import ALPHA, Level
    from normlab.study.power import explain, leans, shares

    strictest = ALPHA / 16  # Holm's first step over the standard preset's claims
    plan = shares("sign", [5, 10], 16)
    assert plan == (0.1, 0.9)
    five_fail = _c4({2: five(1.915), 4: five(1.955), 8: [None] * 5}, PRE5)
    first = CLAIMS.get("C4")(Level(strictest, (1, 2), plan)).judge(five_fail, None, P)
    assert first.verdict == INCONCLUSIVE and leans(first)  # 5 of 5 leans, but 1/32 is far from 0.0003
    first = explain(first, strictest * plan[1])  # what its last look could reach
    assert (first.why, first.needed) == (UNDERPOWERED, 9)  # 2⁻⁹ = 0.00195 < 0.0028
    ten = [1.915 + 0.001 * s for s in range(10)]
    ten_fail = _c4({2: ten, 4: ten, 8: [None] * 10}, {d: [1.905 + 0.001 * s for s in range(10)] for d in P.depths})
    last = CLAIMS.get("C4")(Level(strictest, (2, 2), plan)).judge(ten_fail, None, P)
    assert last.verdict == HOLDS  # 2⁻¹⁰ = 0.00098 < 0.05/16 × 0.9
    # under the old spending (0.7, 0.3) the same 10 of 10 could not decide: 0.00098 > 0.05/16 × 0.3
    assert CLAIMS.get("C4")(Level(strictest, (2, 2))).judge(ten_fail, None, P).verdict == INCONCLUSIVE
