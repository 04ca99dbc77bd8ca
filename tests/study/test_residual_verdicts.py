"""Unit tests of the residual-stream claims' verdicts (F9–F13) on synthetic run records of the real `residual`
preset: each claim reaches holds, does not hold and inconclusive, with its key number checked against a hand
computation. Nothing trains."""
from __future__ import annotations

import itertools
import math
import statistics
from typing import Any

import pytest

from normlab.config import ConfigError
from normlab.study.claims import CLAIMS, FAILS, HOLDS, INCONCLUSIVE, RESIDUAL_CLAIMS
from normlab.study.claims.residual import log_spread, log_trend
from normlab.study.load import load_study
from normlab.study.presets import PRESETS
from normlab.study.records import RunRecord, flatten
from normlab.study.plan import INIT_KEY
from normlab.study.runs import build_config
from tests.study.scenarios import five

P = PRESETS["residual"]
SEEDS = list(P.seeds)
BASE = flatten(build_config(P, {INIT_KEY: "gpt2"}, SEEDS[0]).to_dict())
_ids = itertools.count()


def records(cid: str, want: dict[str, Any], losses: list[Any], layers: list[dict[str, list[float]]] | None = None
            ) -> list[RunRecord]:
    """One record per seed of the run of `cid` whose overrides include `want`: loss None diverged, "stuck" failed
    to train; `layers`: each seed's final per-layer profiles."""
    found = [o for o in CLAIMS.get(cid)().runs(P) if all(o.get(k) == v for k, v in want.items())]
    assert len(found) == 1, f"{cid}: {len(found)} runs with {want}"
    out = []
    for i, (seed, loss) in enumerate(zip(SEEDS, losses)):
        config = build_config(P, {INIT_KEY: "gpt2", **found[0]}, seed)
        status = "diverged" if loss is None else "failed_to_train" if loss == "stuck" else "completed"
        out.append(RunRecord(id=f"r{next(_ids)}", config=config, status=status, base=BASE,
                             val_loss=3.34 if loss == "stuck" else loss,
                             layers_final=layers[i] if layers else {}))
    return out


def judge(cid: str, recs: list[RunRecord]):
    return CLAIMS.get(cid)().judge(recs, None, P)


def test_the_residual_preset_holds_f9_to_f13_on_held_out_seeds_and_refuses_them_elsewhere():
    assert RESIDUAL_CLAIMS == ["F9", "F10", "F11", "F12", "F13"] == P.claims
    assert all(c not in PRESETS["frontier"].claims for c in RESIDUAL_CLAIMS)
    with pytest.raises(ConfigError, match=r"claims F10 are judged in their papers' setup.*--preset residual"):
        load_study("frontier", claims=["F10"])


def test_the_spread_and_the_trend_of_a_profile_by_hand():
    doubling = [1.0, 2.0, 4.0, 8.0]
    assert log_trend(doubling) == pytest.approx(3 * math.log(2))
    assert log_spread(doubling) == pytest.approx(statistics.pstdev([i * math.log(2) for i in range(4)]))
    assert log_spread([3.0] * 4) == 0.0 and log_trend([3.0] * 4) == pytest.approx(0.0)
    assert log_trend([None, 2.0]) is None and log_spread([0.0, 1.0]) is None


# -- F9: composite gain ------------------------------------------------------------------
HC, MHC = {"model.scheme": "hc"}, {"model.scheme": "mhc"}


def gains(per_layer: list[list[float]]) -> list[dict[str, list[float]]]:
    return [{"composite_gain/mlp": g} for g in per_layer]


def test_f9_holds_when_hcs_gain_grows_and_mhcs_stays_near_one():
    growth = [1.3, 1.5, 1.4, 1.6, 1.45]
    hc = [[1.0, g, g * g, g ** 3] for g in growth]
    mhc = [[1.0, 1.0 + e, 1.0, 1.0 - e] for e in (1e-5, 2e-5, 1e-5, 3e-5, 2e-5)]
    v = judge("F9", records("F9", HC, five(2.2), gains(hc)) + records("F9", MHC, five(2.2), gains(mhc)))
    assert v.verdict == HOLDS, v.summary
    logs = [log_trend(p) for p in hc]
    assert v.value == pytest.approx(math.exp(statistics.fmean(logs)))  # the geometric mean of the fitted factor
    assert [p["verdict"] for p in v.parts] == [HOLDS] * 3


def test_f9_does_not_hold_when_hcs_gain_shrinks_with_depth():
    hc = [[1.0, 0.9 - 0.01 * i, 0.8 - 0.01 * i, 0.7] for i in range(5)]
    mhc = [[1.0, 1.0, 1.0, 1.0]] * 5
    v = judge("F9", records("F9", HC, five(2.2), gains(hc)) + records("F9", MHC, five(2.2), gains(mhc)))
    assert v.verdict == FAILS and v.parts[0]["verdict"] == FAILS, v.summary


def test_f9_is_inconclusive_when_hcs_gain_goes_either_way():
    hc = [[1.0, 1.1, 1.2, 1.3], [1.0, 0.9, 0.8, 0.7], [1.0, 1.05, 1.0, 1.02], [1.0, 0.95, 1.0, 0.97],
          [1.0, 1.0, 1.01, 1.0]]
    mhc = [[1.0, 1.0, 1.0, 1.0]] * 5
    v = judge("F9", records("F9", HC, five(2.2), gains(hc)) + records("F9", MHC, five(2.2), gains(mhc)))
    assert v.verdict == INCONCLUSIVE and v.parts[0]["verdict"] == INCONCLUSIVE, v.summary


# -- F10: HC and mHC against Pre-LN -----------------------------------------------------
def f10(pre: float, hc: float, mhc: float, jitter: float = 0.002):
    return (records("F10", {"model.scheme": "pre"}, five(pre)) + records("F10", HC, five(hc, jitter))
            + records("F10", MHC, five(mhc, jitter)))


@pytest.mark.parametrize("hc, mhc, expected", [(2.10, 2.11, HOLDS), (2.10, 2.20, FAILS), (2.2, 2.2, FAILS),
                                               (2.19, 2.10, INCONCLUSIVE)])
def test_f10_holds_only_when_both_beat_pre_ln_by_more_than_the_margin(hc, mhc, expected):
    v = judge("F10", f10(2.20, hc, mhc, jitter=0.002 if expected != INCONCLUSIVE else 0.03))
    assert v.verdict == expected, v.summary
    assert v.value == pytest.approx(2.20 - hc)  # Pre-LN − HC, paired by seed


def test_f10_counts_a_diverged_hc_run_as_a_failure_never_in_the_mean():
    recs = (records("F10", {"model.scheme": "pre"}, five(2.2)) + records("F10", MHC, five(2.1))
            + records("F10", HC, [None, None, None, None, None]))
    v = judge("F10", recs)
    assert v.parts[0]["verdict"] == FAILS and v.parts[0]["value"] is None, v.summary  # HC never trains
    # 5 of 5 seeds, p = 1/32: below 0.05, not below the 0.025 a bundled claim's "does not hold" needs per part
    assert v.verdict == INCONCLUSIVE and "none at 0.025" in v.summary


# -- F11: AttnRes uniformity ------------------------------------------------------------
ATT, PRE8 = {"model.scheme": "attnres"}, {"model.scheme": "pre", "model.n_layer": 8}


def profiles(rate: float, jitters) -> list[dict[str, list[float]]]:
    return [{"branch_rms/mlp": [(rate + j) ** i for i in range(8)],
             "grad_norm/block": [(rate + j) ** -i for i in range(8)]}
            for j in jitters]


def test_f11_holds_when_attnres_is_flatter_on_both_measures_and_beats_pre_ln():
    j = (0.0, 0.01, -0.01, 0.02, -0.02)
    recs = records("F11", PRE8, five(2.2), profiles(1.5, j)) + records("F11", ATT, five(2.1, 0.002), profiles(1.05, j))
    v = judge("F11", recs)
    assert [p["verdict"] for p in v.parts] == [HOLDS, HOLDS, HOLDS] and v.verdict == HOLDS, v.summary
    assert v.value == pytest.approx(0.1)


def test_f11_does_not_hold_when_attnres_is_the_less_uniform():
    j = (0.0, 0.01, -0.01, 0.02, -0.02)
    recs = records("F11", PRE8, five(2.2), profiles(1.05, j)) + records("F11", ATT, five(2.1, 0.002), profiles(1.5, j))
    assert judge("F11", recs).verdict == FAILS


# -- F12: SpanNorm ----------------------------------------------------------------------
STRESS = {"train.lr": 1e-2, "train.warmup_steps": 0}


def f12(post: list, span_stressed: list, span: list, pre: list) -> list[RunRecord]:
    """F12's four arms: Post-LN and SpanNorm at the stress lr without warmup, SpanNorm and Pre-LN with warmup."""
    return (records("F12", {"model.scheme": "post", **STRESS}, post)
            + records("F12", {"model.scheme": "spannorm", **STRESS}, span_stressed)
            + records("F12", {"model.scheme": "spannorm", "train.lr": 3e-3}, span)
            + records("F12", {"model.scheme": "pre", "model.n_layer": 8}, pre))


def test_f12_holds_when_post_ln_fails_without_warmup_spannorm_trains_and_matches_pre_ln():
    recs = f12(["stuck"] * 5, five(2.3), five(2.201, 0.001), five(2.2))
    v = judge("F12", recs)
    assert [p["verdict"] for p in v.parts] == [HOLDS, HOLDS] and v.verdict == HOLDS, v.summary
    assert v.value == pytest.approx(0.001)


def test_f12_does_not_hold_when_spannorm_ends_worse_than_pre_ln_by_more_than_the_margin():
    recs = f12(["stuck"] * 5, five(2.3), five(2.3, 0.001), five(2.2))
    assert judge("F12", recs).verdict == FAILS


# -- F13: DyT's data regime -------------------------------------------------------------
def f13(scarce: tuple[float, float], plentiful: tuple[float, float], jitter: float = 0.002):
    few = {"data.train_tokens": CLAIMS.get("F13").Knobs().scarce_tokens}
    return (records("F13", {"model.norm": "dyt", **few}, five(scarce[0], jitter))
            + records("F13", {"model.norm": "layernorm", **few}, five(scarce[1]))
            + records_plentiful("dyt", plentiful[0], jitter) + records_plentiful("layernorm", plentiful[1]))


def records_plentiful(norm: str, loss: float, jitter: float = 0.0) -> list[RunRecord]:
    found = [o for o in CLAIMS.get("F13")().runs(P) if o.get("model.norm") == norm and "data.train_tokens" not in o]
    assert len(found) == 1
    return [RunRecord(id=f"r{next(_ids)}", config=build_config(P, {INIT_KEY: "gpt2", **found[0]}, s),
                      status="completed", base=BASE, val_loss=x) for s, x in zip(SEEDS, five(loss, jitter))]


@pytest.mark.parametrize("scarce, plentiful, expected", [((2.60, 2.70), (2.30, 2.20), HOLDS),
                                                        ((2.70, 2.60), (2.30, 2.20), FAILS),
                                                        ((2.60, 2.70), (2.20, 2.20), FAILS)])
def test_f13_holds_only_when_the_gap_changes_sign_between_scarce_and_plentiful_text(scarce, plentiful, expected):
    v = judge("F13", f13(scarce, plentiful))
    assert v.verdict == expected, v.summary
    assert v.value == pytest.approx(scarce[1] - scarce[0])  # LayerNorm − DyT on scarce text


@pytest.mark.parametrize("cid", ["F9", "F10", "F11", "F12", "F13"])
def test_a_claim_without_its_runs_is_inconclusive_not_an_error(cid):
    v = judge(cid, [])
    assert v.verdict == INCONCLUSIVE and v.id == cid


def test_f13s_tokens_per_parameter_are_the_ones_docs_frontier_quotes():
    """docs/frontier.md: about 0.2M parameters, 230,400 tokens seen, 0.02 and 1.1 tokens per parameter."""
    from pathlib import Path

    from normlab.nn import build_model
    from normlab.study.claims.frontier import arm
    from normlab.study.claims.residual import DYT_REGIME

    config = build_config(P, dict(arm(P, **DYT_REGIME["LayerNorm"])), SEEDS[0])
    params = sum(p.numel() for p in build_model(config.model.model_copy(update={"vocab_size": 65})).parameters())
    seen = config.train.steps * config.train.batch_size * config.model.block_size
    few = CLAIMS.get("F13").Knobs().scarce_tokens
    docs = " ".join((Path(__file__).parents[2] / "docs" / "frontier.md").read_text("utf-8").split())
    assert f"about {params / 1e6:.1f}M parameters and sees 300 × 12 × 64 = {seen:,} tokens" in docs
    assert f"{few:,} distinct tokens are about {few / params:.2f} tokens per parameter" in docs
    assert f"the whole corpus about {seen / params:.1f}" in docs


def test_f12s_failure_split_is_its_evidence_so_a_seed_round_can_follow():
    """SpanNorm failing without warmup in 2 more seeds than Post-LN: no decision at 5 seeds, but the split leans,
    and the power plan reads it (`Verdict.evidence`) to add the second look's seeds."""
    from normlab.study.power import leans

    recs = f12(["stuck", "stuck", "stuck", 2.2, 2.3], ["stuck"] * 5, five(2.201, 0.001), five(2.2))
    v = judge("F12", recs)
    assert v.verdict == INCONCLUSIVE and (v.evidence.n, v.evidence.k) == (2, 2)
    assert v.to_dict()["details"]["evidence"]["n"] == 2  # verdicts.json keeps it where it was
    assert leans(v)


def test_f12s_split_is_its_evidence_only_while_it_is_open():
    """Once SpanNorm's failure split is decided, the open part's interval is the evidence a seed round reads."""
    recs = f12(["stuck"] * 5, five(2.3), five(2.21, 0.02), five(2.2))
    v = judge("F12", recs)
    assert v.parts[0]["verdict"] == HOLDS and v.evidence is None and "evidence" not in v.to_dict()["details"]
