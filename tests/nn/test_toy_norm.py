"""A new normalizer is one class: a toy declared once, in this file, matches its formula in fp64, builds and trains
under every scheme (or is refused where a scheme says so), stacks, is named by `normlab diagnose`, accepted by
`normlab check` and listed by `normlab schemes` with no other edit (CONTRIBUTING's recipe); the tests that pin the
normalizers on purpose (the registry's names, the docs' list, table and count) ask for its name and nothing else,
and the recipe's files exist. It is registered for the test that uses it and taken out after, so no other test
sees it."""
from __future__ import annotations

import inspect
import json
import re
from functools import partial
from pathlib import Path

import pytest
import torch
from torch import nn
from typer.testing import CliRunner

import normlab
from normlab.cli import app
from normlab.diagnostics.structure import detect_placement
from normlab.nn.norms import NORMS, Derf, Norm, make_norm
from normlab.nn.schemes import SCHEMES
from normlab.nn.stacked import StackedGPT
from normlab.train import train
from tests import test_cli, test_docs as docs
from tests.conftest import tiny_config
from tests.nn import test_norms, test_schemes
from tests.nn.test_architectures import ARCHS
from tests.nn.test_architectures import \
    test_every_scheme_and_normalizer_builds_and_trains_in_every_architecture as trains_in_every_architecture
from tests.nn.test_schemes import test_every_combination_builds_and_trains_or_is_refused as builds_or_is_refused

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


class Softsign(Norm):
    """Softsign in place of a norm (a test's toy, no paper): γ · αx / (1 + |αx|) + β, α one learnable scalar,
    which stays learnable with `affine = false`."""

    name, formula, paper = "toy", "γ · αx / (1 + |αx|) + β,  α scalar, init 1", "none (a test)"
    linestyle = (0, (2, 2))
    OPTIONS = {"alpha_init": 1.0}

    def __init__(self, d: int, eps: float = 1e-5, affine: bool = True, bias: bool = False, alpha_init: float = 1.0):
        super().__init__(d, eps, affine, bias)
        self.alpha = nn.Parameter(torch.tensor(float(alpha_init)))

    def normalize(self, xf: torch.Tensor) -> torch.Tensor:
        ax = self.alpha.to(xf.dtype) * xf  # α is (), or (K, 1, 1) in a stack
        return self._affine(ax / (1 + ax.abs()))


def softsign_fp64(x, alpha, gamma, beta):
    """The toy's formula written out in fp64, no normlab code."""
    ax = alpha.double() * x.double()
    return gamma.double() * ax / (1 + ax.abs()) + beta.double()


@pytest.fixture
def toy():
    """The toy, registered for one test and taken out after it, so that no other test sees it."""
    NORMS.register(Softsign.name)(Softsign)
    yield Softsign.name
    NORMS.unregister(Softsign.name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_it_matches_its_formula_in_fp64(toy, dtype):
    """Forward and every gradient against the fp64 transcription. The output and x's gradient may differ by their
    rounding to x's dtype; the parameters' gradients are fp32 (fp64 for fp64 input) whatever x's dtype."""
    tol = {torch.float32: 1e-5, torch.bfloat16: torch.finfo(torch.bfloat16).eps, torch.float64: 1e-12}[dtype]
    param_tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.manual_seed(0)
    m = make_norm(toy, 16, bias=True, options={"alpha_init": 0.7})
    if dtype == torch.float64:
        m.double()  # an fp64 model computes in fp64 throughout
    with torch.no_grad():
        m.weight.copy_(1 + 0.5 * torch.randn(16))
        m.bias.copy_(0.5 * torch.randn(16))
    x = (2 * torch.randn(3, 5, 16)).to(dtype).requires_grad_()
    y = m(x)
    assert y.dtype == dtype
    params = [m.alpha, m.weight, m.bias]
    got = torch.autograd.grad(y.sum(), [x, *params])
    x64 = x.detach().double().requires_grad_()
    p64 = [p.detach().double().requires_grad_() for p in params]
    want = softsign_fp64(x64, *p64)
    wanted = torch.autograd.grad(want.sum(), [x64, *p64])
    torch.testing.assert_close(y.double(), want.detach(), rtol=tol, atol=tol)
    torch.testing.assert_close(got[0].double(), wanted[0], rtol=tol, atol=tol)
    for g, w in zip(got[1:], wanted[1:]):
        torch.testing.assert_close(g.double(), w, rtol=param_tol, atol=param_tol)


def test_its_options_are_checked_as_it_declares_them(toy):
    plain = make_norm(toy, 8, affine=False)
    assert plain.alpha.requires_grad and plain.weight is None
    with pytest.raises(ValueError, match="normalizer 'toy' has no option 'alpha'; valid: alpha_init"):
        make_norm(toy, 8, options={"alpha": 1.0})


def test_it_builds_under_every_scheme_or_is_refused_and_trains_in_every_architecture(toy, one_torch_thread):
    """The all-combination tests of test_schemes and test_architectures, as collected with the toy registered: every
    scheme builds it and takes a step, or refuses it (nGPT's Norm is `l2`); four train it in every architecture."""
    for scheme in SCHEMES.names():
        builds_or_is_refused(scheme, toy)
    assert SCHEMES.get("ngpt").norm_refusal(toy) and not SCHEMES.get("pre").norm_refusal(toy)
    for scheme in ("post", "pre", "peri", "deepnorm"):
        for arch in ARCHS:
            trains_in_every_architecture(arch, scheme, toy)
    model = normlab.build_model(dict(vocab_size=11, block_size=8, n_layer=2, n_head=2, d_model=16, norm=toy))
    assert {type(m) for m in model.modules() if isinstance(m, Norm)} == {Softsign}
    found = detect_placement(model, lambda: model(torch.randint(11, (2, 8))))
    assert (found["placement"], found["normalizer"]) == ("pre", toy)  # `normlab diagnose` names it


def test_it_stacks(toy):
    """Its α broadcasts as a (K, 1, 1) stack: two seeds trained as one give each member's own logits."""
    members = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        members.append(normlab.build_model(dict(vocab_size=13, block_size=8, n_layer=2, n_head=2, d_model=16,
                                                norm=toy, norm_options={"alpha_init": 0.5 + seed})).eval())
    idx = torch.randint(13, (2, 2, 8))
    with torch.no_grad():
        alone = [m(idx[k])[0] for k, m in enumerate(members)]
        stacked, _ = StackedGPT(members).eval()(idx)
    for k in range(2):
        torch.testing.assert_close(stacked[k], alone[k], atol=1e-5, rtol=1e-5)


def test_it_trains_and_check_and_schemes_know_it(toy, tmp_path, one_torch_thread):
    model = {"norm": toy, "norm_options": {"alpha_init": 0.5}}
    result = train(tiny_config(model=model, train={"steps": 4, "eval_interval": 2, "ckpt_interval": 2}),
                   tmp_path / "run")
    assert result.status == "completed" and result.step == 4
    config = tmp_path / "toy.toml"
    config.write_text(f'[model]\nnorm = "{toy}"\nnorm_options = {{alpha_init = 0.5}}\n', "utf-8")
    for target in (tmp_path / "run", config):
        checked = runner.invoke(app, ["check", str(target), "--json"])
        assert checked.exit_code == 0 and json.loads(checked.output)["findings"] == [], checked.output
    rows = {r["name"]: r for r in json.loads(runner.invoke(app, ["schemes", "--json"]).stdout)["norms"]}
    assert list(rows)[-1] == toy and rows[toy] == {"name": toy, "formula": Softsign.formula,
                                                   "paper": Softsign.paper, "options": {"alpha_init": 1.0}}
    assert toy in runner.invoke(app, ["schemes"], env={"COLUMNS": "250"}).output


def test_the_tests_that_pin_the_normalizers_ask_for_its_name_and_nothing_else(toy, monkeypatch):
    """The registry's names (test_norms' CASES, whose names test_schemes and test_cli read), the README's list and
    count and docs/schemes.md's table and count fail with the toy registered; each passes once test_norms names the
    toy and `python -m normlab.cli.listings` has written the README and docs/schemes.md again, with no other edit."""
    from normlab.cli.listings import docs_lists, written

    counts = docs.test_counts_of_schemes_normalizers_and_claims_are_the_registries
    named = [test_norms.test_registry_names, test_schemes.test_registries_hold_exactly_the_documented_names,
             docs.test_the_readme_lists_every_scheme_and_normalizer,
             docs.test_the_lists_written_from_the_registries_are_current,
             docs.test_the_schemes_page_has_a_row_for_every_scheme_and_normalizer_and_no_other,
             partial(counts, "README.md"), partial(counts, "docs/schemes.md"),
             test_cli.test_schemes_json_lists_every_scheme_and_normalizer_in_registration_order]
    for check in named:
        with pytest.raises(AssertionError):
            check()
    rows = {page: written(docs.PAGES[page], lists, page) for page, lists in docs_lists().items()}  # as it writes them
    assert f"| `{toy}` | {Softsign.formula} (none (a test)) | `weight`, `bias` (`norm_bias`), `alpha` | `alpha` " \
           "| `norm_options.alpha_init` (1) |" in rows["docs/schemes.md"]
    monkeypatch.setattr(test_norms, "NAMES", test_norms.NAMES + [toy])  # its entry in CASES, by name
    monkeypatch.setattr(test_schemes, "ALL_NORMS", test_norms.NAMES)  # bound to NAMES when the module loads
    monkeypatch.setattr(docs, "README", rows["README.md"])
    monkeypatch.setitem(docs.DOCS, "schemes.md", rows["docs/schemes.md"])
    monkeypatch.setitem(docs.PAGES, "README.md", rows["README.md"])
    monkeypatch.setitem(docs.PAGES, "docs/schemes.md", rows["docs/schemes.md"])
    for check in named:
        check()


def test_contributing_lists_files_that_exist_and_shows_a_real_class():
    """CONTRIBUTING's recipe: the files it names exist, and its example is Derf as written (less its comments
    and the lines it elides with `...`)."""
    text = (ROOT / "CONTRIBUTING.md").read_text("utf-8").split("## A new normalizer")[1].split("\n## ")[0]
    prose, example = text.split("```python\n")[0], text.split("```python\n")[1].split("```")[0]
    files = re.findall(r"`((?:src|tests)/[^`]+\.py)`", prose)
    assert "src/normlab/nn/norms.py" in files and "tests/nn/test_toy_norm.py" in files
    assert all((ROOT / path).exists() for path in files), files
    source = inspect.getsource(Derf)
    for line in example.splitlines():
        code = line.split("  #")[0].strip()
        assert "..." in code or code in source, line
