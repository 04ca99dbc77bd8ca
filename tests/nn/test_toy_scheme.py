"""A new scheme is one class: a toy declared once, in this file, is built, trained, checked, recognised by
`normlab diagnose` from its own layout and listed by `normlab schemes` with no other edit (CONTRIBUTING's
recipe); the docs' tests ask for its row in the README and docs/schemes.md and nothing else. It is registered
for the test that uses it and taken out after, so no other test sees it."""
from __future__ import annotations

import contextlib
import json

import pytest
import torch
from typer.testing import CliRunner

import normlab
from normlab.cli import app
from normlab.diagnostics.structure import detect_placement
from normlab.nn.schemes import SCHEMES, BlockLayout, Facts, Layout, Residual, Scheme
from normlab.train import train
from tests import test_docs as docs
from tests.conftest import tiny_config

runner = CliRunner()


class Toy(Scheme):
    """Pre-LN around attention; around the MLP a norm on its output as well, and its input scaled by ½ (a test's
    toy, no paper):

        attention:  x ──┬── Norm ── Attn ──(+)──► x'
                        └───────────────────┘
        MLP:        x ──┬── Norm ── ×½ ── MLP ── Norm ──(+)──► x'       … last block ── Norm ── head
                        └────────────────────────────────┘
    """

    name, formula, paper = "toy", "x ← x + Attn(Norm(x)); x ← x + Norm(MLP(Norm(x)/2)); final Norm", "none (a test)"
    label = "Toy"
    facts = Facts(color="#000000",  # Pre-LN's layout, and a branch norm
                  layout=Layout(BlockLayout(sum_norm=False, input_norm=True, branch_norm=True)))

    def residual(self, sublayer, layer, make_norm, role):
        if role == "mlp":
            return Residual(sublayer, in_norm=make_norm(), out_norm=make_norm(), in_scale=0.5)
        return Residual(sublayer, in_norm=make_norm())


@contextlib.contextmanager
def registered(cls):
    SCHEMES.register(cls.name)(cls)
    try:
        yield cls.name
    finally:
        SCHEMES.unregister(cls.name)


@pytest.fixture
def toy():
    with registered(Toy) as name:
        yield name


def test_a_scheme_registered_in_a_test_is_taken_out_after_it():
    with registered(Toy):
        assert SCHEMES.names()[-1] == "toy"
    assert "toy" not in SCHEMES


def test_it_builds_as_its_class_says(toy):
    torch.manual_seed(0)
    model = normlab.build_model(dict(vocab_size=11, block_size=8, n_layer=2, n_head=2, d_model=16, scheme=toy)).eval()
    block, x = model.blocks[0], torch.randn(2, 5, 16)
    with torch.no_grad():
        h = x + block.attn.sublayer(block.attn.in_norm(x))
        want = h + block.mlp.out_norm(block.mlp.sublayer(0.5 * block.mlp.in_norm(h)))
        torch.testing.assert_close(block(x), want)
    found = detect_placement(model, lambda: model(torch.randint(11, (2, 8))))
    assert (found["placement"], found["final_norm"]) == (toy, True)


def test_it_trains_and_check_diagnose_and_schemes_know_it(toy, tmp_path, one_torch_thread):
    result = train(tiny_config(model={"scheme": toy}, train={"steps": 4, "eval_interval": 2, "ckpt_interval": 2}),
                   tmp_path / "run")
    assert result.status == "completed" and result.step == 4
    checked = runner.invoke(app, ["check", str(tmp_path / "run"), "--json"])
    assert checked.exit_code == 0 and json.loads(checked.output)["findings"] == [], checked.output
    diagnosed = runner.invoke(app, ["diagnose", str(tmp_path / "run"), "--json", "--no-skip"])
    assert diagnosed.exit_code == 0, diagnosed.output
    assert json.loads(diagnosed.stdout)["detected"]["placement"] == toy  # from its own layout
    rows = {r["name"]: r for r in json.loads(runner.invoke(app, ["schemes", "--json"]).stdout)["schemes"]}
    assert list(rows)[-1] == toy and rows[toy]["formula"] == Toy.formula
    assert toy in runner.invoke(app, ["schemes"], env={"COLUMNS": "250"}).output


def test_the_docs_tests_ask_for_its_rows_and_nothing_else(toy, monkeypatch):
    """The README's list of schemes and docs/schemes.md's table are read against the registry: the toy fails
    both until each names it, and the tests themselves need no edit."""
    for check in (docs.test_the_readme_lists_every_scheme_and_normalizer,
                  docs.test_the_schemes_page_has_a_row_for_every_scheme_and_normalizer_and_no_other):
        with pytest.raises(AssertionError):
            check()
    monkeypatch.setattr(docs, "README", docs.README.replace("## Models\n", f"## Models\n\n- `{toy}` Toy\n", 1))
    monkeypatch.setitem(docs.DOCS, "schemes.md", docs.DOCS["schemes.md"] + f"\n| `{toy}` | {Toy.formula} | yes | |\n")
    docs.test_the_readme_lists_every_scheme_and_normalizer()
    docs.test_the_schemes_page_has_a_row_for_every_scheme_and_normalizer_and_no_other()


def test_a_scheme_that_sets_a_fact_as_a_class_attribute_is_refused_naming_the_fix():
    """Written as schemes were before `Facts`, `stackable = False` would be read by nobody: refused at once."""
    with pytest.raises(TypeError, match=r"scheme class Old sets color, stackable as class attributes; they are its "
                                        r"facts: write facts = Facts\(color=\.\.\., stackable=\.\.\.\)"):
        class Old(Scheme):
            color, stackable = "#123456", False
