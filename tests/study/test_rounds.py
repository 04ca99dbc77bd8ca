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
from normlab.study.claims.statistics import ALPHA, SPENDING, Level, look_alpha, t_interval
from normlab.study.spec import PRESETS, load_study


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


def test_only_an_inconclusive_verdict_with_an_interval_gets_more_seeds():
    from normlab.study.runner import undecided

    assert undecided(_verdict(INCONCLUSIVE, [-0.1, 0.2]))
    assert not undecided(_verdict(INCONCLUSIVE))  # nothing to narrow (no run trained, no failure to count)
    assert not undecided(_verdict(HOLDS, [0.1, 0.2])) and not undecided(_verdict(FAILS, [-0.1, 0.2]))
    open_part = {"verdict": INCONCLUSIVE, "interval": [-0.5, 0.7]}
    assert undecided(_verdict(INCONCLUSIVE, [0.1, 0.2], [{"verdict": HOLDS, "interval": [0.1, 0.2]}, open_part]))
    # the inconclusive part has no interval: more seeds promise nothing, whatever the decided part's interval
    assert not undecided(_verdict(INCONCLUSIVE, [0.1, 0.2], [{"verdict": HOLDS, "interval": [0.1, 0.2]},
                                                             {"verdict": INCONCLUSIVE, "interval": None}]))


def test_the_standard_preset_states_its_schedule_and_a_users_own_seeds_look_once():
    spec = load_study("standard")
    assert spec.preset.seed_rounds == [5, 10] and CLAIMS.get("C1").knobs(spec.preset).rounds
    # the depth sweep's second round (C2–C4) and 15 runs of 32 layers (C8): no second round in 30 minutes
    assert not any(CLAIMS.get(c).knobs(spec.preset).rounds for c in ("C2", "C8"))
    assert spec.look("C1") == (1, 2) and spec.look("C8") is None and spec.look("C16") is None
    assert spec.next_seeds("C1") == list(range(1000, 1010))  # held-out seeds, numbered on
    spec.claim_seeds["C1"] = spec.next_seeds("C1")
    assert spec.look("C1") == (2, 2) and spec.next_seeds("C1") is None
    assert load_study("standard", seeds=[0, 1]).look("C1") is None


def test_a_round_adds_seeds_to_its_claims_runs_only():
    spec = load_study("standard", claims=["C13", "C1"], init_pass=False)
    before = {r.id for r in spec.expand(CLAIMS)}
    spec.claim_seeds["C13"] = spec.next_seeds("C13")
    after = spec.expand(CLAIMS)
    added = [r for r in after if r.id not in before]
    # C13's two runs (with and without the final norm) at seeds 1005–1009; C1's runs keep their 5 seeds
    assert sorted(r.config.train.seed for r in added) == sorted(list(range(1005, 1010)) * 2)
    assert {r.config.model.final_norm for r in added} == {None, False}  # None: the scheme's own (Pre-LN: one)
    assert {r.config.model.scheme for r in added} == {"pre"}


TINY = {"model.d_model": 16, "model.n_head": 2, "model.block_size": 16, "train.batch_size": 4,
        "train.eval_interval": 4, "train.eval_batches": 2, "train.ckpt_interval": 8, "diagnostics.interval": "off",
        "diagnostics.layer_skip": False, "train.steps": 8, "model.n_layer": 1, "train.untrained_margin": "off"}


# slow: the rounds' rules are unit-tested above
# (the default suite stays under 10 min on 2 cores; `make test-slow` runs it)
@pytest.mark.slow
def test_a_study_adds_a_round_for_an_undecided_claim_and_a_claim_sharing_its_runs_keeps_its_seeds(tmp_path,
                                                                                                 monkeypatch):
    """C13 on a schedule of looks at 2 and 3 seeds, made undecided at its first look; C1 (one look) shares
    C13's baseline run (Pre-LN with the final norm at the fixed lr with warmup)."""
    from normlab.study import runner
    from normlab.study.ledger import Ledger
    from normlab.study.spec import spec_from_meta

    def make():
        spec = load_study("quick", claims=["C13", "C1"], seeds=[0, 1],
                          overrides=[f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in TINY.items()])
        # one init for every claim (paper_inits off), so that C1's Pre-LN run with warmup is C13's baseline
        spec.preset = dataclasses.replace(spec.preset, seed_rounds=[2, 3], warmup=2, paper_inits=False,
                                          init_pass="none", lrs=[spec.preset.lr_fixed],
                                          knobs={**spec.preset.knobs, "C1": {"rounds": False}})  # C13's alone
        return spec

    looked, seen = [], {}
    monkeypatch.setattr(runner, "undecided", lambda v: looked.append((v.id, v.look["look"])) or True)
    # claims are measured (C10's timings) before a look judges them: a verdict without its measurement is no look
    measure = runner.measure_claims
    monkeypatch.setattr(runner, "measure_claims", lambda *a: looked.append("measured") or measure(*a))
    c1 = CLAIMS.get("C1")
    verdict = c1.verdict
    monkeypatch.setattr(c1, "verdict", lambda self, records, *a: seen.update(C1={r.seed for r in records})
                        or verdict(self, records, *a))
    out = runner.run_study(make(), tmp_path / "s", workers=1, stack_runs=False)
    assert looked[:2] == ["measured", ("C13", 1)]  # one round: the second look is C13's last
    assert ("C13", 2) not in looked
    verdicts = {v.id: v for v in out.verdicts}
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
    again = spec_from_meta(ledger.meta())
    assert again.seeds_of("C13") == [0, 1, 2] and again.look("C13") == (2, 2)
    # a rerun on the finished directory decides the same round and trains nothing
    looked.clear()
    rerun = runner.run_study(make(), tmp_path / "s", workers=1, stack_runs=False)
    assert rerun.counts == out.counts and rerun.final and ("C13", 1) in looked and ("C13", 2) not in looked
