"""The statistics behind where a verdict holds (issue 32): runs censored by the plateau stop, the one test a contrast
makes (failures or losses, chosen by the number of discordant seeds), Holm's step-down over the study's claims,
`depends on <factor>`, the per-seed limits of C14 and the per-seed deficit of C4. Synthetic records only."""
from __future__ import annotations

import dataclasses

import math

import pytest

from normlab.report.outcome import DEPENDS, OUTCOMES, outcome_counts, outcome_of
from normlab.study.claims import FAILS, HOLDS, INCONCLUSIVE, Verdict
from normlab.study.claims.base import decisive
from normlab.study.claims.decisions import by_failures, not_worse, same, worse
from normlab.study.claims.grouping import group_record, failures, group
from normlab.study.claims.statistics import ALPHA, Level, sign_test
from normlab.study.claims.sweeps import deeper_deficit, paired_limits, seed_limits
from normlab.study.rules import family_text
from normlab.study.family import holm
from normlab.study.scope import scope_verdict
from tests.study.scenarios import LRS, PLATEAU, PLATEAU_REASON, STUCK, P, W, five, rec, runs

ALONE = Level()  # a claim alone at a single look: every decision at α = 0.05


# -- censoring: a run the plateau stop ended early is neither a failure nor a loss -------------------------------
def test_only_a_plateau_stopped_failure_is_censored():
    assert rec(status="failed_to_train", reason=PLATEAU_REASON).censored
    assert not rec(status="failed_to_train").censored  # stuck to the end of its budget: a failure
    assert not rec(status="failed_to_train", reason="on the unigram plateau at the end").censored
    assert not rec(status="diverged", reason=PLATEAU_REASON).censored
    assert not rec(status="completed", reason=PLATEAU_REASON).censored


def test_group_counts_censored_runs_apart():
    g = group(runs([1.9, None, STUCK, PLATEAU, 1.91, PLATEAU]))
    assert (g.n_runs, g.n_diverged, g.n_failed_to_train, g.n_censored) == (4, 1, 1, 2)
    assert (g.losses, g.seeds) == ([1.9, 1.91], [0, 4])
    assert g.outcomes == {0: True, 1: False, 2: False, 4: True}  # seeds 3 and 5 say nothing either way
    assert g.failure_rate == 0.5  # 2 of the 4 runs that count, not 2 of 6 nor 4 of 6
    assert failures(g) == "1 diverged + 1 failed to train of 4; 2 stopped on the plateau, censored"
    assert group_record(g)["n_censored"] == 2 and group_record(g)["n_runs"] == 4


def test_failures_text_names_censored_runs_only_where_there_are_some():
    assert failures(group(runs([1.9, PLATEAU]))) == "0/1 did not train; 1 stopped on the plateau, censored"
    assert failures(group(runs([1.9, 1.9]))) == "0/2 did not train"


# -- one test per contrast, chosen by the number D of discordant seeds -----------------------------------------
def _failed(only_a: int, only_b: int, paired: bool = True) -> dict:
    return {"only_a_failed": only_a, "only_b_failed": only_b,
            "p_one_sided": sign_test(max(only_a, only_b), only_a + only_b) if paired else None}


@pytest.mark.parametrize("only_a, only_b, two_sided, decides", [
    (5, 0, False, True),  # ½^5 = 1/32 = 0.031 < 0.05
    (0, 5, False, True),  # D alone chooses, not which way the failures fell
    (3, 2, False, True),  # D = 5: the failures decide, even though 3–2 proves nothing
    (4, 0, False, False),  # ½^4 = 0.0625: the failures can never reach 0.05 at D = 4
    (1, 0, False, False),  # one discordant seed leaves it to the losses
    (0, 0, False, False),
    (5, 0, True, False),  # two-sided: 2/32 = 0.0625
    (6, 0, True, True),  # two-sided: 2/64 = 0.031
])
def test_by_failures_is_chosen_by_the_number_of_discordant_seeds(only_a, only_b, two_sided, decides):
    assert by_failures(_failed(only_a, only_b), ALONE, two_sided=two_sided) is decides


def test_by_failures_needs_paired_runs_and_follows_its_level():
    assert not by_failures(_failed(5, 0, paired=False), ALONE)  # counts, not a sign test: never the failures' test
    assert not by_failures(_failed(5, 0), Level(0.01))  # 1/32 > 0.01
    assert by_failures(_failed(7, 0), Level(0.01))  # 1/128 < 0.01


def test_levels_compose_a_holm_step_with_a_looks_share():
    assert ALONE.alpha == ALPHA
    assert Level(0.01).alpha == 0.01
    assert Level(0.01, look=(1, 2)).alpha == pytest.approx(0.007)  # 0.7 of the step's level


def _arm(losses, warmup: int):
    """A Post-LN arm at one warmup, one run per seed, as its group."""
    return group(runs(losses, scheme="post", warmup=warmup), scheme="post", warmup_steps=warmup)


def test_worse_decided_by_failures_where_d_is_large_whatever_the_losses_say():
    # 8 seeds: a fails in 0–2, b in 3 and 4 (D = 5), and where both trained (5–7) a is 0.2 worse. The failures
    # are the one test (3–2, p = 1/2): inconclusive, though the losses alone would say "worse"
    a = _arm([None, None, None, 2.1, 2.1, 2.105, 2.11, 2.095], 0)
    b = _arm([1.9, 1.9, 1.9, None, None, 1.905, 1.91, 1.895], W)
    c = worse(a, b, ALONE)
    assert c.outcome == "worse" and c.verdict == INCONCLUSIVE
    assert (c.failed["only_a_failed"], c.failed["only_b_failed"]) == (3, 2)


def test_worse_decided_by_losses_where_one_seed_is_discordant():
    a, b = _arm([None] + five(2.105, 0.001)[1:], 0), _arm(five(1.905), W)
    c = worse(a, b, ALONE)
    assert not by_failures(c.failed, ALONE) and c.outcome == "worse" and c.verdict == HOLDS


def test_five_of_five_failures_decide_at_005_not_at_001():
    a, b = _arm([None] * 5, 0), _arm(five(1.905), W)
    assert worse(a, b, ALONE).verdict == HOLDS and not_worse(a, b, ALONE).verdict == FAILS
    step = Level(0.01)  # a Holm step's level: 1/32 no longer reaches it, and no loss can be compared
    assert worse(a, b, step).verdict == INCONCLUSIVE and not_worse(a, b, step).verdict == INCONCLUSIVE


def test_same_is_two_sided_on_failures():
    assert same(_arm([None] * 5, 0), _arm(five(1.905), W), ALONE).verdict == INCONCLUSIVE  # 2/32 > 0.05
    c = same(_arm([None] * 6, 0), _arm(five(1.905) + [1.9], W), ALONE)
    assert c.verdict == FAILS and c.failed["more"]  # 1/64 < 0.025, the level a side


# -- Holm's step-down over the study's claims ------------------------------------------------------------------
def _v(cid: str, verdict: str, depends_on: tuple[str, ...] = ()) -> Verdict:
    return Verdict(cid, verdict, "x", None, 5, {}, summary=f"{cid}: as measured", depends_on=list(depends_on))


# the lowest level at which each toy claim is decisive: A measures something exact (every level); B and C are
# decisive from Holm's second and third steps' levels on; D only at α alone; E never
M = 5
THRESHOLD = {"A": 0.0, "B": ALPHA / (M - 1), "C": ALPHA / (M - 2), "D": ALPHA, "E": math.inf}


def _judge(calls: list, verdict: str = HOLDS):
    def judge_at(claim: str, level: float) -> Verdict:
        calls.append((claim, level))
        return _v(claim, verdict if level >= THRESHOLD[claim] else INCONCLUSIVE)
    return judge_at


def test_holm_steps_down_until_a_step_decides_nothing():
    calls: list = []
    out = holm(list(THRESHOLD), _judge(calls))
    levels = [ALPHA / 5, ALPHA / 4, ALPHA / 3, ALPHA / 2]  # 0.01, 0.0125, 0.0167, 0.025
    assert calls == ([(c, ALPHA) for c in "ABCDE"] + [(c, levels[0]) for c in "ABCDE"]
                     + [(c, levels[1]) for c in "BCDE"] + [(c, levels[2]) for c in "CDE"]
                     + [(c, levels[3]) for c in "DE"])
    assert {c: (v.verdict, v.family["step"], v.family["level"]) for c, v in out.items()} == {
        "A": (HOLDS, 1, 0.01), "B": (HOLDS, 2, 0.0125), "C": (HOLDS, 3, round(ALPHA / 3, 12)),
        "D": (INCONCLUSIVE, None, 0.025), "E": (INCONCLUSIVE, None, 0.025)}
    assert all(v.family["m"] == 5 and v.family["alpha"] == ALPHA for v in out.values())
    assert out["D"].family["alone"] == HOLDS and out["E"].family["alone"] == INCONCLUSIVE
    assert out["A"].family["method"] == "Holm's step-down over the study's 5 claims at family-wise α = 0.05"


def test_a_claim_decisive_alone_but_at_no_step_says_so():
    out = holm(list(THRESHOLD), _judge([]))
    assert out["D"].summary == ("D: as measured; holds at α = 0.05 alone, not at the family level 0.025 (Holm over 5 "
                                "claims): more seeds would decide")
    assert out["E"].summary == "E: as measured" and out["A"].summary == "A: as measured"


def test_a_claim_whose_open_part_is_a_timing_asks_for_timing_rounds():
    """C10's cost is timed over rounds: decisive alone but at no Holm step, more seeds would not decide it."""
    def judge_at(claim: str, level: float) -> Verdict:
        v = _v(claim, HOLDS if level >= ALPHA else INCONCLUSIVE)
        return dataclasses.replace(v, parts=[{"name": "cost", "verdict": v.verdict, "rounds": 9},
                                             {"name": "loss", "verdict": HOLDS}])
    out = holm(["A", "B"], judge_at)
    assert out["A"].summary.endswith("(Holm over 2 claims): more timing rounds would decide")


def test_an_exact_claim_is_decided_at_the_first_step():
    out = holm(["A", "E"], _judge([], FAILS))
    assert (out["A"].verdict, out["A"].family["step"], out["A"].family["level"]) == (FAILS, 1, ALPHA / 2)


def test_the_last_claim_left_is_judged_at_alpha_without_judging_it_again():
    calls: list = []
    out = holm(["A", "D"], _judge(calls))
    assert calls == [("A", ALPHA), ("D", ALPHA), ("A", ALPHA / 2), ("D", ALPHA / 2)]  # step 2's level is α itself
    assert (out["D"].verdict, out["D"].family["step"], out["D"].family["level"]) == (HOLDS, 2, ALPHA)


def test_a_depends_on_verdict_is_decided_by_its_verdict_at_its_own_levels():
    out = holm(["X"], lambda c, level: _v(c, HOLDS, depends_on=("init",)))
    assert out["X"].outcome.text == "depends on init" and out["X"].family["step"] == 1
    assert out["X"].to_dict()["verdict"] == "depends on init" and out["X"].to_dict()["primary"] == HOLDS


def test_the_family_in_words_and_the_four_outcomes_counted_apart():
    out = holm(list(THRESHOLD), _judge([]))
    assert family_text(list(out.values())).startswith("Holm's step-down over the study's 5 claims at family-wise "
                                                      "α = 0.05: a claim is decided at α/(m − j)")
    assert family_text([_v("A", HOLDS)]) == "not controlled"
    verdicts = [_v("A", HOLDS), _v("B", FAILS, ("init", "width")), _v("C", FAILS), _v("D", INCONCLUSIVE)]
    assert outcome_counts([v.to_dict() for v in verdicts]) == {**{o: 1 for o in OUTCOMES}, "holds where judged": 0,
                                        "does not hold where judged": 0}


# -- where a verdict holds: `depends on <factor>` --------------------------------------------------------------
def test_opposite_decisive_verdicts_across_levels_depend_on_the_factor():
    v = _v("C13", HOLDS)
    v = scope_verdict(v, {"init": {"gpt2": HOLDS, "xiong": FAILS}}, [])
    assert (v.outcome.text, v.verdict, v.depends_on) == ("depends on init", HOLDS, ["init"])
    assert v.scope == {"init": {"gpt2": HOLDS, "xiong": FAILS}}
    assert outcome_of(v.to_dict()).kind == DEPENDS and not decisive(v.outcome.kind)  # never counted as holds
    assert v.summary == "C13: as measured; where it holds: init: holds under gpt2, does not hold under xiong"


def test_every_factor_that_splits_is_named():
    v = _v("C7", FAILS)
    v = scope_verdict(v, {"init": {"xiong": FAILS, "gpt2": HOLDS}, "context": {"32 tokens": FAILS, "64 tokens": FAILS},
                      "width": {"d 64": FAILS, "d 128": HOLDS}}, [])
    assert (v.outcome.text, v.verdict) == ("depends on init, width", FAILS)


def test_an_inconclusive_level_narrows_the_scope_without_overturning_the_verdict():
    v = _v("C1", HOLDS)
    v = scope_verdict(v, {"context": {"32 tokens": HOLDS, "64 tokens": INCONCLUSIVE}}, [])
    assert (v.outcome.text, v.verdict) == (HOLDS, HOLDS)
    assert v.scope == {"context": {"32 tokens": HOLDS, "64 tokens": INCONCLUSIVE}}
    # decisive where judged, counted apart from a verdict decisive under every level measured
    assert v.outcome.open_levels == ("64 tokens",) and v.outcome.total_key == "holds where judged"
    assert not v.outcome.complete
    assert v.summary.endswith("; where it holds: context: holds under 32 tokens, inconclusive under 64 tokens")


def test_a_level_that_could_not_be_judged_overturns_nothing():
    v = _v("C1", HOLDS)
    v = scope_verdict(v, {"width": {"d 64": HOLDS, "d 128": "error: no runs"}}, [])
    assert v.verdict == HOLDS and v.scope["width"]["d 128"] == "error: no runs"


def test_factors_a_claims_own_runs_fix_are_recorded():
    v = _v("C8", FAILS)
    v = scope_verdict(v, {}, ["context"])
    assert v.scope == {"context": {"its own runs' level (not varied)": FAILS}}
    # the factor was not varied for this claim, and its summary says so
    assert (v.outcome.text, v.verdict, v.summary) == (
        FAILS, FAILS, "C8: as measured; where it holds: context: does not hold under its own runs' level (not varied)")
    v = _v("C8", FAILS)
    v = scope_verdict(v, {"width": {"d 64": FAILS, "d 128": FAILS}}, ["context"])
    assert v.verdict == FAILS and v.scope["context"] == {"its own runs' level (not varied)": FAILS}


# -- C14: one outcome per seed --------------------------------------------------------------------------------
def _run(seed: int, lr: float, outcome: str, **kw):
    """A Pre-LN run of C14's sweep (no warmup, 4 layers): "ok" trained, "div" diverged, "plateau" censored."""
    status = {"ok": "completed", "div": "diverged", "plateau": "failed_to_train"}[outcome]
    return rec(scheme="pre", lr=lr, warmup=0, n_layer=4, seed=seed, status=status,
               val_loss={"ok": 1.9, "div": None, "plateau": 3.34}[outcome],
               **({"reason": PLATEAU_REASON} if outcome == "plateau" else {}), **kw)


def test_seed_limits_are_each_seeds_highest_trained_lr_unless_censored_above_it():
    lo, mid, hi = LRS  # 1e-3, 3e-3, 1e-2
    table = {0: ("ok", "ok", "div"),  # 3e-3
             1: ("ok", "plateau", "div"),  # trained at 1e-3, unknown at 3e-3: its limit is unknown
             2: ("plateau", "ok", "div"),  # censored below its highest trained lr: 3e-3 stands
             3: ("div", "div", "div"),  # trained at none: 0
             4: ("ok", "ok", None),  # no run at 1e-2: unknown
             5: ("ok", "div", "ok")}  # the highest lr it trained at, though it failed below: 1e-2
    records = [_run(seed, lr, o) for seed, row in table.items() for lr, o in zip(LRS, row) if o]
    # other claims' runs: with warmup, and at 8 layers, where seed 0 trains at 1e-2; never C14's
    records += [rec(scheme="pre", lr=hi, warmup=W, n_layer=4, seed=0), rec(scheme="pre", lr=hi, warmup=0, n_layer=8,
                                                                           seed=0)]
    assert seed_limits(records, "pre", LRS, 0, 4) == {0: mid, 1: None, 2: mid, 3: 0.0, 4: None, 5: hi}
    assert seed_limits(records, "pre", [lo, mid], 0, 4) == {0: mid, 1: None, 2: mid, 3: 0.0, 4: mid, 5: lo}


def test_paired_limits_count_seeds_and_leave_unknown_ones_out():
    a = {0: 0.1, 1: 0.03, 2: 0.03, 3: None, 4: 0.1}
    b = {0: 0.03, 1: 0.03, 2: 0.1, 3: 0.03, 5: 0.1}
    p = paired_limits(a, b, ALONE)
    assert (p["a_higher"], p["b_higher"], p["ties"], p["seeds"], p["censored_seeds"]) == (1, 1, 1, [0, 1, 2], [3, 4, 5])
    assert p["p_higher"] == p["p_lower"] == pytest.approx(3 / 4) and not p["higher"] and not p["lower"]
    assert p["test"].startswith("exact sign test over the 2 of 3 seeds whose highest trainable lr differs")


def test_paired_limits_decide_at_five_of_five_and_not_at_four():
    five_up = paired_limits({s: 0.1 for s in range(5)}, {s: 0.03 for s in range(5)}, ALONE)
    assert five_up["higher"] and five_up["p_higher"] == pytest.approx(1 / 32)
    four_up = paired_limits({s: 0.1 for s in range(5)}, {0: 0.1, 1: 0.03, 2: 0.03, 3: 0.03, 4: 0.03}, ALONE)
    assert (four_up["a_higher"], four_up["ties"], four_up["higher"]) == (4, 1, False)  # 1/16: ties do not count
    at_01 = paired_limits({s: 0.1 for s in range(5)}, {0: 0.1, 1: 0.03, 2: 0.03, 3: 0.03, 4: 0.03}, Level(0.1))
    assert at_01["higher"]
    ties = paired_limits({s: 0.1 for s in range(5)}, {s: 0.1 for s in range(5)}, ALONE)
    assert (ties["ties"], ties["p_higher"], ties["higher"], ties["lower"]) == (5, 1.0, False, False)


# -- C4: Post-LN's deficit to Pre-LN, per seed, at the shallowest and the deepest depth ------------------------
def _depth(scheme: str, depth: int, seed: int, loss):
    """A run of the depth sweep (lr_fixed with warmup): a loss, None diverged, PLATEAU censored."""
    status = "diverged" if loss is None else "failed_to_train" if loss == PLATEAU else "completed"
    return rec(scheme=scheme, n_layer=depth, seed=seed, status=status, val_loss=None if loss in (None, PLATEAU) else loss,
               **({"reason": PLATEAU_REASON} if loss == PLATEAU else {}))


def test_deeper_deficit_with_infinite_deficits():
    # seed: ((post, pre) at 2 layers, (post, pre) at 8 layers)
    table = {0: ((1.91, 1.90), (None, 1.90)),  # 0.01 → +∞: larger
             1: ((1.91, 1.90), (1.95, None)),  # 0.01 → −∞ (Pre-LN alone failed): smaller
             2: ((1.91, 1.90), (None, None)),  # both failed at 8: no deficit, left out
             3: ((1.91, 1.90), (PLATEAU, 1.90)),  # censored at 8: left out
             4: ((None, 1.90), (None, 1.90)),  # +∞ at both: the same, a tie
             5: ((1.91, 1.90), (2.10, 1.90))}  # 0.01 → 0.2: larger
    records = [_depth(s, d, seed, loss) for seed, cells in table.items()
               for d, pair in zip((2, 8), cells) for s, loss in zip(("post", "pre"), pair)]
    g = deeper_deficit(records, P, 2, 8, ALONE)
    assert (g["up"], g["down"], g["n"], g["seeds"], g["depths"]) == (2, 1, 4, [0, 1, 4, 5], [2, 8])
    assert g["p_up"] == pytest.approx(sign_test(2, 3)) == pytest.approx(0.5) and not g["harder"] and not g["easier"]
    assert "(3 of 4), one-sided" in g["test"]


def test_deeper_deficit_is_harder_when_post_ln_alone_fails_deep_in_five_seeds():
    records = [_depth(s, d, seed, None if (s, d) == ("post", 8) else 1.9 + 0.01 * (s == "post"))
               for seed in range(5) for d in (2, 4, 8) for s in ("post", "pre")]
    g = deeper_deficit(records, P, 2, 8, ALONE)
    assert (g["up"], g["down"], g["harder"]) == (5, 0, True) and g["p_up"] == pytest.approx(1 / 32)


def test_censored_runs_never_lift_a_configuration_to_trains():
    # one trained seed beside four censored ones: the uncensored runs alone would read 1 of 1 trained; a limit
    # counts the censored runs in its denominator, so this lr is not one the configuration is known to train at
    from normlab.study.claims.sweeps import trains

    lr = LRS[2]
    censored = [_run(0, lr, "ok")] + [_run(s, lr, "plateau") for s in range(1, 5)]
    g = group(censored, scheme="pre", lr=lr, warmup_steps=0)
    assert (g.n_runs, g.n_censored, g.n_failed) == (1, 4, 0)
    assert not trains(g)
    known = [_run(s, lr, "ok") for s in range(4)] + [_run(4, lr, "plateau")]
    assert trains(group(known, scheme="pre", lr=lr, warmup_steps=0))  # 4 of 5 known: 80 %
