"""The synthetic verdict scenarios of the claims' tests. The table each verdict test module fills with situations
that must give an outcome, and which outcomes each claim's rule was shown to reach: C1–C16 in
test_verdicts_<module>.py, one module of tests per claims module, F1–F8 in test_frontier_verdicts.py. For the seed
claims, what their scenarios are built from (a small preset, run records as a study holds them, five seeds'
losses) and the two table-driven tests over a module's table (`table_tests`)."""
from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any, Callable, NamedTuple

import pytest

from normlab.config import derive, validate_config
from normlab.study.claims import CLAIMS, Verdict
from normlab.study.records import RunRecord, flatten
from normlab.study.presets import PRESETS, Preset

NO_VALUE = object()


class Scenarios:
    """`scenario = Scenarios()`; `@scenario("C1", HOLDS, 0.25)` registers a function that builds a case. A
    scenario with `bug=` is a strict xfail and does not count toward its claim's reached outcomes."""

    def __init__(self):
        self.params: list[Any] = []  # pytest params (claim, builder, expected, value)
        self.covered: dict[str, set[str]] = {}  # claim -> the outcomes its scenarios reach

    def __call__(self, claim: str, expected: str, value: Any = NO_VALUE, *, bug: str | None = None, raises=None):
        def deco(fn: Callable[[], Any]):
            marks = [pytest.mark.xfail(strict=True, reason=f"BUG: {bug}", raises=raises)] if bug else []
            self.params.append(pytest.param(claim, fn, expected, value, id=f"{claim}-{fn.__name__}", marks=marks))
            if not bug:
                self.covered.setdefault(claim, set()).add(expected)
            return fn
        return deco

    @property
    def good(self) -> list[Any]:
        """The scenarios that are not a known bug's (no xfail mark)."""
        return [p for p in self.params if not p.marks]


def check_verdict(v, claim: str, expected: str, value: Any, check: Callable | None) -> None:
    """A scenario's verdict: of its claim, the expected outcome, the hand-computed value (where given) and the
    scenario's own assertions (a lambda's `and` chain that returns False is a miss)."""
    assert isinstance(v, Verdict)
    assert v.id == claim
    assert v.outcome.text == expected, v.summary
    if value is not NO_VALUE:
        assert v.value == (None if value is None else pytest.approx(value, rel=1e-9, abs=1e-12)), v.summary
    if check:
        assert check(v) is not False, v.summary


# -- presets ------------------------------------------------------------------------------
def with_knobs(preset: Preset, name: str, **knobs: dict[str, Any]) -> Preset:
    """`preset` under another name with some claims' knobs changed: `with_knobs(P, "unit-deep", C8={...})`."""
    return dataclasses.replace(preset, name=name, knobs={**preset.knobs, **knobs})


P = with_knobs(dataclasses.replace(
    PRESETS["quick"], lrs=[1e-3, 3e-3, 1e-2], warmup=50, lr_fixed=3e-3, depths=[2, 4, 8],
    base={**PRESETS["quick"].base, "model.n_layer": 4, "train.steps": 300}, depth_cell={}), "unit",
    C10={"repeats": 3})
# C5 and C6 measured in a depth cell deeper and longer than the sweep (the standard preset's shape: C7 stays out)
CELL = dataclasses.replace(P, name="unit-cell", depth_cell={"model.n_layer": 12, "train.steps": 1000})
DEEP = with_knobs(P, "unit-deep", C8={"depths": [8, 16], "base": {"model.d_model": 32}})
W = P.warmup  # the "with warmup" length
LRS = P.lrs
LR = P.lr_fixed

# -- synthetic records --------------------------------------------------------------------
_ids = itertools.count()
_AUTO = object()


def rec(scheme="pre", lr=LR, warmup=W, n_layer=4, seed=0, val_loss: Any = _AUTO, status="completed",
        norm="layernorm", final_norm=None, mlp="gelu", bias=False, d_model=64, layers_init=None,
        layers_final=None, layer_skip=None, tokens_per_s=None, steps=300, xavier=False, val_curve=None,
        reason: Any = _AUTO) -> RunRecord:
    """A RunRecord whose `config` is a real run's (validated, every other field its default); `reason=PLATEAU_REASON`
    with status "failed_to_train" is a run the plateau stop ended early (censored)."""
    if val_loss is _AUTO:
        val_loss = {"completed": 1.9, "failed_to_train": STUCK_LOSS}.get(status)
    model = {"block_size": 64, "n_layer": n_layer, "n_head": 4, "d_model": d_model, "scheme": scheme,
             "norm": norm, "mlp": mlp, "bias": bias}
    if final_norm is not None:
        model["final_norm"] = final_norm
    if xavier:  # Xiong et al.'s init (C2)
        model.update({"init": "xavier", "init_residual_scaling": False})
    config = {"model": model, "train": {"lr": lr, "warmup_steps": warmup, "seed": seed, "steps": steps},
              "diagnostics": {"interval": 100, "layer_skip": True}}
    return RunRecord(id=f"r{next(_ids)}", config=validate_config(config), status=status, base=BASE,
                     step=steps if status == "completed" else steps // 3, val_loss=val_loss,
                     reason=("loss diverged" if status == "diverged" else None) if reason is _AUTO else reason,
                     layers_init=layers_init or {}, layers_final=layers_final or {}, layer_skip=layer_skip,
                     tokens_per_s=tokens_per_s, val_curve=list(val_curve or []))


# the study's base config, as compute_verdicts sets it: groups match it on every axis they do not name
BASE = flatten(validate_config({"model": {"block_size": 64, "n_layer": 4, "n_head": 4, "d_model": 64, "scheme": "pre",
                                          "norm": "layernorm", "mlp": "gelu", "bias": False},
                                "train": {"lr": LR, "warmup_steps": W, "steps": 300},
                                "diagnostics": {"interval": 100, "layer_skip": True}}).to_dict())


def changed(record: RunRecord, settings: dict[str, Any]) -> RunRecord:
    """The record with these settings (dotted keys) changed in its config, validated."""
    return dataclasses.replace(record, config=derive(record.config, settings))


STUCK = "stuck"  # in a `runs` loss list: a run that completed but never left the unigram plateau
STUCK_LOSS = 3.34  # the unigram plateau's val loss: a failed-to-train run's loss, never averaged in
PLATEAU = "plateau"  # in a `runs` loss list: a run the plateau stop ended at half its budget (censored)
# the trainer's reason for such a run (train/loop.py); records.PLATEAU_STOPPED is how it starts
PLATEAU_REASON = "stopped at step 150 of 300 (train.plateau_stop = 0.5): failed to train"


def runs(losses, **kw) -> list[RunRecord]:
    """One record per seed (seed = index); a None loss is a diverged run, STUCK one that failed to train, PLATEAU
    one the plateau stop ended early."""
    status = lambda l: ("diverged" if l is None else "failed_to_train" if l in (STUCK, PLATEAU)  # noqa: E731
                        else "completed")
    return [rec(seed=i, val_loss=STUCK_LOSS if l in (STUCK, PLATEAU) else l, status=status(l),
                **({"reason": PLATEAU_REASON} if l == PLATEAU else {}), **kw)
            for i, l in enumerate(losses)]


def mean(xs):
    return sum(xs) / len(xs)


S5 = [0.0, 0.01, -0.01, 0.02, -0.02]  # 5 seeds' offsets: the standard preset's seeds, the same in paired arms


def five(loss: float, jitter: float = 0.0) -> list[float]:
    """5 seeds of a configuration: `loss` plus a seed offset shared by paired arms, plus a zero-sum ±jitter of its
    own (so the mean is `loss` and paired differences have a spread)."""
    return [loss + o + jitter * j for o, j in zip(S5, (1, -1, 1, -1, 0))]


# -- a seed claim's scenario -------------------------------------------------------------
class Case(NamedTuple):
    records: list[RunRecord]
    measurement: dict | None = None
    preset: Any = P
    check: Callable[[Verdict], None] | None = None  # extra assertions on details


def run_claim(claim: str, case: Case) -> Verdict:
    return CLAIMS.get(claim)().judge(case.records, case.measurement, case.preset)  # as the study judges it


def approx(x):
    return pytest.approx(x, rel=1e-9, abs=1e-12)


def table_tests(scenario: Scenarios):
    """A seed-claim module's two table-driven tests over its scenarios: each gives its expected verdict and value,
    and the verdict and the figures are JSON. A module ends with
    `test_verdict, test_verdict_and_figures_are_json_serializable = table_tests(scenario)`."""
    @pytest.mark.parametrize("claim, make, expected, value", scenario.params)
    def test_verdict(claim, make, expected, value):
        case = make()
        check_verdict(run_claim(claim, case), claim, expected, value, case.check)

    @pytest.mark.parametrize("claim, make, expected, value", scenario.good)
    def test_verdict_and_figures_are_json_serializable(claim, make, expected, value):
        case = make()
        claim_obj = CLAIMS.get(claim)()
        v = claim_obj.verdict(case.records, case.measurement, case.preset)
        text = json.dumps(v.to_dict(), allow_nan=False)
        assert json.loads(text)["verdict"] == expected
        assert isinstance(v.summary, str) and v.summary
        for fig in claim_obj.figures(case.records, case.measurement, case.preset):
            json.dumps(fig.to_dict(), allow_nan=False)

    return test_verdict, test_verdict_and_figures_are_json_serializable
