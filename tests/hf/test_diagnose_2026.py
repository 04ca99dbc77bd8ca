"""`normlab diagnose` on the models that ship the residual stream of 2026: tiny random DeepSeek-V4, GLM-5-Next,
HY-V4, Qwen4-exp (hyper-connections) and Inkling-2 (Attention Residuals), built and saved by transformers."""
import json
import math

import pytest
import torch
from typer.testing import CliRunner

from normlab.cli import app
from normlab.diagnostics.diagnose import diagnose, load_subject
from tests.hf.tiny_2026 import FAMILIES, save_tiny

DESIGNS = {"deepseek_v4": ("hyper", "sinkhorn"), "glm5_next": ("hyper", "sinkhorn"), "hy_v4": ("hyper", "identity"),
           "qwen4_exp": ("hyper", "identity"), "inkling2": ("depth", None)}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf2026")
    return {family: save_tiny(family, root / family) for family in FAMILIES}


def test_every_family_is_here():
    assert set(FAMILIES) == set(DESIGNS)


@pytest.mark.parametrize("family", FAMILIES)
def test_diagnose_names_the_residual_design_and_measures_it(saved, family):
    result = CliRunner().invoke(app, ["diagnose", str(saved[family]), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    residual = data["residual"]
    assert (residual["kind"], residual["mixing"]) == DESIGNS[family]
    assert data["n_layer"] == 4 and all(math.isfinite(row["contribution_ratio"]) for row in data["layers"])
    assert all(math.isfinite(row["skip_delta_loss"]) for row in data["layers"])
    if residual["kind"] == "hyper":
        assert residual["streams"] == 4 and len(residual["per_stream_rms"]) == 4
        assert all(len(row) == 4 and min(row) > 0 for row in residual["per_stream_rms"])
    if residual["mixing"] == "sinkhorn":  # mHC: every H_res doubly stochastic, so the composite gain is 1
        assert len(residual["sublayers"]) == 8
        assert all(s["row_sum_error"] < 1e-4 and s["column_sum_error"] < 1e-4 and s["min_entry"] >= 0
                   for s in residual["sublayers"])
        assert residual["composite_gain"]["max_forward"] == pytest.approx(1.0, abs=1e-3)
    if residual["mixing"] == "identity":
        assert "composite_gain" not in residual and "no H_res" in residual["mixing_note"]
    if residual["kind"] == "depth":
        assert all(sum(w) == pytest.approx(1.0, abs=1e-5) for w in residual["depth_weights"])


def test_per_stream_rms_is_each_stream_of_the_layer_input(saved):
    subject = load_subject(saved["deepseek_v4"])
    seen = {}
    subject.model.model.layers[0].register_forward_hook(lambda m, a, k, o: seen.setdefault("x", a[0] if a else
                                                                                            k["hidden_states"]),
                                                        with_kwargs=True)
    result = diagnose(subject, skip=False)
    x = seen["x"].float()  # (B, T, 4, C)
    by_hand = [x[:, :, j].pow(2).mean().sqrt().item() for j in range(4)]
    assert result["residual"]["per_stream_rms"][0] == pytest.approx(by_hand, rel=1e-5)
    # the layer's row reads the stream the four sum to, as a one-stream model's would
    assert result["layers"][0]["residual_rms"] == pytest.approx(x.sum(-2).pow(2).mean().sqrt().item(), rel=1e-5)


def test_qwen4_streams_side_by_side_are_read_as_four(saved):
    result = diagnose(load_subject(saved["qwen4_exp"]), skip=False)
    assert result["residual"]["streams"] == 4 and len(result["residual"]["per_stream_rms"][0]) == 4


def test_inkling_depth_weights_follow_its_queries(saved):
    """Zero queries weigh the sources alike; a query that prefers a source shows in the weights diagnose reads."""
    subject = load_subject(saved["inkling2"])
    uniform = diagnose(subject, skip=False)["residual"]["depth_weights"]
    assert all(max(w) - min(w) < 1e-6 for w in uniform)
    with torch.no_grad():
        for name, p in subject.model.named_parameters():
            if name.endswith("query"):
                p.copy_(torch.randn_like(p) * 10)
    moved = diagnose(subject, skip=False)["residual"]["depth_weights"]
    assert max(max(w) - min(w) for w in moved) > 0.1


def test_the_page_shows_the_residual_section(saved, tmp_path):
    page = tmp_path / "ds.html"
    result = CliRunner().invoke(app, ["diagnose", str(saved["deepseek_v4"]), "--no-skip", "--html", str(page)])
    assert result.exit_code == 0, result.output
    assert "residual design: mHC" in result.output and "composite gain" in result.output
    html = page.read_text("utf-8")
    assert 'id="residual"' in html and "Sinkhorn" in html


def test_a_one_stream_model_has_no_residual_section(tmp_path):
    from normlab.diagnostics.streams import describe

    assert describe({"kind": "one"}) == []


def test_a_directory_whose_streams_do_not_match_its_config_gets_one_line(saved, tmp_path):
    import shutil

    broken = tmp_path / "ds"
    shutil.copytree(saved["deepseek_v4"], broken)
    config = json.loads((broken / "config.json").read_text())
    config["hc_mult"] = 2  # the checkpoint's hyper-connection tensors are for 4 streams
    (broken / "config.json").write_text(json.dumps(config))
    result = CliRunner().invoke(app, ["diagnose", str(broken)])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "do not match" in result.output and len(result.output.strip().splitlines()) <= 3


def test_a_stack_the_text_pass_never_runs_is_not_the_one_measured(saved):
    """A text+vision model whose vision tower had more layers than its language model would have had the tower
    measured (its hooks never fire): the stack measured is the longest that the objective's pass runs."""
    from normlab.diagnostics.diagnose import _stacks_that_run

    subject = load_subject(saved["glm5_next"])
    tower = next(m for n, m in subject.model.named_modules() if isinstance(m, torch.nn.ModuleList) and "visual" in n)
    for _ in range(6):  # deeper than the 4 language layers
        tower.append(tower[0])
    (name, layers), _ = _stacks_that_run(subject.model, subject.forward)
    assert "visual" not in name and len(layers) == 4
    assert diagnose(subject, skip=False)["n_layer"] == 4
