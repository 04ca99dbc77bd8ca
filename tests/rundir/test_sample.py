"""`normlab sample RUN --prompt TEXT`: one seed, one text; greedy is the argmax at every step; bad input is
one line and exit 2. (That greedy text is transformers' generate() on the export: tests/hf/test_client.py.)"""
from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from normlab.cli import app
from normlab.nn.generate import generate
from normlab.rundir import load_model
from normlab.train import train
from tests.conftest import tiny_config

runner = CliRunner()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sample") / "run"
    cfg = tiny_config(train={"steps": 20, "eval_interval": 20, "ckpt_interval": 20, "untrained_margin": "off"},
                      diagnostics={"interval": "off", "layer_skip": False})
    assert train(cfg, str(out)).status == "completed"
    return out


def sample(run, *args: str):
    return runner.invoke(app, ["sample", str(run), "--prompt", "ROMEO:", *args])


def test_a_seed_gives_one_text_and_greedy_ignores_it(run):
    a, b, c = (sample(run, "-n", "40", "--seed", s).output for s in ("1", "1", "2"))
    assert a == b and a != c and a.startswith("ROMEO:") and len(a) == len("ROMEO:") + 40 + 1
    greedy = {sample(run, "-n", "40", "--greedy", "--seed", s, "--top-k", "3").output for s in ("1", "2")}
    assert len(greedy) == 1


def test_greedy_is_the_argmax_at_every_step_and_top_k_1_is_greedy(run):
    model = load_model(run).model.eval()
    ids = torch.tensor([[5, 7, 9]])
    steps = generate(model, ids, 12)
    for t in range(3, steps.shape[1]):  # each new token is the argmax of the logits before it
        with torch.no_grad():
            assert model(steps[:, max(0, t - model.cfg.block_size):t])[0][0, -1].argmax() == steps[0, t]
    assert torch.equal(generate(model, ids, 12, temperature=1.5, top_k=1), steps)
    assert generate(model, ids, 40).shape == (1, 43)  # past block_size (16): the window slides


@pytest.mark.parametrize("args, says", [
    (["--prompt", "ROMEO: \u00e9"], "not in this corpus's vocabulary"),
    (["--prompt", ""], "--prompt is empty"),
    (["--prompt", "A", "--temperature", "0"], "temperature must be > 0"),
    (["--prompt", "A", "--top-k", "0"], "--top-k"),
])
def test_bad_input_is_one_line_and_exit_2(run, args, says):
    result = runner.invoke(app, ["sample", str(run), *args])
    assert result.exit_code == 2 and says in result.output, result.output


def test_an_encoder_run_is_refused(tmp_path):
    cfg = tiny_config(model={"arch": "encoder"}, train={"steps": 2, "eval_interval": 2, "ckpt_interval": 2,
                                                        "untrained_margin": "off"},
                      diagnostics={"interval": "off", "layer_skip": False})
    train(cfg, str(tmp_path / "bert"))
    result = runner.invoke(app, ["sample", str(tmp_path / "bert"), "--prompt", "ROMEO:"])
    assert result.exit_code == 2 and "is an encoder run" in result.output
