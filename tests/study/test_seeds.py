"""Held-out seeds and nuisance factors (issue 32): the presets users run, and every seed their rounds or C2's
measurement at init can add, lie outside the design seeds the rules were built on; `--seeds` still runs on design
seeds; `--vary` re-measures each training claim under a factor's other level, except where its own runs fix it."""
from __future__ import annotations

import pytest

from normlab.config import ConfigError
from normlab.study.claims import CLAIMS
from normlab.study.load import load_study, plan_of
from normlab.study.plan import plan_from_meta, varied
from normlab.study.presets import DESIGN_SEEDS, HELD_OUT, PRESETS

DESIGN = set(DESIGN_SEEDS)


def test_the_held_out_range_moved_past_the_seeds_seen_under_earlier_rules():
    # 1000–1004, 2000–2004, …, 8000–8004 (with their rounds' seeds) ran under earlier rules and were seen: they are
    # design seeds now (CHANGELOG.md)
    seen = set().union(*(range(start, start + 10) for start in range(1000, 9000, 1000)))
    assert HELD_OUT == 9000 and seen <= DESIGN


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_runs_on_held_out_seeds(name):
    seeds = PRESETS[name].seeds
    assert seeds and min(seeds) >= HELD_OUT and not set(seeds) & DESIGN


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_no_seed_round_reaches_into_the_design_seeds(name):
    spec = load_study(name)
    added = set()
    for cid in spec.claims:
        while (more := spec.next_seeds(cid)) is not None:  # through every look of the claim's schedule
            spec = spec.with_seeds({cid: more})
            added |= set(more)
        assert not set(spec[cid].seeds) & DESIGN, cid
    assert not added & DESIGN
    if name == "standard":  # the one preset with rounds: the loop above did add seeds
        assert added == set(range(HELD_OUT, HELD_OUT + 10)) and spec["C1"].seeds == tuple(range(HELD_OUT,
                                                                                                HELD_OUT + 10))


@pytest.mark.parametrize("name", sorted(n for n, p in PRESETS.items() if "C2" in p.claims))
def test_c2s_seeds_at_init_are_held_out_too(name):
    p = PRESETS[name]
    n = CLAIMS.get("C2").knobs(p).init_seeds
    measured = range(min(p.seeds), min(p.seeds) + n)  # what C2's measure() runs, from the first seed
    assert n >= 100 and not set(measured) & DESIGN


def test_design_seeds_run_by_seeds():
    spec = load_study("standard", seeds=[0, 1, 2, 3, 4])
    assert spec.preset.seeds == [0, 1, 2, 3, 4] and set(spec.preset.seeds) <= DESIGN
    assert spec.next_seeds("C1") == list(range(10))  # 5 seeds: the preset's schedule of looks, numbered on
    assert PRESETS["standard"].seeds == list(range(HELD_OUT, HELD_OUT + 5))  # the preset itself is untouched
    expanded = spec.runs
    assert expanded and {r.config.train.seed for r in expanded} == {0, 1, 2, 3, 4}


# -- --vary ---------------------------------------------------------------------------------------------------
def test_an_unknown_factor_is_refused_with_the_valid_ones():
    with pytest.raises(ConfigError, match=r"unknown factor 'depth' to vary; valid: init, context, width"):
        load_study("standard", vary=["context", "depth"])
    with pytest.raises(ConfigError, match="vary must be a list of factors"):
        load_study("standard", vary="context")


def test_factors_are_kept_once_in_the_order_given():
    assert load_study("standard", claims=["C1"], vary=["width", "context", "width"]).spec.vary == ["width",
                                                                                                    "context"]


def test_vary_context_adds_64_token_runs_where_the_claims_runs_do_not_fix_the_context():
    plain = load_study("standard", claims=["C1", "C8"])
    spec = load_study("standard", claims=["C1", "C8"], vary=["context"])
    c1, c8 = CLAIMS.get("C1")(), CLAIMS.get("C8")()
    before, after = plain.runs, spec.runs
    assert spec.preset.base["model.block_size"] == 32 and not [r for r in before if r.config.model.block_size == 64]
    added = [r.config for r in after if r.id not in {b.id for b in before}]
    # C1's lr sweep once more at 64 tokens (the same val tokens per evaluation: 10 batches of 64), every seed
    assert len(added) == len(c1.runs(spec.preset)) * 5
    assert {(c.model.block_size, c.train.eval_batches) for c in added} == {(64, 10)}
    assert {c.model.scheme for c in added} == {"pre", "post"} and {c.model.n_layer for c in added} == {4}
    # C8's very deep models set their own context (32 tokens): not varied, and its verdict says so
    assert c8.runs(spec.preset) and all(o["model.block_size"] == 32 for o in c8.runs(spec.preset))
    assert varied(c8, spec.preset, "context") is None and spec["C8"].fixed == ("context",)
    assert varied(c1, spec.preset, "context") == {"model.block_size": 64, "train.eval_batches": 10}
    assert spec["C1"].fixed == ()
    plan = plan_of(spec.spec)
    (own, context), = plan["C1"].varied
    assert context.base["model.block_size"] == 64 and (own.level, context.level) == ("32 tokens", "64 tokens")
    assert plan["C8"].varied == () and plan["C8"].fixed == ("context",)


def test_vary_width_is_fixed_by_c8s_narrow_models_too():
    spec = load_study("standard", claims=["C1", "C8"], vary=["context", "width"])
    assert spec["C8"].fixed == ("context", "width")
    assert varied(CLAIMS.get("C1")(), spec.preset, "width") == {"model.d_model": 128}


def test_a_claim_without_training_runs_is_not_varied():
    spec = load_study("standard", claims=["C16"], vary=["context"])
    assert spec["C16"].varied == () and spec["C16"].fixed == () and not spec["C16"].trains


def test_vary_init_is_the_init_pass():
    spec = load_study("standard", claims=["C1", "C13"], vary=["init"])
    assert spec.spec.init_pass_override is True and spec.spec.vary == []
    assert spec["C1"].other_init is not None and len(spec["C1"].inits) == 2
    assert load_study("standard", claims=["C1"], vary=["init", "width"]).spec.vary == ["width"]


def test_the_factors_varied_are_recorded_and_read_back():
    spec = load_study("standard", claims=["C1"], vary=["context"])
    study = spec.record([])
    assert study["vary"] == ["context"]
    assert plan_from_meta({"study": study}).spec.vary == ["context"]
