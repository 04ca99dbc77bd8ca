"""Unit tests of the frontier claims' verdicts (F1–F8) on synthetic run records, in the style of test_verdicts.py.

Every record is a run of the real `frontier` preset: its config is `build_config(P, {model.init: claim.init,
**overrides}, seed)` (as `StudySpec.expand` builds it), with the overrides taken from the claim's own `runs(P)`,
and its `base` is the study's base config, so groups match records strictly as in a real study. Each claim gets
situations that must give `holds`, `does not hold` and `inconclusive`, with the key `value` checked against a
number computed by hand. Nothing trains.

A situation where a rule gives a verdict its stated rule contradicts is kept, marked xfail(strict=True) with
`BUG: ...`: it starts failing (XPASS) the day the rule is mended, so its mark is then removed.
"""
from __future__ import annotations

import functools
import itertools
import json
import math
import statistics
from typing import Any, Callable, NamedTuple

import pytest
import torch
from scipy.stats import t as student_t

from normlab.config import RunConfig
from normlab.nn import build_model
from normlab.study.claims import CLAIMS, FAILS, FRONTIER_CLAIMS, HOLDS, INCONCLUSIVE, Verdict
from normlab.study.claims.grouping import config_keys
from normlab.study.claims.statistics import LOSS_MARGIN, TRAINS
from normlab.study.records import RunRecord, flatten
from normlab.study.plan import INIT_KEY
from normlab.study.runs import build_config
from normlab.study.presets import HELD_OUT_SEEDS, PRESETS
from tests.study.scenarios import Scenarios, approx, check_verdict, five, mean

P = PRESETS["frontier"]
SEEDS = list(P.seeds)
FULL = P.base["train.steps"]
# the study's base config, as compute_verdicts sets it (the plan's main pass: the base with the claim's init, GPT-2's,
# which is the frontier base's own): groups match it on every axis they do not name
BASE = flatten(build_config(P, {INIT_KEY: "gpt2"}, SEEDS[0]).to_dict())
assert BASE == flatten(build_config(P, {}, SEEDS[0]).to_dict())
OUTCOMES = {HOLDS, FAILS, INCONCLUSIVE}

STUCK = "stuck"  # in a loss list: a run that completed but never left the unigram plateau (failed to train)
STUCK_LOSS = 3.34  # the unigram plateau's val loss: a failed-to-train run's loss, never averaged in
# in a loss list, None is a diverged run


def test_the_preset_has_five_seeds():
    assert SEEDS == HELD_OUT_SEEDS and len(SEEDS) == 5  # held out: no rule was designed on them (issue 32)


# -- the claims' real runs ----------------------------------------------------------------
def runs_of(cid: str) -> list[dict[str, Any]]:
    return CLAIMS.get(cid)().runs(P)


def run(cid: str, **want: Any) -> dict[str, Any]:
    """The one run of `cid`'s real run list whose effective settings (the preset's base, the claim's init, the
    run's overrides) include `want` (`scheme="pre"`: config keys as `group` takes them)."""
    want = config_keys(want)
    init = CLAIMS.get(cid).init
    found = [o for o in runs_of(cid) if all({**BASE, **P.base, INIT_KEY: init, **o}.get(k) == v
                                            for k, v in want.items())]
    assert len(found) == 1, f"{cid}: {len(found)} runs with {want} in {runs_of(cid)}"
    return found[0]


@functools.lru_cache(maxsize=None)
def _config(overrides_json: str, seed: int) -> RunConfig:
    return build_config(P, json.loads(overrides_json), seed)


_ids = itertools.count()


def rec(cid: str, overrides: dict[str, Any], seed: int, loss: Any, init: str | None = None) -> RunRecord:
    """One run of claim `cid` (its overrides, at `seed`) as the study builds it: `{model.init: the claim's init,
    **overrides}` on the preset's base. `loss`: a float (completed), None (diverged) or STUCK (failed to train)."""
    full = {INIT_KEY: init or CLAIMS.get(cid).init, **overrides}
    config = _config(json.dumps(full, sort_keys=True), seed)
    status = "diverged" if loss is None else "failed_to_train" if loss == STUCK else "completed"
    steps = config.train.steps
    return RunRecord(id=f"f{next(_ids)}", config=config, status=status, base=BASE,
                     step=steps if status == "completed" else steps // 3,
                     val_loss=STUCK_LOSS if loss == STUCK else loss,
                     reason="loss diverged" if status == "diverged" else None)


def arm_runs(cid: str, overrides: dict[str, Any], losses: list[Any], init: str | None = None) -> list[RunRecord]:
    """One record per seed of the preset, in order."""
    assert len(losses) == len(SEEDS)
    return [rec(cid, overrides, s, loss, init) for s, loss in zip(SEEDS, losses)]


def noise(cid: str) -> list[RunRecord]:
    """Runs a real study also holds that the claim's verdict must ignore: its runs under the other init (the init
    pass; a run that names its own init is the same run there, so it is left out) and at another thread count
    (the robustness rerun), each with absurd outcomes."""
    out = []
    for o in runs_of(cid):
        if INIT_KEY not in o:
            out += arm_runs(cid, o, [9.0, None, STUCK, 9.5, 0.1], init="xiong")
        out += arm_runs(cid, {**o, "train.threads": 2}, [0.1, None, STUCK, 9.0, 0.2])
    return out


def plus(base: list[float], diffs: list[float]) -> list[float]:
    """Another arm, paired by seed: `base` + a per-seed difference."""
    return [b + d for b, d in zip(base, diffs)]


def hand_t_interval(values: list[float], level: float = 0.95) -> list[float]:
    m, sd = statistics.fmean(values), statistics.stdev(values)
    half = student_t.ppf(0.5 + level / 2, len(values) - 1) * sd / math.sqrt(len(values))
    return [m - half, m + half]


# -- scenario table -----------------------------------------------------------------------
class Case(NamedTuple):
    records: list[RunRecord]
    check: Callable[[Verdict], None] | None = None  # extra assertions on details


scenario = Scenarios()  # @scenario(claim, expected, value): a synthetic situation that must give `expected`
SCENARIOS, COVERED = scenario.params, scenario.covered


def run_claim(claim: str, case: Case) -> Verdict:
    return CLAIMS.get(claim)().verdict(case.records, None, P)


def part_verdicts(v: Verdict) -> list[str]:
    return [p["verdict"] for p in v.parts]


# =========================================================================================
# F1 — nGPT reaches Pre-LN's final loss in ≥ 4× fewer steps (value: the geometric mean over seeds of the factor)
# =========================================================================================
F1_BUDGETS = CLAIMS.get("F1")().budgets(P)
F1_HORIZONS = CLAIMS.get("F1")().horizons(P)
LONGEST = F1_HORIZONS[-1]
QUARTER = round(LONGEST / 4)
K = 0.1  # nats per e-fold of steps: nGPT's loss falls as t − K·ln(steps / the steps it needs for t)


def test_f1_budgets_follow_the_preset():
    """Pre-LN at the base budget and twice it; nGPT at each one's quarter, half and whole."""
    assert F1_HORIZONS == [FULL, 2 * FULL] and F1_BUDGETS == [75, 150, 300, 600] and QUARTER in F1_BUDGETS


def _f1(targets: list[Any], factors: list[float], at: dict[int, list[Any]] | None = None,
        growth: float = 1.0) -> list[RunRecord]:
    """Pre-LN at each horizon H ending where nGPT's line reaches it at H / F_s (its factor F_s at H, times
    `growth` at the longest); nGPT at each budget on the exact line loss(b) = t_s − K·ln(b·F_s / FULL), which
    reaches t_s at FULL / F_s steps; `at`: another loss list for a budget (a failed or diverged nGPT)."""
    out = []
    for h in F1_HORIZONS:
        g = growth if h == LONGEST else 1.0
        pre = [t if t in (STUCK, None) else t - K * math.log(h / (g * FULL)) for t in targets]
        out += arm_runs("F1", run("F1", scheme="pre", steps=h), pre)
    for b in F1_BUDGETS:
        losses = (at or {}).get(b) or [t - K * math.log(b * f / FULL) for t, f in zip(targets, factors)]
        out += arm_runs("F1", run("F1", scheme="ngpt", steps=b), losses)
    return out


def _geo(factors):
    return math.exp(statistics.fmean(math.log(f) for f in factors))


F1_HOLDS = [5.0, 6.0, 5.5, 6.5, 6.0]
F1_FAILS = [1.5, 2.0, 1.8, 1.6, 1.7]  # the reproduction's 1.5–2×
F1_WIDE = [2.0, 8.0, 3.0, 6.0, 4.0]


def _f1_check(factors, reach: str, fit: str):
    def check(v):
        assert part_verdicts(v) == [reach, fit]
        assert {int(s): f for s, f in v.details["factors"].items()} == {s: approx(f) for s, f in zip(SEEDS, factors)}
        lo, hi = hand_t_interval([math.log(f) for f in factors])
        assert v.interval == [approx(math.exp(lo)), approx(math.exp(hi))]
        # nGPT at a quarter of the steps − Pre-LN at the full budget: −K·ln(F_s / 4) per seed
        assert v.details["reach"]["diff"] == approx(mean([-K * math.log(f / 4) for f in factors]))
        assert v.n_seeds == 5 and v.seeds == SEEDS
    return check


@scenario("F1", HOLDS, _geo(F1_HOLDS))
def f1_ngpt_five_to_six_times_faster():
    return Case(_f1(five(2.0), F1_HOLDS) + noise("F1"), check=_f1_check(F1_HOLDS, HOLDS, HOLDS))


@scenario("F1", FAILS, _geo(F1_FAILS))
def f1_ngpt_two_times_faster_as_the_reproduction_found():
    return Case(_f1(five(2.0), F1_FAILS), check=_f1_check(F1_FAILS, FAILS, FAILS))


@scenario("F1", INCONCLUSIVE, _geo(F1_WIDE))
def f1_factor_interval_straddles_four():
    # the per-seed factors spread from 2 to 8: the factor's interval holds 4, nGPT at 75 steps is unclear
    return Case(_f1(five(2.0), F1_WIDE), check=_f1_check(F1_WIDE, INCONCLUSIVE, INCONCLUSIVE))


@scenario("F1", FAILS, _geo(F1_HOLDS))
def f1_ngpt_fails_to_train_at_a_quarter_of_the_steps():
    # stuck on the plateau at 75 steps in every seed: it does not reach Pre-LN's loss there (sign test 5–0),
    # whatever its factor fitted from 150 and 300 steps says
    def check(v):
        assert part_verdicts(v) == [FAILS, HOLDS]
        assert v.details["ngpt_quarter"]["n_failed_to_train"] == 5
        assert v.parts[0]["value"] is None  # no loss to compare: it failed, it did not end worse
    return Case(_f1(five(2.0), F1_HOLDS, at={QUARTER: [STUCK] * 5}), check=check)


@scenario("F1", FAILS, None)
def f1_ngpt_diverges_at_every_budget():
    def check(v):
        assert part_verdicts(v) == [FAILS, INCONCLUSIVE]
        assert v.interval is None and all(f is None for f in v.details["factors"].values())
    return Case(_f1(five(2.0), F1_HOLDS, at={b: [None] * 5 for b in F1_BUDGETS}), check=check)


def test_f1_below_the_papers_budget_is_scoped_not_refuted():
    """The authors expect the 4× at ≈ 200k steps and a smaller factor in shorter runs (NVIDIA/ngpt README.md
    L57): a factor under 4 here is inconclusive, not at the paper's scale, with the factor at each budget and its
    trend (paired by seed) in the verdict; a factor that reaches 4 already holds."""
    from normlab.report.outcome import OFF_SCALE
    claim = CLAIMS.get("F1")()
    v = claim.judge(_f1(five(2.0), F1_FAILS, growth=1.5), None, P)
    assert v.verdict == INCONCLUSIVE and v.why == OFF_SCALE and "not at the paper's budget" in v.summary
    by = {int(h): f for h, f in v.details["factors_by_budget"].items()}
    assert {int(s): f for s, f in by[FULL].items()} == {s: approx(f) for s, f in zip(SEEDS, F1_FAILS)}
    assert v.details["trend"]["ratio"] == approx(1.5) and v.details["trend"]["from"] == FULL
    assert claim.judge(_f1(five(2.0), F1_HOLDS), None, P).verdict == HOLDS


@scenario("F1", INCONCLUSIVE, None)
def f1_pre_ln_never_trains():
    # no Pre-LN loss to reach: neither part can decide
    return Case(_f1([STUCK] * 5, [5.0] * 5, at={b: five(2.0) for b in F1_BUDGETS}),
                check=lambda v: part_verdicts(v) == [INCONCLUSIVE, INCONCLUSIVE])


# =========================================================================================
# F2 — DyT matches LayerNorm at both budgets (value: DyT − LN at the long budget, paired over seeds)
# =========================================================================================
F2_LONG = CLAIMS.get("F2").knobs(P).long_steps


def _f2(dyt_short, ln_short, dyt_long, ln_long, decay_all=None) -> list[RunRecord]:
    """DyT against RMSNorm, the norm it replaces in DyT's LLaMA code (`ln_*`: RMSNorm's losses); `decay_all`: DyT
    with every parameter decayed, as its trainer does (default: DyT's short losses + 0.5, to be ignored)."""
    decay = decay_all or [x + 0.5 if isinstance(x, float) else x for x in dyt_short]
    return (arm_runs("F2", run("F2", norm="dyt", steps=FULL, **{"train.weight_decay_on": "every parameter"}), decay)
            + arm_runs("F2", run("F2", norm="dyt", steps=FULL, **{"train.weight_decay_on": "matrices"}), dyt_short)
            + arm_runs("F2", run("F2", norm="rmsnorm", steps=FULL), ln_short)
            + arm_runs("F2", run("F2", norm="dyt", steps=F2_LONG), dyt_long)
            + arm_runs("F2", run("F2", norm="rmsnorm", steps=F2_LONG), ln_long))


def _built(cid: str, **want: Any):
    """The model of one of claim `cid`'s runs, as the study configures it (seed 0), with a tiny vocabulary."""
    cfg = build_config(P, {INIT_KEY: CLAIMS.get(cid).init, **run(cid, **want)}, 0).model
    return build_model(cfg.model_copy(update={"vocab_size": 20}))


def test_dyt_and_derf_arms_train_as_their_language_model_code():
    """DyT and Derf: the learnable embedding scalar from √d (their `shared_scale`), DyT's α0 from its width table
    (1.0 / 1.0 at the preset's width 64, the table's narrowest row), Derf's α0 = 1.0; the baselines without the
    scalar. F2 as DyT's LLaMA trainer: the `llama` init (σ·√d of 0.02 at 4096, no ÷ √(2L)), an untied head,
    RMSNorm as the baseline. F3 as Derf's nanoGPT patch: GPT-2's init at 768, GELU, learned positions scaled with
    the tokens, Derf's β, no other biases."""
    d = P.base["model.d_model"]
    for cid, want in (("F2", {"norm": "dyt", "steps": FULL, "train.weight_decay_on": "matrices"}), ("F3", {"norm": "dyt"}),
                      ("F3", {"norm": "derf"})):
        m = _built(cid, **want)
        assert isinstance(m.embed_scale, torch.nn.Parameter) and m.embed_scale.item() == pytest.approx(math.sqrt(d))
        alphas = {n: p.item() for n, p in m.named_parameters() if n.endswith(".alpha") or n == "final_norm.alpha"}
        assert alphas and set(alphas.values()) == {1.0}, alphas
    for want in ({"norm": "dyt", "steps": FULL, "train.weight_decay_on": "matrices"}, {"norm": "rmsnorm", "steps": FULL}):
        m = _built("F2", **want)
        assert m.cfg.init == "llama" and not m.cfg.tie_weights and m.lm_head.weight is not m.wte.weight
        assert m.init_record["residual_outputs"].startswith("as linear")  # no ÷ √(2L)
    assert _built("F2", norm="rmsnorm", steps=FULL).embed_scale == 1.0
    derf, ln = _built("F3", norm="derf"), _built("F3", norm="layernorm")
    for m in (derf, ln):
        assert (m.cfg.init, m.cfg.mlp, m.cfg.positions, m.cfg.bias) == ("gpt2", "gelu", "learned", False)
    assert derf.cfg.embed_scale_positions and derf.cfg.norm_bias and not ln.cfg.resolved_norm_bias()
    assert ln.embed_scale == 1.0


def test_ngpts_baseline_is_its_codes_untied_rmsnorm_pre_ln():
    m = _built("F1", scheme="pre", steps=FULL)
    assert (m.cfg.scheme, m.cfg.norm, m.cfg.tie_weights) == ("pre", "rmsnorm", False)


SMALL = [0.003, -0.002, 0.004, -0.001, 0.001]  # a paired difference well inside ±margin
NOISY = [0.05, -0.03, 0.04, -0.02, 0.01]  # mean +0.01, its 90 % interval spanning the margin


@scenario("F2", HOLDS, mean(SMALL))
def f2_dyt_matches_at_both_budgets():
    ln, ln_long = five(2.0), five(1.8)
    def check(v):
        assert part_verdicts(v) == [HOLDS, HOLDS]
        assert v.details["short_gap"] == approx(mean([-d for d in SMALL]))
        assert v.n_seeds == 5
    return Case(_f2(plus(ln, [-d for d in SMALL]), ln, plus(ln_long, SMALL), ln_long) + noise("F2"), check=check)


def test_f2_reports_dyts_own_weight_decay_beside_the_verdict():
    """DyT's trainer decays every parameter; normlab decays matrices. The deviation's effect is measured at the
    base budget and reported (`decay_every_parameter`), never a part of the verdict."""
    ln, ln_long = five(2.0), five(1.8)
    dyt = plus(ln, [-d for d in SMALL])
    v = run_claim("F2", Case(_f2(dyt, ln, plus(ln_long, SMALL), ln_long, decay_all=plus(dyt, [0.2] * 5))))
    assert part_verdicts(v) == [HOLDS, HOLDS]
    assert v.details["decay_every_parameter"]["value"] == approx(0.2)
    assert v.details["decay_every_parameter"]["verdict"] == FAILS and "reported, not required" in v.summary


@scenario("F2", FAILS, 0.06)
def f2_parity_reverses_at_the_longer_budget():
    # the published contradiction: DyT ends 0.06 nats worse at 600 steps
    ln, ln_long = five(2.0), five(1.8)
    def check(v):
        assert part_verdicts(v) == [HOLDS, FAILS]
        assert v.interval[0] > 0
    return Case(_f2(plus(ln, SMALL), ln, five(1.86, 0.002), ln_long), check=check)


@scenario("F2", INCONCLUSIVE, mean(NOISY))
def f2_long_budget_gap_unclear():
    ln, ln_long = five(2.0), five(1.8)
    return Case(_f2(plus(ln, SMALL), ln, plus(ln_long, NOISY), ln_long),
                check=lambda v: part_verdicts(v) == [HOLDS, INCONCLUSIVE])


@scenario("F2", INCONCLUSIVE, None)
def f2_dyt_diverges_at_the_longer_budget():
    # DyT diverges in every seed at 600 steps, LayerNorm in none. "Matches" is two-sided (either arm may fail more):
    # 5–0 is p = 2/32 = 0.0625, which cannot reach α = 0.05 (`by_failures`), and no DyT run trained for a loss test
    ln, ln_long = five(2.0), five(1.8)
    return Case(_f2(plus(ln, SMALL), ln, [None] * 5, ln_long),
                check=lambda v: part_verdicts(v) == [HOLDS, INCONCLUSIVE])


@scenario("F2", INCONCLUSIVE, mean(SMALL[1:]))
def f2_dyt_fails_to_train_in_one_seed():
    # the same loss where both trained, but one seed of DyT stuck: not "the same" (it failed once), nor proven
    # to fail more often (1 discordant seed)
    ln, ln_long = five(2.0), five(1.8)
    long_dyt = [STUCK] + plus(ln_long, SMALL)[1:]
    return Case(_f2(plus(ln, SMALL), ln, long_dyt, ln_long),
                check=lambda v: part_verdicts(v) == [HOLDS, INCONCLUSIVE])


# =========================================================================================
# beats claims: F3 (Derf), F4 (Mix-LN), F6 (HybridNorm, reordered) (value: the first other arm − the winner)
# =========================================================================================
def _beats(cid: str, losses: dict[str, list[Any]], key: str) -> list[RunRecord]:
    """`losses`: {a value of `key` (norm or scheme): its 5 seeds' losses}, one per run of the claim."""
    assert len(losses) == len(runs_of(cid))
    return [r for v, ls in losses.items() for r in arm_runs(cid, run(cid, **{key: v}), ls)]


W = five(2.0, 0.001)  # the winner's seeds


def _arms(v: Verdict) -> dict[str, tuple[int, int]]:
    return {k: (a["n_trained"], a["n_runs"]) for k, a in v.details["arms"].items()}


# -- F3: Derf matches LayerNorm and beats DyT (value: Derf − LayerNorm) ---------------------
def _f3(derf, dyt, ln):
    return _beats("F3", {"derf": derf, "dyt": dyt, "layernorm": ln}, "norm")


LN3 = five(2.0, 0.001)


@scenario("F3", HOLDS, mean(SMALL))
def f3_derf_matches_layernorm_and_beats_dyt():
    # Derf's GPT-2 table: LN 2.94, Derf 2.94, DyT 2.97
    def check(v):
        assert part_verdicts(v) == [HOLDS, HOLDS]
        assert v.parts[1]["value"] == approx(0.05 - mean(SMALL))  # DyT − Derf
        assert _arms(v) == {"Derf": (5, 5), "LayerNorm": (5, 5), "DyT": (5, 5)}
    return Case(_f3(plus(LN3, SMALL), five(2.05, 0.002), LN3) + noise("F3"), check=check)


@scenario("F3", FAILS, 0.03)
def f3_layernorm_better_than_derf():
    return Case(_f3(W, five(2.06, 0.002), five(1.97, 0.002)),
                check=lambda v: part_verdicts(v) == [FAILS, HOLDS] and "the paper measured GPT-2" in v.summary)


@scenario("F3", FAILS, mean(SMALL))
def f3_derf_no_better_than_dyt():
    return Case(_f3(plus(LN3, SMALL), plus(LN3, [2 * d for d in SMALL]), LN3),
                check=lambda v: part_verdicts(v) == [HOLDS, FAILS])


@scenario("F3", INCONCLUSIVE, mean(NOISY))
def f3_layernorm_gap_unclear():
    return Case(_f3(plus(LN3, NOISY), five(2.08, 0.003), LN3),
                check=lambda v: part_verdicts(v) == [INCONCLUSIVE, HOLDS])


# -- F4: Mix-LN beats Pre-LN and Post-LN --------------------------------------------------
def _f4(mix, pre, post):
    return _beats("F4", {"mix": mix, "pre": pre, "post": post}, "scheme")


@scenario("F4", HOLDS, 0.03)
def f4_post_diverges_and_pre_is_worse():
    def check(v):
        assert part_verdicts(v) == [HOLDS, HOLDS]
        assert v.parts[1]["value"] is None and _arms(v)["Post-LN"] == (0, 5)
    return Case(_f4(W, five(2.03, 0.002), [None] * 5) + noise("F4"), check=check)


@scenario("F4", FAILS, mean(SMALL))
def f4_mix_ties_pre():
    return Case(_f4(W, plus(W, SMALL), five(2.1, 0.002)),
                check=lambda v: part_verdicts(v) == [FAILS, HOLDS] and v.parts[1]["value"] == approx(0.1))


@scenario("F4", INCONCLUSIVE, 0.05)
def f4_post_diverges_in_two_seeds_and_ties_elsewhere():
    # Post-LN diverges in 2 seeds (sign test p = 1/4: not "more often"), ties where it trains: neither rule
    post = [None, None] + plus(W, SMALL)[2:]
    def check(v):
        assert part_verdicts(v) == [HOLDS, INCONCLUSIVE]
        assert v.parts[1]["value"] == approx(mean(SMALL[2:]))
    return Case(_f4(W, five(2.05, 0.002), post), check=check)


# -- F6: HybridNorm and OLMo 2's reordered norm beat Pre-LN, each under its own code's init -------------
PAPER_INIT, SCALED_INIT = "llama", "gpt2"  # N(0, 0.02) at 4096 without residual scaling (LNS's, OLMo 2's); GPT-2's


def _f6(pre, hybrid, reordered, pre_olmo=None):
    """Pre-LN and HybridNorm under GPT-2's init (HybridNorm's code scales like it); OLMo 2's arm and its Pre-LN
    under OLMo 2's own init (`pre_olmo`: default, the same losses as `pre`)."""
    return (arm_runs("F6", run("F6", scheme="pre", init=SCALED_INIT), pre)
            + arm_runs("F6", run("F6", scheme="hybrid"), hybrid)
            + arm_runs("F6", run("F6", scheme="reordered"), reordered)
            + arm_runs("F6", run("F6", scheme="pre", init=PAPER_INIT), pre_olmo or pre))


def test_f6_olmo2_arm_is_trained_under_olmo2s_init():
    cfg = _config(json.dumps({INIT_KEY: "gpt2", **run("F6", scheme="reordered")}, sort_keys=True), 0)
    assert (cfg.model.init, cfg.model.qk_norm) == ("llama", "full_width")
    assert run("F6", scheme="pre", init=PAPER_INIT) == run("F5", scheme="pre", init=PAPER_INIT)  # shared runs


@scenario("F6", HOLDS, 0.03)
def f6_both_beat_pre():
    def check(v):
        assert part_verdicts(v) == [HOLDS, HOLDS] and v.parts[1]["value"] == approx(0.04)
        assert "Keel" in v.settings["contradiction"] and "4.9e-4" in v.settings["contradiction"]
    return Case(_f6(five(2.03, 0.002), W, five(1.99, 0.001)) + noise("F6"), check=check)


@scenario("F6", FAILS, 0.03)
def f6_reordered_ties_pre():
    pre = five(2.03, 0.002)
    return Case(_f6(pre, W, plus(pre, [-d for d in SMALL])),
                check=lambda v: part_verdicts(v) == [HOLDS, FAILS] and v.parts[1]["value"] == approx(mean(SMALL)))


@scenario("F6", FAILS, 0.03)
def f6_reordered_beats_the_wrong_pre_ln_only():
    # OLMo 2's arm beats Pre-LN under GPT-2's init, but ties the Pre-LN under its own init: the pairing counts
    pre, pre_olmo = five(2.03, 0.002), five(1.99, 0.001)
    return Case(_f6(pre, W, plus(pre_olmo, [-d for d in SMALL]), pre_olmo),
                check=lambda v: part_verdicts(v) == [HOLDS, FAILS])


@scenario("F6", INCONCLUSIVE, 0.03)
def f6_reordered_gap_unclear():
    pre = five(2.03, 0.002)
    reordered = [p - d - 0.01 for p, d in zip(pre, NOISY)]  # Pre-LN − reordered: NOISY + 0.01
    return Case(_f6(pre, W, reordered), check=lambda v: part_verdicts(v) == [HOLDS, INCONCLUSIVE]
                and v.parts[1]["value"] == approx(mean(NOISY) + 0.01))


@scenario("F6", HOLDS, None)
def f6_pre_fails_to_train():
    # Pre-LN stuck in 3 seeds, diverged in 2: both beat it by failures (sign test 5–0)
    return Case(_f6([STUCK, None, STUCK, None, STUCK], W, five(1.99, 0.001)),
                check=lambda v: part_verdicts(v) == [HOLDS, HOLDS])


# =========================================================================================
# F5 — LNS beats Pre-LN under the paper's init; under GPT-2's reported, not required (value: Pre-LN − LNS)
# =========================================================================================
def _f5(lns_paper, pre_paper, lns_scaled, pre_scaled):
    out = []
    for init, lns, pre in ((PAPER_INIT, lns_paper, pre_paper), (SCALED_INIT, lns_scaled, pre_scaled)):
        out += arm_runs("F5", run("F5", scheme="lns", init=init), lns)
        out += arm_runs("F5", run("F5", scheme="pre", init=init), pre)
    return out


def test_f5_inits_are_the_papers_and_gpt2s():
    paper = _config(json.dumps({INIT_KEY: "gpt2", **run("F5", scheme="lns", init=PAPER_INIT)},
                               sort_keys=True), 0).model
    scaled = _config(json.dumps({INIT_KEY: "gpt2", **run("F5", scheme="lns", init=SCALED_INIT)},
                                sort_keys=True), 0).model
    assert paper.init == "llama" and scaled.init == "gpt2"  # the recipes fix the residual scaling


def _scaled(verdict, gap):
    def check(v):
        assert part_verdicts(v) == [HOLDS]  # the scaled-init comparison is not a part: it is reported
        assert v.details["scaled"]["verdict"] == verdict and v.details["scaled_gap"] == approx(gap)
        assert "reported, not required" in v.summary
    return check


@scenario("F5", HOLDS, 0.04)
def f5_lns_beats_pre_under_both_inits():
    return Case(_f5(W, five(2.04, 0.002), five(1.95, 0.001), five(1.98, 0.002)) + noise("F5"),
                check=_scaled(HOLDS, 0.03))


@scenario("F5", HOLDS, 0.04)
def f5_benefit_gone_under_scaled_init_is_reported_not_required():
    # the authors' own caveat: under GPT-2's scaled init LNS is no better than Pre-LN; the headline still holds
    scaled = five(1.95, 0.001)
    return Case(_f5(W, five(2.04, 0.002), scaled, plus(scaled, [-d for d in SMALL])),
                check=_scaled(FAILS, mean([-d for d in SMALL])))


@scenario("F5", FAILS, mean(SMALL))
def f5_lns_ties_pre_under_the_paper_init():
    return Case(_f5(W, plus(W, SMALL), five(1.95, 0.001), five(1.98, 0.002)),
                check=lambda v: part_verdicts(v) == [FAILS] and "the paper measured LLaMA" in v.summary)


@scenario("F5", INCONCLUSIVE, mean(NOISY))
def f5_paper_init_gap_unclear():
    return Case(_f5(W, plus(W, NOISY), five(1.95, 0.001), five(1.98, 0.002)),
                check=lambda v: part_verdicts(v) == [INCONCLUSIVE])


@scenario("F5", HOLDS, None)
def f5_pre_fails_to_train_under_the_paper_init():
    # Pre-LN under N(0, 0.02) without residual scaling stuck in every seed: LNS beats it by failures
    return Case(_f5(W, [STUCK] * 5, five(1.95, 0.001), five(1.98, 0.002)),
                check=lambda v: part_verdicts(v) == [HOLDS])


# =========================================================================================
# F7 — QK-norm raises the highest trainable lr without warmup (value: per head's highest trainable lr)
# =========================================================================================
QK_LRS = list(CLAIMS.get("F7").knobs(P).lrs)
LOW, MID, TOP = QK_LRS  # the grid's three lrs, whatever the preset sets
OK, DIV = [2.0] * 5, [None] * 5
ONE_DIVERGED = [None, 2.0, 2.0, 2.0, 2.0]  # 4 of 5 trained: still "trains" (≥ TRAINS)
TWO_FAILED = [None, STUCK, 2.0, 2.0, 2.0]  # 3 of 5: does not


def test_f7_grid_and_threshold():
    assert len(QK_LRS) == 3 and QK_LRS == sorted(QK_LRS) and TRAINS == 0.8


def _f7(none: list[list[Any]], per_head: list[list[Any]], full_width: list[list[Any]]) -> list[RunRecord]:
    """Each mode's 5 seeds' losses at each lr of the grid (in order)."""
    out = []
    for mode, by_lr in (("none", none), ("per_head", per_head), ("full_width", full_width)):
        for lr, losses in zip(QK_LRS, by_lr, strict=True):
            out += arm_runs("F7", run("F7", qk_norm=mode, lr=lr), losses)
    return out


def _f7_raises_the_limit():
    # none trains up to MID (one seed diverged there: 4/5 still trains) and diverges at TOP; per head trains at
    # every lr; full width too (4/5 at TOP)
    return _f7(none=[OK, ONE_DIVERGED, DIV], per_head=[OK, OK, OK], full_width=[OK, OK, ONE_DIVERGED])



@scenario("F7", HOLDS, TOP)
def f7_qk_norm_trains_at_higher_lr():
    return Case(_f7_raises_the_limit() + noise("F7"), check=lambda v: part_verdicts(v) == [HOLDS, HOLDS])


def test_f7_highest_trainable_lr_by_hand():
    """The value and the limits: per head trains at every lr,
    full width up to TOP (4/5 seeds there), none up to MID (4/5 there, none at TOP)."""
    v = run_claim("F7", Case(_f7_raises_the_limit() + noise("F7")))
    assert v.value == TOP
    assert v.details["highest_lr"] == {"none": MID, "per_head": TOP, "full_width": TOP}
    assert v.n_seeds == 5
    assert [p["value"] for p in v.parts] == [TOP, TOP]


@scenario("F7", INCONCLUSIVE, LOW)
def f7_same_limit_a_few_seeds_higher():
    # both train only at LOW by the grid's threshold; above it QK-norm trains in 3 of 5 seeds, none in 0: per seed,
    # QK-norm's own limit is the higher in 3 (p = 1/8), each seed once though it trained at two more lrs (pooled
    # over the (lr, seed) pairs, 6 of them made p = 1/64: correlated pairs counted as independent)
    def check(v):
        assert part_verdicts(v) == [INCONCLUSIVE, INCONCLUSIVE]
        assert "higher in 3 seeds, the lower in 0 (p = 0.125)" in v.parts[0]["summary"]
    return Case(_f7(none=[OK, DIV, DIV], per_head=[OK, TWO_FAILED, TWO_FAILED],
                    full_width=[OK, TWO_FAILED, TWO_FAILED]), check=check)


@scenario("F7", FAILS, LOW)
def f7_qk_norm_lowers_the_limit():
    # each QK-norm trains only at LOW (one seed diverged there), none up to MID: 6 (lr, seed) pairs where QK-norm
    # alone did not train, p = 1/64, below the 0.025 a bundled claim's "does not hold" needs per part
    return Case(_f7(none=[OK, OK, DIV], per_head=[ONE_DIVERGED, DIV, DIV], full_width=[ONE_DIVERGED, DIV, DIV]),
                check=lambda v: part_verdicts(v) == [FAILS, FAILS])


@scenario("F7", INCONCLUSIVE, LOW)
def f7_a_lower_limit_the_seeds_do_not_back_decides_nothing():
    # per head's limit is LOW where none's is MID, but only 2 pairs (p = 1/4) say so: no test, no decision
    def check(v):
        assert part_verdicts(v) == [INCONCLUSIVE, INCONCLUSIVE]
        assert "a lower limit, but too few seeds whose own limits differ" in v.parts[0]["summary"]
    return Case(_f7(none=[OK, OK, DIV], per_head=[OK, TWO_FAILED, DIV], full_width=[OK, OK, DIV]), check=check)


@scenario("F7", INCONCLUSIVE, MID)
def f7_same_limit_below_the_top_no_fewer_failures():
    # the same limit, one pair apart: the test cannot call it either way
    def check(v):
        assert part_verdicts(v) == [INCONCLUSIVE, INCONCLUSIVE]
        assert all("the same limit" in p["summary"] for p in v.parts)
    return Case(_f7(none=[OK, OK, DIV], per_head=[OK, OK, DIV], full_width=[OK, ONE_DIVERGED, DIV]), check=check)


@scenario("F7", INCONCLUSIVE, None)
def f7_nothing_trains_anywhere():
    # every run of the grid diverged or failed to train: a lower grid would decide
    def check(v):
        assert part_verdicts(v) == [INCONCLUSIVE, INCONCLUSIVE]
        assert v.details["highest_lr"] == {"none": None, "per_head": None, "full_width": None}
        assert all("neither trains" in p["summary"] for p in v.parts)
    return Case(_f7(none=[DIV, DIV, [STUCK] * 5], per_head=[DIV, [STUCK] * 5, DIV], full_width=[DIV] * 3),
                check=check)


@scenario("F7", INCONCLUSIVE, TOP)
def f7_everything_trains():
    # all three train at every lr: a higher lr would decide
    return Case(_f7(none=[OK] * 3, per_head=[OK] * 3, full_width=[OK] * 3),
                check=lambda v: v.details["highest_lr"] == {"none": TOP, "per_head": TOP, "full_width": TOP})


@scenario("F7", INCONCLUSIVE, TOP)
def f7_everything_trains_for_the_right_reason():
    def check(v):
        assert all("higher lrs would decide" in p["summary"] for p in v.parts), [p["summary"] for p in v.parts]
    return Case(_f7(none=[OK] * 3, per_head=[OK] * 3, full_width=[OK] * 3), check=check)


# =========================================================================================
# F8 — Keel's highest trainable lr at depth, with warmup, is above Post-LN's and Pre-LN's (value: Keel's limit)
# =========================================================================================
DEPTH = CLAIMS.get("F8").knobs(P).depth
KEEL_LRS = sorted(CLAIMS.get("F8").knobs(P).lrs)
K1, K2, K3, K4, K5 = KEEL_LRS  # the grid's five lrs, low to high, whatever the preset sets


def test_f8_is_the_papers_claim_at_depth_with_warmup():
    """≥ 16 layers, every arm at the preset's warmup (the paper's runs all warm up), five lrs a factor ~3 apart."""
    assert DEPTH >= 16 and len(KEEL_LRS) == 5
    assert all(b / a == pytest.approx(10 ** 0.5, rel=0.06) for a, b in zip(KEEL_LRS, KEEL_LRS[1:]))
    runs = runs_of("F8")
    assert len(runs) == 3 * 5 and {r["model.scheme"] for r in runs} == {"keel", "post", "pre"}
    assert all(r["train.warmup_steps"] == P.warmup and r["model.n_layer"] == DEPTH for r in runs)
    assert "secondary summaries" not in (CLAIMS.get("F8").__doc__ or "")


def _f8(keel: list[list[Any]], post: list[list[Any]], pre: list[list[Any]]) -> list[RunRecord]:
    """Each scheme's 5 seeds' losses at each lr of the grid (in order)."""
    out = []
    for scheme, by_lr in (("keel", keel), ("post", post), ("pre", pre)):
        for lr, losses in zip(KEEL_LRS, by_lr, strict=True):
            out += arm_runs("F8", run("F8", scheme=scheme, lr=lr), losses)
    return out


def up_to(k: int, above=DIV) -> list[list[Any]]:
    """Trains in every seed at the grid's first k lrs, `above` at the rest."""
    return [OK] * k + [above] * (5 - k)


def _f8_parts(*want):
    return lambda v: part_verdicts(v) == list(want)


@scenario("F8", HOLDS, K4)
def f8_keel_trains_at_higher_lrs_than_both():
    # Keel up to K4, Pre-LN up to K3, Post-LN up to K2: per seed, Keel's own limit is the higher against each in all 5
    # seeds (p = 1/32 each: a seed counts once, though Post-LN's limit is two lrs below Keel's)
    def check(v):
        assert part_verdicts(v) == [HOLDS, HOLDS]
        assert v.details["highest_lr"] == {"Keel": K4, "Post-LN": K2, "Pre-LN": K3}
        post, pre = v.details["limits_split"]["Post-LN"], v.details["limits_split"]["Pre-LN"]
        assert (post["a_higher"], post["b_higher"], pre["a_higher"]) == (5, 0, 5)
        assert post["p_one_sided"] == approx(1 / 32) == pre["p_one_sided"]
        assert "p = 0.0312" in v.parts[0]["summary"]
        assert v.n_seeds == 5 and v.settings["n_layer"] == DEPTH and v.settings["warmup_steps"] == P.warmup
    return Case(_f8(up_to(4), up_to(2), up_to(3)) + noise("F8"), check=check)


@scenario("F8", HOLDS, K3)
def f8_post_ln_never_trains():
    return Case(_f8(up_to(3), up_to(0, [STUCK] * 5), up_to(2)), check=_f8_parts(HOLDS, HOLDS))


@scenario("F8", FAILS, K1)
def f8_keel_trains_at_a_lower_lr_than_pre_ln():
    # Keel and Post-LN stop at K1 (the same limit below the top), Pre-LN trains up to K3: at K2 Keel alone fails
    def check(v):
        # against Post-LN the same limit in every seed: no decision; against Pre-LN lower in all 5 seeds, p = 1/32
        assert part_verdicts(v) == [INCONCLUSIVE, FAILS]
        assert v.details["limits_split"]["Pre-LN"]["b_higher"] == 5
        assert "the paper measured 64 layers" in v.summary
    return Case(_f8(up_to(1), up_to(1), up_to(3)), check=check)


@scenario("F8", INCONCLUSIVE, K3)
def f8_keel_at_post_lns_limit_decides_nothing_against_it():
    # the same limit as Post-LN, no pair apart: no test calls it; above Pre-LN's, 5 pairs (p = 1/32) back it
    return Case(_f8(up_to(3), up_to(3), up_to(2)), check=_f8_parts(INCONCLUSIVE, HOLDS))


@scenario("F8", INCONCLUSIVE, K3)
def f8_limits_differ_but_the_seeds_do_not_back_them():
    # at K3 Keel trains in 4 of 5 seeds (a limit), Post-LN in 3 (not one) and Pre-LN in none: the seeds where one
    # alone failed are 1 (Post-LN) and 4 (Pre-LN), p = 1/2 and 1/16, neither below 0.05
    keel = [OK, OK, ONE_DIVERGED, DIV, DIV]
    def check(v):
        assert part_verdicts(v) == [INCONCLUSIVE, INCONCLUSIVE]
        assert v.details["highest_lr"] == {"Keel": K3, "Post-LN": K2, "Pre-LN": K2}
        assert all("more seeds would decide" in p["summary"] for p in v.parts)
    return Case(_f8(keel, [OK, OK, TWO_FAILED, DIV, DIV], [OK, OK, DIV, DIV, DIV]), check=check)


@scenario("F8", INCONCLUSIVE, K3)
def f8_same_limit_as_pre_ln_is_finer_than_the_grid():
    # Keel and Pre-LN both stop at K3 (below the top): the paper's gap, 1.01e-2 / 7.65e-3 = 1.3×, is finer than the
    # grid's ~3× steps, so the same limit cannot say "no higher": inconclusive, not a refutation
    def check(v):
        assert part_verdicts(v) == [HOLDS, INCONCLUSIVE]
        assert "finer than the grid" in v.parts[1]["summary"]
        assert v.details["limits_split"]["Pre-LN"]["finer_than_grid"]
    return Case(_f8(up_to(3), up_to(1), up_to(3)), check=check)


def test_f8_inconclusive_only_by_the_grids_resolution_is_off_scale():
    from normlab.report.outcome import OFF_GRID, OFF_SCALE
    v = CLAIMS.get("F8")().judge(_f8(up_to(3), up_to(1), up_to(3)), None, P)
    assert v.verdict == INCONCLUSIVE and v.why == OFF_SCALE
    # every arm trains at the grid's top: higher lrs would decide, not the paper's scale and not more seeds
    v = CLAIMS.get("F8")().judge(_f8(up_to(5), up_to(5), up_to(5)), None, P)
    assert v.verdict == INCONCLUSIVE and v.why == OFF_GRID


def test_f8_limits_the_seeds_do_not_back_are_underpowered_with_their_split_as_evidence():
    """Keel's limit above both others' but too few (lr, seed) pairs back it: the claim leaves its kind to the
    study, and its pooled split is the evidence the power plan projects (it once had none: "too few trained")."""
    from normlab.report.outcome import UNDERPOWERED
    from normlab.study.power import explain, leans

    keel = [OK, OK, ONE_DIVERGED, DIV, DIV]
    v = CLAIMS.get("F8")().judge(_f8(keel, [OK, OK, TWO_FAILED, DIV, DIV], [OK, OK, DIV, DIV, DIV]), None, P)
    assert v.verdict == INCONCLUSIVE and v.why == ""
    e = v.evidence
    assert (e.test, e.k, e.n) == ("sign", 1, 1) and "Post-LN" in e.what
    assert leans(v)
    v = explain(v, 0.05)
    assert v.why == UNDERPOWERED and v.needed is not None and v.needed > 5


def test_f7_everything_training_is_beyond_the_grid_and_its_split_is_recorded():
    from normlab.report.outcome import OFF_GRID
    from normlab.study.power import leans

    v = CLAIMS.get("F7")().judge(_f7(none=[OK] * 3, per_head=[OK] * 3, full_width=[OK] * 3), None, P)
    assert v.verdict == INCONCLUSIVE and v.why == OFF_GRID and not leans(v)
    assert v.evidence.test == "sign" and CLAIMS.get("F7").test_kind == "sign"
    # QK-norm's limit below none's in all 5 seeds (p = 1/32): past α = 0.05 for each part, not past the 0.025 a
    # bundled "does not hold" needs; limits that differ are not beyond the grid
    v = CLAIMS.get("F7")().judge(_f7(none=[OK, OK, DIV], per_head=[ONE_DIVERGED, DIV, DIV],
                                     full_width=[ONE_DIVERGED, DIV, DIV]), None, P)
    assert v.verdict == INCONCLUSIVE and v.why == "" and part_verdicts(v) == [FAILS, FAILS]


@scenario("F8", INCONCLUSIVE, K5)
def f8_everything_trains_at_every_lr():
    def check(v):
        assert all("higher lrs would decide" in p["summary"] for p in v.parts)
    return Case(_f8(up_to(5), up_to(5), up_to(5)), check=check)


@scenario("F8", INCONCLUSIVE, None)
def f8_nothing_trains_anywhere():
    def check(v):
        assert v.details["highest_lr"] == {"Keel": None, "Post-LN": None, "Pre-LN": None}
        assert all("lower lrs would decide" in p["summary"] for p in v.parts)
    return Case(_f8(up_to(0), up_to(0, [STUCK] * 5), up_to(0)), check=check)


# =========================================================================================
# the table-driven tests
# =========================================================================================
@pytest.mark.parametrize("claim, make, expected, value", SCENARIOS)
def test_verdict(claim, make, expected, value):
    case = make()
    v = run_claim(claim, case)
    assert isinstance(v, Verdict)
    check_verdict(v, claim, expected, value, case.check)


_GOOD = [p for p in SCENARIOS if not p.marks]


@pytest.mark.parametrize("claim, make, expected, value", _GOOD)
def test_verdict_and_figures_are_json_serializable(claim, make, expected, value):
    case = make()
    claim_obj = CLAIMS.get(claim)()
    v = claim_obj.verdict(case.records, None, P)
    assert json.loads(json.dumps(v.to_dict(), allow_nan=False))["verdict"] == expected
    assert isinstance(v.summary, str) and v.summary
    assert v.settings["paper"] == claim_obj.paper and v.settings["margin_nats"] == LOSS_MARGIN
    for fig in claim_obj.figures(case.records, None, P):
        json.dumps(fig.to_dict(), allow_nan=False)


def test_every_record_is_one_of_its_claims_runs_on_the_study_base():
    """The synthetic records are the real study's runs: each run of each claim, at each seed, selects exactly its
    own 5 records (strictly, against the base) out of all the claims' runs together."""
    records = [r for cid in FRONTIER_CLAIMS for o in runs_of(cid) for r in arm_runs(cid, o, [2.0] * 5)]
    for cid in FRONTIER_CLAIMS:
        init = CLAIMS.get(cid).init
        for o in runs_of(cid):
            where = flatten({INIT_KEY: init, **o})
            chosen = [r for r in records if r.matches(where)]
            assert {r.seed for r in chosen} == set(SEEDS) and len({r.config.hash() for r in chosen}) == 5, (cid, o)


# outcomes a rule cannot reach today, each shown by an xfail(strict) BUG scenario above; mend the rule, drop the
# `bug=` marks (their XPASS says when) and empty this
UNREACHABLE: dict[str, set[str]] = {}


def test_every_frontier_claim_has_holds_fails_and_inconclusive_scenarios():
    assert FRONTIER_CLAIMS == [f"F{i}" for i in range(1, 9)]
    missing = {c: OUTCOMES - COVERED.get(c, set()) for c in FRONTIER_CLAIMS}
    assert {c: m for c, m in missing.items() if m} == UNREACHABLE
    bugged = {(p.values[0], p.values[2]) for p in SCENARIOS if p.marks}
    assert all((c, o) in bugged for c, m in UNREACHABLE.items() for o in m)


def test_a_frontier_claim_is_refused_outside_the_frontier_preset():
    """F claims are judged in their papers' setup, which is the frontier preset's base: on another preset's base
    (learned positions, GELU, Xiong's init) they would give verdicts about a setup no paper trained."""
    from normlab.config import ConfigError
    from normlab.study.load import load_study

    with pytest.raises(ConfigError, match=r"claims F1, F8 are judged in their papers' setup.*--preset frontier"):
        load_study("standard", claims=["C1", "F1", "F8"])
    assert load_study("frontier", claims=["F1"]).claims == ["F1"]
