"""NaN origin (the producer is blamed, not the modules that pass the NaN on) and layer-skip ablation."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import normlab
from normlab.diagnostics import find_nonfinite_origin, layer_skip, skipped
from normlab.diagnostics.skip import SKIP_THRESHOLD
from normlab.train import RunDir, train
from tests.conftest import tiny_config

V, T, B = 11, 6, 3

# backward hooks on the embeddings (integer inputs) make torch warn; irrelevant here
pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing")


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    pass


def make_model(**overrides) -> nn.Module:
    torch.manual_seed(0)
    cfg = dict(vocab_size=V, n_layer=2, d_model=8, n_head=2, block_size=T)
    cfg.update(overrides)
    return normlab.build_model(cfg)


def make_batch():
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, V, (B, T), generator=g), torch.randint(0, V, (B, T), generator=g)


def n_hooks(model: nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._backward_hooks) + len(m._forward_pre_hooks) + len(m._backward_pre_hooks)
               for m in model.modules())


# -- find_nonfinite_origin ---------------------------------------------------------------------

def test_all_finite_model_has_no_origin():
    model = make_model()
    idx, targets = make_batch()
    assert find_nonfinite_origin(model, lambda: model(idx, targets)[1]) is None
    assert n_hooks(model) == 0
    assert all(p.grad is None for p in model.parameters())


def test_an_inf_weight_blames_its_own_module_not_the_ones_downstream():
    model = make_model()
    with torch.no_grad():
        model.blocks[1].mlp.sublayer.fc.weight[0, 0] = math.inf
    idx, targets = make_batch()
    assert not torch.isfinite(model(idx, targets)[1])  # the NaN/inf does reach the loss (and passes through
    # blocks.1.mlp.sublayer, blocks.1.mlp, blocks.1, lm_head, the model on its way)
    origin = find_nonfinite_origin(model, lambda: model(idx, targets)[1])
    assert origin is not None
    assert origin["module"] == "blocks.1.mlp.sublayer.fc"
    assert origin["phase"] == "forward"
    assert origin["nonfinite_parameters"] == ["weight"]  # names relative to the module
    assert n_hooks(model) == 0


def test_a_module_producing_nan_from_finite_parameters_is_blamed(monkeypatch):
    model = make_model()
    norm = model.blocks[0].mlp.in_norm
    monkeypatch.setattr(norm, "forward", lambda x: x / 0 * 0)  # finite in, NaN out (0·inf)
    idx, targets = make_batch()
    origin = find_nonfinite_origin(model, lambda: model(idx, targets)[1])
    assert origin == {"module": "blocks.0.mlp.in_norm", "phase": "forward", "nonfinite_parameters": []}
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_a_module_whose_backward_produces_nan_is_blamed_in_the_backward_phase(monkeypatch):
    model = make_model()
    norm = model.blocks[1].attn.in_norm
    # forward: sqrt(0·x) + x = x, finite; backward: d sqrt(u)/du at u = 0 is inf, times 0 -> NaN
    monkeypatch.setattr(norm, "forward", lambda x: torch.sqrt(x * 0) + x)
    idx, targets = make_batch()
    loss = model(idx, targets)[1]
    assert torch.isfinite(loss)
    origin = find_nonfinite_origin(model, lambda: model(idx, targets)[1])
    assert origin is not None
    assert (origin["module"], origin["phase"]) == ("blocks.1.attn.in_norm", "backward")
    assert n_hooks(model) == 0
    assert all(p.grad is None for p in model.parameters())


def test_diverged_run_records_status_step_and_an_existing_origin_module(tmp_path):
    cfg = tiny_config(model={"norm": "none"},
                      train={"lr": 1e6, "min_lr": 0, "warmup_steps": 0, "schedule": "constant", "grad_clip": "off",
                             "diverge_loss": 1e30})
    result = train(cfg, tmp_path / "run")
    assert result.status == "diverged"
    rd = RunDir(tmp_path / "run")
    status = rd.read_status()
    assert status["status"] == "diverged" and status["step"] == result.step
    origin = status["nan_origin"]
    assert origin["step"] == result.step
    assert origin["phase"] in ("forward", "backward")
    model = normlab.build_model(rd.read_config().model)
    names = {name or "(model)" for name, _ in model.named_modules()}
    assert origin["module"] in names
    assert origin["module"] in status["reason"]
    assert not (tmp_path / "run" / "layer_skip.json").exists()


# -- skipped -----------------------------------------------------------------------------------

class Double(nn.Module):
    def forward(self, x):
        return 2 * x


class TupleLayer(nn.Module):
    """Like a Hugging Face decoder layer: (hidden_states, extra)."""

    def forward(self, hidden_states, scale=3.0):
        return hidden_states * 5, hidden_states * scale


def test_skipped_layer_returns_its_input_and_is_restored_after():
    layer, x = Double(), torch.tensor([1.0, -2.0])
    with skipped(layer):
        assert torch.equal(layer(x), x)
    assert torch.equal(layer(x), 2 * x)
    assert not layer._forward_hooks


def test_skipped_tuple_layer_keeps_its_extra_outputs():
    layer, x = TupleLayer(), torch.tensor([1.0, 2.0])
    with skipped(layer):
        hidden, extra = layer(x)
        assert torch.equal(hidden, x) and torch.equal(extra, 3 * x)
        hidden, extra = layer(hidden_states=x, scale=4.0)  # called with keywords
        assert torch.equal(hidden, x) and torch.equal(extra, 4 * x)
    hidden, _ = layer(x)
    assert torch.equal(hidden, 5 * x)


def test_skipped_normlab_block_is_the_identity():
    model = make_model()
    x = torch.randn(2, T, 8, generator=torch.Generator().manual_seed(3))
    with skipped(model.blocks[0]):
        assert torch.equal(model.blocks[0](x), x)
    assert not torch.equal(model.blocks[0](x), x)


# -- layer_skip --------------------------------------------------------------------------------

class Add(nn.Module):
    def __init__(self, c: float):
        super().__init__()
        self.c = c

    def forward(self, x):
        return x + self.c


def test_layer_skip_on_a_hand_computed_stack():
    # out = Σ c, loss = 20 − out: skipping layer l raises the loss by exactly c_l
    cs = [4.0, 0.0, 0.005, 5.0, 0.2]
    layers = nn.ModuleList(Add(c) for c in cs)

    def compute_loss() -> float:
        x = torch.zeros((), dtype=torch.float64)
        for layer in layers:
            x = layer(x)
        return float(20 - x)

    base = 20 - sum(cs)  # 10.795
    result = layer_skip(layers, compute_loss)
    assert result["base_loss"] == pytest.approx(base)
    assert result["delta_loss"] == pytest.approx(cs, abs=1e-12)
    assert result["relative_delta"] == pytest.approx([c / base for c in cs], abs=1e-12)
    # relative: 0.37, 0, 0.00046, 0.46, 0.0185 -> three above the default 1 %
    assert result["threshold"] == SKIP_THRESHOLD == 0.01
    assert result["effective_depth"] == 3
    assert result["effective_depth_fraction"] == pytest.approx(3 / 5)
    strict = layer_skip(layers, compute_loss, threshold=0.1)
    assert (strict["effective_depth"], strict["effective_depth_fraction"]) == (2, pytest.approx(2 / 5))
    assert all(not layer._forward_hooks for layer in layers)


def test_a_very_deep_stack_is_sampled_evenly_and_its_depth_estimated():
    """1,000 layers would cost 1,000 evaluations: at most `most` are skipped, first and last among them."""
    from normlab.diagnostics.skip import sampled_layers

    assert sampled_layers(1000, 100)[:3] == [0, 10, 20] and sampled_layers(1000, 100)[-1] == 999
    assert len(sampled_layers(1000, 100)) == 100 and sampled_layers(7, 100) == list(range(7))
    cs = [1.0 if i % 2 == 0 else 0.0 for i in range(30)]  # every other layer essential
    layers = nn.ModuleList(Add(c) for c in cs)
    calls = []

    def compute_loss() -> float:
        calls.append(1)
        x = torch.zeros((), dtype=torch.float64)
        for layer in layers:
            x = layer(x)
        return float(40 - x)

    result = layer_skip(layers, compute_loss, most=6)
    assert len(calls) == 1 + 6 and result["skipped"] == 6
    chosen = sampled_layers(30, 6)
    assert chosen == [0, 6, 12, 17, 23, 29]  # three even (essential), three odd
    assert [i for i, d in enumerate(result["delta_loss"]) if d is not None] == chosen
    assert result["effective_depth_fraction"] == pytest.approx(3 / 6)
    assert result["effective_depth"] == 15 and "estimate" in result["judged"]
    assert layer_skip(layers, compute_loss)["skipped"] == 30  # no `most`: every layer


@torch.no_grad()
def test_layer_skip_on_a_gpt_with_an_exact_identity_block():
    model = make_model(scheme="pre", n_layer=3, init_std=1.0)  # large init: the other blocks matter
    # Pre-LN, no biases: with both output projections zero, block 1 is exactly x ← x + 0 + 0
    model.blocks[1].attn.sublayer.proj.weight.zero_()
    model.blocks[1].mlp.sublayer.proj.weight.zero_()
    model.eval()
    idx, targets = make_batch()
    x = torch.randn(B, T, 8, generator=torch.Generator().manual_seed(4))
    assert torch.equal(model.blocks[1](x), x)

    result = layer_skip(model.blocks, lambda: model(idx, targets)[1].item())
    assert result["base_loss"] == model(idx, targets)[1].item()
    assert result["delta_loss"][1] == 0.0 and result["relative_delta"][1] == 0.0

    # layer 0 skipped, by hand: embeddings straight into blocks 1 and 2
    h = model.wte(idx) + model.wpe(torch.arange(T))
    h = model.blocks[2](model.blocks[1](h))
    loss_without_0 = F.cross_entropy(model.lm_head(model.final_norm(h)).reshape(-1, V), targets.reshape(-1)).item()
    assert result["delta_loss"][0] == pytest.approx(loss_without_0 - result["base_loss"], rel=1e-5, abs=1e-7)
    relative = [d / result["base_loss"] for d in result["delta_loss"]]
    assert result["relative_delta"] == pytest.approx(relative)
    assert relative[0] > SKIP_THRESHOLD and relative[2] > SKIP_THRESHOLD  # (0.15 and 0.21 here)
    assert result["effective_depth"] == 2  # blocks 0 and 2; the identity block 1 is not essential
    assert result["effective_depth_fraction"] == pytest.approx(2 / 3)


@pytest.mark.parametrize("enabled", [True, False])
def test_trainer_writes_layer_skip_json_only_when_enabled(tmp_path, enabled):
    cfg = tiny_config(model={"n_layer": 3}, train={"steps": 10},
                      diagnostics={"interval": "off", "layer_skip": enabled})
    result = train(cfg, tmp_path / "run")
    assert result.status == "completed"
    path = tmp_path / "run" / "layer_skip.json"
    if not enabled:
        assert not path.exists()
        return
    data = RunDir(tmp_path / "run").read_json("layer_skip.json")
    assert len(data["delta_loss"]) == len(data["relative_delta"]) == 3
    assert data["base_loss"] == result.val_loss  # the same val batches, the same weights
    assert data["relative_delta"] == pytest.approx([d / data["base_loss"] for d in data["delta_loss"]])
    assert data["effective_depth"] == sum(r > data["threshold"] for r in data["relative_delta"])
    assert data["effective_depth_fraction"] == pytest.approx(data["effective_depth"] / 3)


@pytest.mark.parametrize("most, measured", [(2, [0, 4]), (3, [0, 2, 4]), ("all", [0, 1, 2, 3, 4])])
def test_trainer_samples_the_layer_skip_as_its_config_says(tmp_path, most, measured):
    """diagnostics.layer_skip_most: at most that many evenly spaced blocks (first and last among them); `all`: every block."""
    cfg = tiny_config(model={"n_layer": 5}, train={"steps": 4},
                      diagnostics={"interval": "off", "layer_skip": True, "layer_skip_most": most})
    assert train(cfg, tmp_path / "run").status == "completed"
    data = RunDir(tmp_path / "run").read_json("layer_skip.json")
    assert [i for i, d in enumerate(data["delta_loss"]) if d is not None] == measured
    assert data["skipped"] == len(measured)


def test_the_layer_skip_sample_size_leaves_run_ids_as_they_were():
    """A field added after runs were hashed: at its default (100) a config hashes as it did before the field
    existed (the quick preset's base run, seed 0, the standard preset's base until it dropped the layer-skip
    ablation, hashed by the code before it: a61bc7fca1f7)."""
    from normlab.study.runs import build_config
    from normlab.study.presets import PRESETS

    # train.plateau_stop, added later, at its neutral value (off; 0 then) as every run of then had it; the presets set ½;
    # and the context of then (the CPU presets went from 64 tokens to 32, with twice the eval batches)
    before = {"train.plateau_stop": "off", "model.block_size": 64, "train.eval_batches": 10}
    assert build_config(PRESETS["quick"], before, 0).hash() == "a61bc7fca1f7"
    assert build_config(PRESETS["quick"], {**before, "diagnostics.layer_skip_most": "all"}, 0).hash() != "a61bc7fca1f7"
    assert build_config(PRESETS["quick"], {}, 0).hash() != "a61bc7fca1f7"  # the plateau stop is a new setting
