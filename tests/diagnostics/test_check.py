"""`normlab check`: each defect is caught in a deliberately broken model, and correct models pass."""
from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

import normlab
from normlab.cli import app
from normlab.diagnostics.check import check_model
from normlab.nn.norms import make_norm
from normlab.nn.schemes import SCHEMES
from normlab.train import train
from tests.conftest import tiny_config

BASE = dict(vocab_size=11, block_size=8, n_layer=3, n_head=2, d_model=32)


def codes(model, **kw) -> list[tuple[str, str]]:
    return [(f.code, f.where) for f in check_model(model, **kw)]


@pytest.mark.parametrize("scheme", SCHEMES.names())
@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm", "scalenorm", "dyt"])
def test_correct_models_have_no_findings(scheme, norm):
    torch.manual_seed(0)
    norm = "l2" if scheme == "ngpt" else norm  # nGPT's Norm is x/‖x‖ alone
    assert codes(normlab.build_model(dict(BASE, scheme=scheme, norm=norm))) == []


def test_pre_norm_without_final_norm():
    assert codes(normlab.build_model(dict(BASE, final_norm=False))) == [("missing-final-norm", "final_norm")]
    assert codes(normlab.build_model(dict(BASE, scheme="peri", final_norm=False))) == [("missing-final-norm", "final_norm")]


def test_back_to_back_norms():
    found = codes(normlab.build_model(dict(BASE, scheme="post", final_norm=True)))
    assert found == [("back-to-back-norms", "blocks.2.mlp.post_norm → final_norm")]


def test_shared_input_is_not_back_to_back():
    # Peri-LN's normalized embedding feeds the first in-norm *and* the residual add: not redundant
    assert codes(normlab.build_model(dict(BASE, scheme="peri"))) == []


def test_norm_that_never_runs_and_norm_without_gradient():
    model = normlab.build_model(BASE)
    model.blocks[0].spare = make_norm("layernorm", 32)
    assert codes(model) == [("norm-never-runs", "blocks.0.spare")]
    model = normlab.build_model(BASE)
    model.blocks[1].mlp.in_norm.weight.requires_grad_(False)
    model.blocks[1].mlp.in_norm.bias = None
    assert codes(model) == [("norm-without-gradient", "blocks.1.mlp.in_norm")]


def test_deepnorm_alpha_and_init_gains():
    torch.manual_seed(0)
    model = normlab.build_model(dict(BASE, scheme="deepnorm"))
    model.blocks[1].attn.alpha = 1.0  # seed 001's mistake: α moved off the residual
    assert codes(model) == [("deepnorm-constants", "blocks.1.attn")]
    model = normlab.build_model(dict(BASE, scheme="deepnorm", d_model=64))
    for _, w in model.projections():
        torch.nn.init.normal_(w.data, 0.0, 0.02)  # plain GPT init instead of DeepNorm's β-scaled Xavier
    found = codes(model)
    assert found and {c for c, _ in found} == {"init-gains"}
    assert ("init-gains", "blocks.0 v") in found and ("init-gains", "blocks.2 ffn_out") in found
    assert codes(model, at_init=False) == []  # trained weights: init gains are not judged


def test_degenerate_combination():
    assert codes(normlab.build_model(dict(BASE, scheme="post", norm="none"))) == [
        ("degenerate-combination", "post × none")]
    assert codes(normlab.build_model(dict(BASE, scheme="pre", norm="none"))) == []  # the control itself


def test_cli_check_config_and_run_directory(tmp_path):
    runner = CliRunner()
    good, bad = tmp_path / "good.toml", tmp_path / "bad.toml"
    good.write_text(tiny_config().to_toml())
    bad.write_text(tiny_config(model={"final_norm": False}).to_toml())
    result = runner.invoke(app, ["check", str(good)])
    assert result.exit_code == 0 and "no findings" in result.output
    result = runner.invoke(app, ["check", str(bad), "--json"])
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["at_init"] is True and [f["code"] for f in data["findings"]] == ["missing-final-norm"]
    assert data["findings"][0]["fix"]
    train(tiny_config(train={"steps": 5}), tmp_path / "run")
    result = runner.invoke(app, ["check", str(tmp_path / "run" / "checkpoint.pt"), "--json"])
    assert result.exit_code == 0 and json.loads(result.output)["at_init"] is False
    result = runner.invoke(app, ["check", str(tmp_path)])
    assert result.exit_code == 2 and "not a normlab run directory" in result.output


def test_cli_check_takes_set_on_a_config_and_refuses_it_on_a_run(tmp_path):
    """`normlab check CONFIG --set KEY=VALUE` checks the changed config, as `train --set` would train it."""
    runner = CliRunner()
    good = tmp_path / "good.toml"
    good.write_text(tiny_config().to_toml())
    result = runner.invoke(app, ["check", str(good), "--set", "model.final_norm=false", "--json"])
    assert result.exit_code == 1, result.output
    assert [f["code"] for f in json.loads(result.output)["findings"]] == ["missing-final-norm"]
    result = runner.invoke(app, ["check", str(good), "--set", "model.n_layr=3"])
    assert result.exit_code == 2 and "n_layr" in result.output
    train(tiny_config(train={"steps": 5, "warmup_steps": 1}), tmp_path / "run")
    result = runner.invoke(app, ["check", str(tmp_path / "run"), "--set", "model.final_norm=false"])
    assert result.exit_code == 2 and "trained with their own" in result.output
