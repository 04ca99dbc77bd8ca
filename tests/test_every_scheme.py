"""Every path that goes over the registered schemes × normalizers honours what a scheme fixes (`Facts.requires`):
it fills the fixed settings in, or skips the pair and says why. `normlab bench --scheme all` once failed on nGPT
with a pydantic error (the bench set norm = 'rmsnorm', which nGPT refuses).

Each path runs over every scheme × normalizer at tiny sizes; then a toy scheme whose paper fixes a normalizer
and a setting the paths choose themselves (bias) is registered, every path is run with it, and it is taken out."""
from __future__ import annotations

import dataclasses
import itertools
import json

import pytest
import torch
from typer.testing import CliRunner

from normlab.bench.steps import QUICK_CONFIGS, STEP_SETTINGS, combinations, normlab_variant
from normlab.cli import app
from normlab.nn import ModelConfig, build_model
from normlab.nn.norms import NORMS
from normlab.nn.schemes import SCHEMES, PreLN
from normlab.nn.stacked import StackedGPT
from normlab.study.claims import CLAIMS
from normlab.study.load import load_study
from normlab.study.plan import INIT_KEY, other_init
from normlab.study.runs import build_config
from normlab.study.presets import PRESETS
from normlab.train.group import alone_because
from tests.conftest import tiny_config
from tests.train.test_group import TRAIN_ALONE
from tests.nn.test_architectures import ARCHS
from tests.nn.test_architectures import \
    test_every_scheme_and_normalizer_builds_and_trains_in_every_architecture as trains_in_every_architecture
from tests.nn.test_schemes import test_every_combination_builds_and_trains_or_is_refused as builds_or_is_refused


class Toy(PreLN):
    """Pre-LN as an imaginary paper trains it: RMSNorm only, and biases (which the step bench leaves out)."""

    label = "Toy"
    facts = dataclasses.replace(PreLN.facts, requires={"norm": ("rmsnorm", "the toy paper normalizes with RMSNorm"),
                                                       "bias": (True, "the toy paper's projections have biases")})


@pytest.fixture
def toy():
    SCHEMES.register("toy")(Toy)
    Toy.name = "toy"
    try:
        yield "toy"
    finally:
        SCHEMES.unregister("toy")


def pairs():
    """Every registered scheme × normalizer, read when called (a scheme registered in a test included)."""
    return list(itertools.product(SCHEMES.names(), NORMS.names()))


def bench_path():
    """The step bench's variants: each built and stepped once, or skipped with its reason."""
    runnable, notes = combinations(SCHEMES.names(), NORMS.names())
    cfg, device = QUICK_CONFIGS[0], torch.device("cpu")
    batch = tuple(torch.randint(0, cfg.vocab_size, (2, cfg.block_size)) for _ in range(2))
    for scheme, settings in runnable:
        normlab_variant(cfg, scheme, settings, "fp32", "normlab", batch, device).step()
    skipped = {(n["scheme"], n["norm"]) for n in notes if n["skipped"]}
    assert {(s, st["norm"]) for s, st in runnable} | skipped == set(pairs())
    assert all(n["why"] for n in notes)
    return runnable, notes


def test_the_step_bench_fills_in_or_skips_every_pair(one_torch_thread):
    runnable, notes = bench_path()
    assert ("ngpt", {"norm": "l2", **STEP_SETTINGS}) in [(s, {k: st[k] for k in ("norm", *STEP_SETTINGS)})
                                                         for s, st in runnable]
    ngpt = [n for n in notes if n["scheme"] == "ngpt"]
    assert len(ngpt) == len(NORMS) - 1 and all("normalizes with 'l2' only" in n["why"] for n in ngpt)


def test_bench_scheme_all_runs_and_says_what_it_skipped(one_torch_thread):
    result = CliRunner().invoke(app, ["bench", "--quick", "--no-compile", "--scheme", "all", "--only", "steps",
                                      "--precision", "fp32", "--rounds", "1", "--steps", "1"])
    assert result.exit_code == 0, result.output
    assert "skipped ngpt/rmsnorm: scheme 'ngpt' cannot be used with normalizer 'rmsnorm'" in result.output
    assert "--scheme ngpt --norm l2 times it" in result.output


def schemes_path():
    rows = {r["name"]: r for r in json.loads(CliRunner().invoke(app, ["schemes", "--json"]).stdout)["schemes"]}
    assert list(rows) == SCHEMES.names()
    for name, scheme in SCHEMES.items():
        assert {k: (v["value"], v["why"]) for k, v in rows[name]["requires"].items()} == scheme.facts.requires
        refused = {n for n in NORMS.names() if scheme.fit({"norm": n}, axes=("norm",))[0] is None}
        assert set(rows[name]["incompatible_norms"]) == refused
    return rows


def test_normlab_schemes_lists_what_each_scheme_fixes():
    rows = schemes_path()
    assert rows["ngpt"]["requires"]["positions"]["value"] == "rope" and rows["pre"]["requires"] == {}
    table = CliRunner().invoke(app, ["schemes"], env={"COLUMNS": "250"}).output
    assert "fixes" in table and "positions = 'rope'" in table


def c16_path(monkeypatch):
    from normlab.study import measure

    monkeypatch.setattr(measure, "TRAIN_STEPS", 1)
    m = CLAIMS.get("C16")().measure(PRESETS["quick"])
    seen = {(c["scheme"], c["norm"]) for c in m["cases"] + m["skipped"]}
    assert seen == set(pairs()) and all(c["reason"] for c in m["skipped"])
    assert not [c for c in m["cases"] if c["max_change_before_t"] != 0.0]  # causal, and built as fitted
    return m


def test_c16_builds_each_scheme_as_its_paper_fixes_it(monkeypatch, one_torch_thread):
    m = c16_path(monkeypatch)
    assert {c["norm"] for c in m["cases"] if c["scheme"] == "ngpt"} == {"l2"}


def stacked_path():
    """Every buildable pair as a study run: two seeds as one stack give each member's own logits, or the run
    trains alone and says why."""
    alone = {}
    for scheme, norm in pairs():
        settings, _ = SCHEMES.get(scheme).fit({"norm": norm}, axes=("norm",))
        if settings is None:
            continue
        cfgs = [tiny_config(model={"scheme": scheme, **settings}, train={"seed": s}) for s in (0, 1)]
        why = alone_because(cfgs[0])
        if why:
            alone[scheme, norm] = why
            continue
        members = []
        for cfg in cfgs:
            torch.manual_seed(cfg.train.seed)
            members.append(build_model(cfg.model.model_copy(update={"vocab_size": 13})).eval())
        idx = torch.randint(0, 13, (2, 2, 8))
        with torch.no_grad():
            alone_logits = [m(idx[k])[0] for k, m in enumerate(members)]
            stacked, _ = StackedGPT(members).eval()(idx)
        for k in range(2):
            torch.testing.assert_close(stacked[k], alone_logits[k], atol=1e-5, rtol=1e-5)
    return alone


def test_the_stacked_trainer_stacks_each_scheme_as_fitted_or_says_why_not(one_torch_thread):
    alone = stacked_path()
    assert {s for s, _ in alone} == TRAIN_ALONE
    assert "keeps parameters outside" in alone["ngpt", "l2"]


def robustness_path():
    """A claim's run of every pair, its robustness rerun (another thread count) and its init pass (the other
    recipe), on the quick preset's base: each a valid config with the scheme's settings."""
    spec = load_study("quick", claims=["C13"], robustness=True)
    preset, reruns = spec.preset, spec.robust_changed
    for scheme, norm in pairs():
        settings, _ = SCHEMES.get(scheme).fit({"norm": norm}, axes=("norm",))
        if settings is None:
            continue
        run = {"model.scheme": scheme, **{f"model.{k}": v for k, v in settings.items()}}
        recipe = other_init(preset.base[INIT_KEY])
        for overrides in (run, {**run, **reruns}, {**run, INIT_KEY: recipe}):
            cfg = build_config(preset, overrides, 0)
            assert all(getattr(cfg.model, k) == v for k, (v, _) in SCHEMES.get(scheme).facts.requires.items())


def test_the_robustness_and_init_passes_rerun_every_scheme_as_fitted():
    robustness_path()


def test_a_toy_scheme_with_requirements_goes_through_every_path(toy, monkeypatch, one_torch_thread):
    assert toy in SCHEMES and ("toy", "layernorm") in pairs()
    assert ModelConfig(scheme="toy").norm == "rmsnorm"

    runnable, notes = bench_path()
    assert [st["bias"] for s, st in runnable if s == "toy"] == [True]  # filled in over the bench's bias = False
    toy_notes = {n["norm"]: n for n in notes if n["scheme"] == "toy"}
    assert "bias = True for False" in toy_notes["rmsnorm"]["why"] and not toy_notes["rmsnorm"]["skipped"]
    assert toy_notes["layernorm"]["skipped"] and "normalizes with 'rmsnorm' only" in toy_notes["layernorm"]["why"]
    result = CliRunner().invoke(app, ["bench", "--quick", "--no-compile", "--scheme", "all", "--only", "steps",
                                      "--precision", "fp32", "--rounds", "1", "--steps", "1", "--norm", "layernorm",
                                      "--norm", "rmsnorm", "--json"])
    assert result.exit_code == 0, result.output
    assert {(r["scheme"], r["norm"]) for r in json.loads(result.stdout)["steps"] if r["scheme"] == "toy"} == \
        {("toy", "rmsnorm")}

    assert schemes_path()["toy"]["requires"]["bias"] == {"value": True, "why": "the toy paper's projections have biases"}
    m = c16_path(monkeypatch)
    assert {c["norm"] for c in m["cases"] if c["scheme"] == "toy"} == {"rmsnorm"}
    assert "toy" not in {s for s, _ in stacked_path()}  # it stacks, with its biases
    robustness_path()
    for norm in NORMS.names():  # the all-combination tests, as collected for the registered schemes
        builds_or_is_refused("toy", norm)
        for arch in ARCHS:
            trains_in_every_architecture(arch, "toy", norm)
