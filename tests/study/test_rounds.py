"""Sequential seed rounds: the looks' levels (Bonferroni over a fixed schedule), which verdicts get more seeds,
and a study that adds a round for one claim while a claim sharing its runs keeps its own seeds."""
from __future__ import annotations

import dataclasses
import json

import pytest

from normlab.study.claims import CLAIMS, FAILS, HOLDS, INCONCLUSIVE, Verdict
from normlab.study.claims.decisions import compare, fails_more
from normlab.study.claims.grouping import Group
from normlab.study.claims.prose import pct
from normlab.study.claims.statistics import (ALPHA, SPENDING, Level, OpenInterval, look_alpha, sign_evidence,
                                             t_interval)
from normlab.study.load import load_study
from normlab.study.presets import HELD_OUT, PRESETS
from tests.conftest import judged_study


@pytest.mark.parametrize("looks", sorted(SPENDING))
def test_the_looks_of_a_schedule_spend_exactly_alpha(looks):
    # the union bound: a false decision at any look has probability at most the sum of the looks' levels
    assert sum(look_alpha(k, looks) for k in range(1, looks + 1)) == pytest.approx(ALPHA)


def test_two_looks_spend_0035_then_0015_and_the_5_0_sign_test_still_decides_at_the_first():
    assert look_alpha(1, 2) == pytest.approx(0.035) and look_alpha(2, 2) == pytest.approx(0.015)
    failed = Group([], 5, 0, 5, seeds=[], outcomes={s: False for s in range(5)})
    trained = Group([2.0] * 5, 5, 0, 0, seeds=list(range(5)), outcomes={s: True for s in range(5)})
    assert fails_more(failed, trained, Level())["p_one_sided"] == pytest.approx(1 / 32)
    assert fails_more(failed, trained, Level(look=(1, 2)))["more"]  # 1/32 = 0.031 < 0.035
    # 0.031 > 0.015: the second look needs more discordant seeds
    assert not fails_more(failed, trained, Level(look=(2, 2)))["more"]
    # three looks spend 0.03 first: 5-0 (0.031) would not decide, why the standard preset has two
    assert not fails_more(failed, trained, Level(look=(1, 3)))["more"]


def test_a_look_widens_every_interval_to_its_level_and_a_single_look_keeps_alpha():
    values = [0.1, 0.3, 0.2, 0.25, 0.15]
    first = Level(look=(1, 2))
    assert first.alpha == pytest.approx(0.035) and first.two_sided == pytest.approx(0.965)
    assert first.tost == pytest.approx(0.93) and pct(first.two_sided) == "96.5 %"
    single, wider = t_interval(values, Level().two_sided), t_interval(values, first.two_sided)
    assert wider[0] < single[0] and wider[1] > single[1]
    assert Level().alpha == ALPHA and pct(Level().two_sided) == "95 %" and pct(Level().tost) == "90 %"
    with pytest.raises(ValueError, match="no spending schedule for 4 looks"):
        Level(look=(1, 4))


def test_a_paired_comparison_that_decides_at_one_look_can_be_undecided_at_the_first_of_two():
    # a paired difference of 0.03 nats with a small spread: "worse" at 95 %, unclear at 96.5 % (t₄: 2.78 → 3.26)
    a = Group([2.03, 2.041, 2.035, 2.026, 2.043], 5, 0, seeds=[0, 1, 2, 3, 4])
    b = Group([2.0] * 5, 5, 0, seeds=[0, 1, 2, 3, 4])
    outcome, info = compare(a, b, Level())
    assert outcome == "worse" and info["levels"] == {"ci95": pytest.approx(0.95), "ci90": pytest.approx(0.90)}
    # paired differences 0.004 … 0.056 (mean 0.03): the 95 % interval's lower end is +0.0026, the 96.5 % one's −0.001
    a = Group([2.004, 2.056, 2.0127, 2.0473, 2.03], 5, 0, seeds=[0, 1, 2, 3, 4])
    one, info1 = compare(a, b, Level())
    two, info2 = compare(a, b, Level(look=(1, 2)))
    assert info2["ci95"][0] < info1["ci95"][0] and info2["levels"]["ci95"] == pytest.approx(0.965)
    assert (one, two) == ("worse", "unclear")


def _verdict(verdict, interval=None, parts=()):
    return Verdict("C1", verdict, "s", 0.0, 5, {}, interval=interval, parts=list(parts))


def test_only_an_inconclusive_verdict_whose_evidence_leans_gets_more_seeds():
    from normlab.study.power import leans

    assert leans(_verdict(INCONCLUSIVE, [-0.1, 0.2]))
    assert not leans(_verdict(INCONCLUSIVE))  # nothing to narrow (no run trained, no failure to count)
    assert not leans(_verdict(HOLDS, [0.1, 0.2])) and not leans(_verdict(FAILS, [-0.1, 0.2]))
    open_part = {"verdict": INCONCLUSIVE, "interval": [-0.5, 0.7]}
    assert leans(_verdict(INCONCLUSIVE, [0.1, 0.2], [{"verdict": HOLDS, "interval": [0.1, 0.2]}, open_part]))
    # the inconclusive part has no interval: more seeds promise nothing, whatever the decided part's interval
    assert not leans(_verdict(INCONCLUSIVE, [0.1, 0.2], [{"verdict": HOLDS, "interval": [0.1, 0.2]},
                                                         {"verdict": INCONCLUSIVE, "interval": None}]))


def _split(verdict, k, against, seeds=5, open_level=False):
    return dataclasses.replace(_verdict(verdict), evidence=sign_evidence(k, against, seeds, "a failure split",
                                                                         open=open_level))


def test_a_failure_split_leans_when_most_discordant_seeds_fall_one_way():
    from normlab.study.power import leans

    assert leans(_split(INCONCLUSIVE, 5, 0)) and leans(_split(INCONCLUSIVE, 3, 1))
    assert not leans(_split(INCONCLUSIVE, 2, 2)) and not leans(_split(INCONCLUSIVE, 0, 0))
    # a decisive verdict whose split is at an open level of its scope (C1 at an lr) still leans
    assert leans(_split(FAILS, 5, 0, open_level=True)) and not leans(_split(FAILS, 5, 0))


def test_the_plan_spends_alpha_where_an_exact_test_can_use_it():
    from normlab.study import power

    # 5 of 5 cannot reach 0.05/16 × 0.7 = 0.0022: the first look keeps 0.1 of α, the last 0.9
    assert power.shares("sign", [5, 10], 16) == (0.1, 0.9)
    assert power.shares("t", [5, 10], 16) == SPENDING[2]  # a continuous statistic has no floor
    assert power.shares("sign", [5], 16) is None
    assert power.floor("sign", 10) == 2 ** -10 and power.floor("t", 3) == 0.0
    with pytest.raises(ValueError, match="unknown test 'z'"):
        power.floor("z", 5)
    # 10 of 10 (p = 0.00098) now reaches Holm's strictest step over 16 claims at the last look (0.0028); under
    # the old (0.7, 0.3) it did not (0.00094): the C1 at lr 0.01
    last = Level(ALPHA / 16, (2, 2), (0.1, 0.9))
    assert last.alpha == pytest.approx(0.0028125) and 2 ** -10 < last.alpha
    assert 2 ** -10 > Level(ALPHA / 16, (2, 2)).alpha
    with pytest.raises(ValueError, match="summing to 1"):
        Level(ALPHA, (1, 2), (0.5, 0.6))


def test_the_standard_plan_reaches_every_level_at_its_last_look():
    from normlab.study import power

    plan = load_study("standard")
    rows = {r.claim: r for r in plan.power_plan}
    assert {c for c, r in rows.items() if r.test == "sign"} == {"C1", "C4", "C8", "C11", "C14"}
    assert all(rows[c].seeds == (5, 10) and rows[c].shares == (0.1, 0.9) for c in ("C1", "C4", "C8", "C11", "C14"))
    assert all(r.reachable == "yes" for r in rows.values())
    assert rows["C16"].test == "measured" and rows["C2"].seeds == (5,)
    assert "| C4 | sign | 5, 10 | 0.1, 0.9 | 0.031, 0.00098 |" in "\n".join(power.plan_text(list(rows.values())))


def test_about_k_seeds_needed_projects_the_split_and_the_interval():
    from normlab.study.power import needed

    # 5 of 5 at 5 seeds, every added seed discordant the same way: p < 0.0028 from 9 seeds (2⁻⁹ = 0.00195)
    assert needed(sign_evidence(5, 0, 5, "x"), 0.0028) == 9
    # 4 of 5 discordant seeds one way: the share holds, 0.8 of them
    assert needed(sign_evidence(4, 1, 5, "x"), 0.0028) > 10
    assert needed(sign_evidence(2, 2, 5, "x"), 0.05) is None  # no lean, no projection
    # an interval [−0.01, 0.03] at 5 seeds: centre 0.01, half 0.02: 4× the seeds to halve it past 0
    assert needed(_interval((-0.01, 0.03), 5), 0.05) == 20
    # a loss gap in nats must also clear the margin it straddles: [0.005, 0.025] is 0.005 from +0.02
    assert needed(_interval((0.005, 0.025), 5, "gap (nats)"), 0.05) == 20
    assert needed(_interval((0.1, 0.3), 5), 0.05) is None  # straddles nothing known
    # a loss gap past the margin is decided by excluding 0, not by clearing the margin it also straddles: C13's
    # held-out gap +0.025 [−0.002, 0.051] at 10 seeds: centre 0.0246, half 0.0266, (0.0266 / 0.0246)² × 10 → 12
    assert needed(_interval((-0.002032, 0.051158), 10, "gap (nats)"), 0.05) == 12


def _interval(interval, seeds, statistic="", bounds=(), unit="seeds", scale=""):
    return OpenInterval(interval, statistic, bounds, unit, seeds, scale)


def test_a_ratio_built_on_logs_is_projected_on_the_log_scale():
    """C10's design-seed norm time 0.67× [0.20, 1.42] over 9 timing rounds, decided against 0.98: on the log scale,
    where its interval was built, centre −0.629, half 0.980, 0.609 from log 0.98: (0.980 / 0.609)² × 9 → 24 rounds;
    read on the linear scale it would be 116."""
    from normlab.study.power import needed

    e = _interval((0.20, 1.42), 9, bounds=(0.98,), unit="timing rounds")
    assert needed(dataclasses.replace(e, scale="log"), 0.05) == 24
    assert needed(e, 0.05) == 116
    # a ratio with no bounds of its own is decided against 1: 0.629 from log 1, (0.980 / 0.629)² × 9 → 22
    assert needed(dataclasses.replace(e, scale="log", bounds=()), 0.05) == 22


def test_an_interval_is_projected_past_its_own_boundaries_not_past_zero():
    """A ratio is decided against 1 or a band's ends, an exponent against ½ and 1: `needed` narrows the interval
    past the boundaries it is decided against (`Part.bounds`, `details["bounds"]`), which 0 is not."""
    from normlab.study.power import evidence, needed

    # a timing ratio [0.80, 1.00] decided against 0.95: centre 0.90, half 0.10, 0.05 from it: 4× the rounds
    ratio = _interval((0.8, 1.0), 15, bounds=(0.95,))
    assert needed(ratio, 0.05) == 60
    assert needed(dataclasses.replace(ratio, bounds=()), 0.05) is None  # against 0 it straddles nothing
    # a verdict's own interval carries its bounds in details; an open part's in the part
    # C5's exponent [0.4, 1.2] straddles ½ and 1: centre 0.8, half 0.4, 0.2 from 1: 4× the seeds
    v = Verdict("C5", INCONCLUSIVE, "exponent", 0.8, 5, {}, interval=[0.4, 1.2], details={"bounds": [0.5, 1.0]})
    assert evidence(v).bounds == (0.5, 1.0) and needed(evidence(v), 0.05) == 20
    part = {"verdict": INCONCLUSIVE, "interval": [0.8, 1.0], "statistic": "time ratio", "bounds": [0.95],
            "rounds": 15}
    e = evidence(_verdict(INCONCLUSIVE, None, [part]))
    assert (e.unit, e.count, e.bounds) == ("timing rounds", 15, (0.95,))


def test_a_measurement_left_open_asks_for_timing_rounds_not_seeds():
    """C10's norm timing is an interval over timing rounds: a seed round adds none, so it does not lean, and its
    kind says what would decide it. An open part over seeds is read before it."""
    from normlab.report.outcome import UNDERPOWERED
    from normlab.study.power import evidence, explain, leans

    timing = {"verdict": INCONCLUSIVE, "interval": [0.8, 1.0], "statistic": "time ratio", "bounds": [0.95],
              "rounds": 15}
    v = _verdict(INCONCLUSIVE, None, [timing, {"verdict": HOLDS, "interval": [-0.01, 0.01]}])
    assert not leans(v)
    v = explain(v, 0.05)
    assert (v.why, v.needed, v.unit, v.unit_count) == (UNDERPOWERED, 60, "timing rounds", 15)
    assert v.outcome.why_text == "effect seen, not past the family-wise level at 15 timing rounds: about 60 needed"
    assert v.to_dict()["outcome"]["unit"] == "timing rounds"
    loss = {"verdict": INCONCLUSIVE, "interval": [-0.01, 0.03], "statistic": "gap (nats)"}
    both = _verdict(INCONCLUSIVE, None, [timing, loss])
    assert evidence(both).unit == "seeds" and leans(both)  # the seeds' part first: a round can narrow it


def test_a_verdict_open_only_by_its_grid_or_scale_gets_no_seeds():
    from normlab.report.outcome import OFF_GRID, OFF_SCALE
    from normlab.study.power import explain, leans

    for why in (OFF_GRID, OFF_SCALE):
        v = dataclasses.replace(_split(INCONCLUSIVE, 5, 0), why=why)
        assert not leans(v)
        v = explain(v, 0.05)
        assert v.why == why and v.needed is None


def test_an_inconclusive_verdict_says_which_kind_it_is():
    from normlab.report.outcome import EQUIVALENT, TOO_FEW_TRAINED, UNDERPOWERED
    from normlab.study.power import explain

    v = _verdict(INCONCLUSIVE)
    v = explain(v, 0.05)
    assert v.why == TOO_FEW_TRAINED and v.outcome.why_text == "too few runs trained to compare"
    v = Verdict("C7", INCONCLUSIVE, "Post-LN − Pre-LN val loss (nats)", 0.001, 5, {}, interval=[-0.01, 0.012])
    v = explain(v, 0.05)
    assert v.why == EQUIVALENT and v.needed is None
    v = _split(INCONCLUSIVE, 5, 0)
    v = explain(v, 0.0028)
    assert (v.why, v.needed) == (UNDERPOWERED, 9)
    assert v.outcome.why_text == "effect seen, not past the family-wise level at 5 seeds: about 9 needed"
    assert v.to_dict()["outcome"]["why"] == UNDERPOWERED
    held = _split(HOLDS, 5, 0)
    held = explain(held, 0.05)
    assert held.why == "" and held.outcome.why_text == ""  # only an inconclusive verdict has a kind


def test_the_standard_preset_states_its_schedule_and_a_users_own_seeds_look_once():
    spec = load_study("standard")
    assert spec.preset.seed_rounds == [5, 10] and CLAIMS.get("C1").knobs(spec.preset).rounds
    # the failure-split claims take rounds (their exact tests need the seeds); the depth sweep's other claims not
    assert all(CLAIMS.get(c).knobs(spec.preset).rounds for c in ("C4", "C8", "C11", "C14"))
    assert not any(CLAIMS.get(c).knobs(spec.preset).rounds for c in ("C2", "C3", "C5"))
    assert spec["C1"].look == (1, 2) and spec["C8"].look == (1, 2) and spec["C16"].look is None
    assert spec.next_seeds("C1") == list(range(HELD_OUT, HELD_OUT + 10))  # held-out seeds, numbered on
    grown = spec.with_seeds({"C1": spec.next_seeds("C1")})
    assert grown["C1"].look == (2, 2) and grown.next_seeds("C1") is None
    assert spec["C1"].look == (1, 2)  # a round is a new plan: this one is left as it is
    assert load_study("standard", seeds=[0, 1])["C1"].look is None


def test_a_round_of_c4_adds_only_the_two_depths_its_test_reads():
    spec = load_study("standard", claims=["C4"], init_pass=False)
    before = {r.id for r in spec.runs}
    spec = spec.with_seeds({"C4": spec.next_seeds("C4")})
    added = [r for r in spec.runs if r.id not in before]
    assert sorted({r.config.model.n_layer for r in added}) == [2, 16]
    assert len(added) == 2 * 2 * 5  # Pre-LN and Post-LN at 2 and 16 layers, 5 new seeds


def test_a_round_adds_seeds_to_its_claims_runs_only():
    spec = load_study("standard", claims=["C13", "C1"], init_pass=False)
    before = {r.id for r in spec.runs}
    after = spec.with_seeds({"C13": spec.next_seeds("C13")}).runs
    added = [r for r in after if r.id not in before]
    # C13's two runs (with and without the final norm) at seeds 1005–1009; C1's runs keep their 5 seeds
    assert sorted(r.config.train.seed for r in added) == sorted(list(range(HELD_OUT + 5, HELD_OUT + 10)) * 2)
    assert {r.config.model.final_norm for r in added} == {None, False}  # None: the scheme's own (Pre-LN: one)
    assert {r.config.model.scheme for r in added} == {"pre"}


TINY = {"model.d_model": 16, "model.n_head": 2, "model.block_size": 16, "train.batch_size": 4,
        "train.eval_interval": 4, "train.eval_batches": 2, "train.ckpt_interval": 8, "diagnostics.interval": "off",
        "diagnostics.layer_skip": False, "train.steps": 8, "model.n_layer": 1, "train.untrained_margin": "off"}  # warmup: the preset knob


# slow: the rounds' rules are unit-tested above
# (the default suite stays under 10 min on 2 cores; `make test-slow` runs it)
@pytest.mark.slow
def test_a_study_adds_a_round_for_an_undecided_claim_and_a_claim_sharing_its_runs_keeps_its_seeds(tmp_path,
                                                                                                 monkeypatch):
    """C13 on a schedule of looks at 2 and 3 seeds, made undecided at its first look; C1 (one look) shares
    C13's baseline run (Pre-LN with the final norm at the fixed lr with warmup)."""
    from normlab.study import power, rounds, runner
    from normlab.study.ledger import Ledger
    from normlab.study.load import plan_of
    from normlab.study.plan import plan_from_meta

    def make():
        spec = load_study("quick", claims=["C13", "C1"], seeds=[0, 1],
                          overrides=[f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in TINY.items()])
        # one init for every claim (paper_inits off), so that C1's Pre-LN run with warmup is C13's baseline
        preset = dataclasses.replace(spec.preset, seed_rounds=[2, 3], warmup=2, paper_inits=False,
                                     init_pass="none", lrs=[spec.preset.lr_fixed],
                                     knobs={**spec.preset.knobs, "C1": {"rounds": False}})  # C13's alone
        return plan_of(dataclasses.replace(spec.spec, preset=preset))

    looked, seen = [], {}
    monkeypatch.setattr(power, "leans", lambda v: looked.append((v.id, (v.look or {}).get("look"))) or True)
    # claims are measured (C10's timings) before a look judges them: a verdict without its measurement is no look
    orig = rounds.measure_claims
    monkeypatch.setattr(rounds, "measure_claims",
                        lambda plan, ledger, measure: (measure and looked.append("measured"))
                        or orig(plan, ledger, measure))
    c1 = CLAIMS.get("C1")
    verdict = c1.verdict
    monkeypatch.setattr(c1, "verdict", lambda self, records, *a: seen.update(C1={r.seed for r in records})
                        or verdict(self, records, *a))
    spec = make()
    out = runner.run_study(spec, tmp_path / "s", workers=1, stack_runs=False)
    # measured before each settled step is judged (the second finds every claim measured); every judgement says
    # which verdicts lean; one round: the second look is C13's last, and it grows no further
    assert looked == ["measured", ("C1", None), ("C13", 1), "measured", ("C1", None), ("C13", 2)]
    verdicts = {v.id: v for v in judged_study(spec, tmp_path / "s", out)[1]}
    assert verdicts["C13"].look["look"] == 2 and verdicts["C13"].look["alpha"] == pytest.approx(0.015)
    assert "look 2 of 2 at 3 seeds (α = 0.015 at this look)" in verdicts["C13"].test
    assert verdicts["C13"].seeds == [0, 1, 2] or verdicts["C13"].verdict == INCONCLUSIVE
    assert verdicts["C1"].look == {} and set(verdicts["C1"].seeds) <= {0, 1}
    assert seen["C1"] == {0, 1}  # C1 is never shown the seed C13's round added to the run they share
    ledger = Ledger(tmp_path / "s")
    records = ledger.records()
    at_seed_2 = [r.get("model.final_norm") for r in records if r.seed == 2]
    assert len(at_seed_2) == 2 and set(at_seed_2) == {None, False}  # C13's two runs, nothing of C1's
    shared = [r for r in records if r.get("model.scheme") == "pre" and r.get("train.warmup_steps") == 2
              and r.get("model.final_norm") is None and r.get("train.lr") == PRESETS["quick"].lr_fixed]
    assert sorted(r.seed for r in shared) == [0, 1, 2]  # C1 judges this run at seeds 0 and 1 only
    assert ledger.meta()["study"]["claim_seeds"] == {"C13": [0, 1, 2]}
    # the report rebuilds the same looks from the ledger, and verdicts.json carries them
    from normlab.study.publish import publish

    publish(tmp_path / "s")
    doc = {v["id"]: v for v in json.loads((tmp_path / "s" / "verdicts.json").read_text())["verdicts"]}
    assert doc["C13"]["look"]["look"] == 2 and doc["C13"]["look"]["n_seeds"] == 3 and doc["C1"]["look"] == {}
    # the manifest: every run with its seed, start and end, and the rules' fingerprint that claimed it
    from normlab.study.rules import fingerprint

    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert manifest["rules"] == fingerprint() and len(manifest["runs"]) == len(records)
    assert all(r["rules"] == fingerprint() and r["started"] <= r["finished"] for r in manifest["runs"])
    assert sorted(r["seed"] for r in manifest["runs"]) == sorted(r.seed for r in records)
    again = plan_from_meta(ledger.meta())
    assert again["C13"].seeds == (0, 1, 2) and again["C13"].look == (2, 2)
    # a rerun on the finished directory decides the same round and trains nothing
    looked.clear()
    spec = make()
    rerun = runner.run_study(spec, tmp_path / "s", workers=1, stack_runs=False)
    # the round's runs are trained already: registered, then judged at the second look, which leans no further
    assert looked == ["measured", ("C1", None), ("C13", 1), "measured", ("C1", None), ("C13", 2)]
    assert rerun.counts == out.counts and judged_study(spec, tmp_path / "s", rerun)[0].final
    assert Ledger(tmp_path / "s").meta()["study"]["claim_seeds"] == {"C13": [0, 1, 2]}


def test_the_plan_sizes_each_claims_seeds_from_the_design_seeds():
    """A trial sizes an equivalence test from a pilot: the plan says, per claim, what the design seeds found and
    whether the cap of its schedule settles it, or how many seeds would."""
    from normlab.study.power import sized

    design = {"verdicts": {
        "C1": {"outcome": {"kind": "holds", "text": "holds", "seeds": 10, "unit": "seeds"}},
        "C13": {"outcome": {"kind": "inconclusive", "why": "effect seen, not past the family-wise level",
                            "needed": 12, "seeds": 10, "unit": "seeds"}},
        "C15": {"outcome": {"kind": "inconclusive", "why": "effect seen, not past the family-wise level",
                            "needed": None, "seeds": 10}},
        "C7": {"outcome": {"kind": "inconclusive", "why": "effect seen, not past the family-wise level", "needed": 8,
                           "seeds": 5}},
        "F1": {"outcome": {"kind": "inconclusive", "why": "not at the paper's scale", "seeds": 5}},
        "C16": {"outcome": {"kind": "holds", "text": "holds", "seeds": 1}}}}
    assert sized(design, "C1", 10) == "holds at 10 seeds" and sized(design, "C16", 5) == "holds (measured)"
    assert sized(design, "C13", 10) == "about 12 seeds needed: the cap (10) leaves it unsettled; about 12 would settle it"
    assert sized(design, "C7", 10) == "about 8 seeds needed, within the cap (10)"
    assert "no projection within 200: the cap (10) may leave it unsettled" in sized(design, "C15", 10)
    assert sized(design, "F1", 5).endswith("more seeds would not settle it") and sized(None, "C1", 5) == ""


def test_a_timing_too_short_for_any_interval_asks_for_timing_rounds_not_trained_runs():
    """C10 at 9 rounds (8 past the warm-up) against a Holm level of 0.0022: the median's order-statistic interval
    needs 2·½ⁿ ≤ α, n = 10, plus the warm-up: about 11 timing rounds, never "too few runs trained"."""
    from normlab.report.outcome import UNDERPOWERED
    from normlab.study.power import explain

    part = {"name": "cost", "verdict": INCONCLUSIVE, "interval": None, "statistic": "time ratio", "bounds": [0.98],
            "rounds": 8}
    v = explain(_verdict(INCONCLUSIVE, None, [part, {"name": "loss", "verdict": HOLDS, "interval": [-0.01, 0.0]}]),
                0.0022)
    assert (v.why, v.needed, v.unit, v.unit_count) == (UNDERPOWERED, 11, "timing rounds", 8)


@pytest.mark.slow
def test_a_round_into_runs_an_earlier_study_here_trained_reuses_them_and_the_ledger_records_its_seeds(tmp_path,
                                                                                                      monkeypatch):
    """C13 trained at seeds 0-2 first; then the same study at seeds 0-1 with a look at 2 and 3 seeds: its round adds
    seed 2, whose runs the directory holds from the first study (not yet this study's). Nothing trains again, the
    round is judged at its look, and the ledger's study record (what `normlab report` judges by) carries the round's
    seeds. (A round whose runs this study itself holds already: the unit test below.)"""
    from normlab.study import power, runner
    from normlab.study.ledger import Ledger
    from normlab.study.load import plan_of
    from normlab.study.plan import plan_from_meta

    def make(seeds, rounds):
        spec = load_study("quick", claims=["C13"], seeds=seeds,
                          overrides=[f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in TINY.items()])
        preset = dataclasses.replace(spec.preset, seed_rounds=rounds, paper_inits=False, init_pass="none")
        return plan_of(dataclasses.replace(spec.spec, preset=preset))

    runner.run_study(make([0, 1, 2], [3]), tmp_path / "s", workers=1, stack_runs=False)
    trained = len(Ledger(tmp_path / "s").records())
    monkeypatch.setattr(power, "leans", lambda v: True)
    out = runner.run_study(make([0, 1], [2, 3]), tmp_path / "s", workers=1, stack_runs=False)
    ledger = Ledger(tmp_path / "s")
    assert len(ledger.records()) == trained  # the round's runs were known: nothing trained
    assert out.plan["C13"].seeds == (0, 1, 2) and out.judged.verdicts[0].look["look"] == 2
    assert ledger.meta()["study"]["claim_seeds"] == {"C13": [0, 1, 2]}
    assert plan_from_meta(ledger.meta())["C13"].seeds == (0, 1, 2)


def test_a_round_whose_runs_the_study_holds_already_is_judged_at_its_look(monkeypatch):
    """Where a claim grows into seeds whose runs the study has registered already (another claim's round trained
    them), nothing is left to train: the grown plan is judged at once, and it is that judgement the study ends with
    (before, the runner stopped with none, judged the grown plan afresh, and never wrote its seeds to the ledger)."""
    from types import SimpleNamespace

    from normlab.study import rounds

    run = SimpleNamespace(id="r1")
    grown = SimpleNamespace(runs=[run], grow=lambda verdicts: (grown, []), name="grown")
    plan = SimpleNamespace(runs=[run], grow=lambda verdicts: (grown, ["C13"]), name="first")
    ledger = SimpleNamespace(progress=lambda ids: (1, 1))
    monkeypatch.setattr(rounds, "measure_claims", lambda plan, ledger, measure: True)
    monkeypatch.setattr(rounds, "completion", lambda plan, ledger, ids, measured: "final")
    monkeypatch.setattr(rounds, "followup_runs", lambda plan, ledger, ids: [])
    monkeypatch.setattr(rounds, "judge_study", lambda plan, ledger, ids, status: SimpleNamespace(
        plan=plan.name, verdicts=(), status=status, leaning=()))
    said = []
    out_plan, runs, judged = rounds.next_runs(plan, ledger, ["r1"], said.append)
    assert out_plan is grown and runs == [] and judged.plan == "grown" and judged.status == "final"
    assert said and "seed round: C13" in said[0]
