"""LayerProbe / ProbeSession on a tiny normlab GPT: every stored value against an independent recomputation.

The reference values are computed WITHOUT the probe, in fp64, by running the model's
pieces by hand (x0 = wte + wpe, then each Residual as x ← PostNorm(α·x + OutNorm(F(s·InNorm(x))))),
recomputing attention row by row from the qkv projection, and reading gradients and
weights from an untouched copy of the model.
"""
from __future__ import annotations

import copy
import math
import sqlite3

import pytest
import torch

import normlab
from normlab.diagnostics import METRICS, DiagnosticsStore, LayerProbe
from normlab.diagnostics.probe import NO_PROBE, ProbeSession
from normlab.train import RunDir, Trainer
from tests.conftest import tiny_config

V, T, B, N_LAYER, D, N_HEAD = 11, 6, 3, 2, 8, 2

BLOCK_FWD = ("residual_rms", "contribution_ratio", "cosine", "angular_distance", "block_influence")
BRANCH_FWD = ("residual_rms", "branch_rms", "contribution_ratio")
PARAM_METRICS = ("grad_norm", "weight_norm", "update_ratio")
MODEL_METRICS = ("final_stream_rms", "logits_rms", "logits_max", "log_partition")


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    pass


def make_model(scheme: str = "pre", **overrides) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = dict(vocab_size=V, n_layer=N_LAYER, d_model=D, n_head=N_HEAD, block_size=T, scheme=scheme,
               bias=True, init_std=0.3)  # a large init: branches of the same order as the stream
    cfg.update(overrides)
    return normlab.build_model(cfg)


def make_batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, V, (B, T), generator=g), torch.randint(0, V, (B, T), generator=g)


def measured_step(model, store, idx, targets, step: int = 0, interval: int = 1) -> torch.Tensor:
    """One step exactly as Trainer.train_step drives the probe."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.1)
    model.train()
    session = LayerProbe(model, store, interval).session(step)
    assert isinstance(session, ProbeSession)
    with session:
        logits, loss = model(idx, targets)
    loss.backward()
    session.after_backward()
    session.before_update()
    optimizer.step()
    optimizer.zero_grad(set_to_none=False)  # keep .grad tensors alive but zeroed: the probe must have read them before
    session.after_update()
    return logits


def stored(store: DiagnosticsStore, step: int) -> dict[tuple, float | None]:
    with sqlite3.connect(store.path) as db:
        rows = db.execute("SELECT layer, site, metric, head, value FROM layer_metrics WHERE step = ?",
                          (step,)).fetchall()
    table = {(layer, site, metric, head): value for layer, site, metric, head, value in rows}
    assert len(table) == len(rows), "duplicated (layer, site, metric, head) rows"
    return table


def count_hooks(model: torch.nn.Module) -> int:
    n = 0
    for m in model.modules():
        n += len(m._forward_hooks) + len(m._forward_pre_hooks) + len(m._backward_hooks)
        n += len(m._backward_pre_hooks) + len(m._forward_hooks_with_kwargs)
    return n


# -- the independent recomputation (fp64) -------------------------------------------------------

def rms(a: torch.Tensor) -> float:
    return math.sqrt(a.pow(2).sum().item() / a.numel())


def frob(a: torch.Tensor) -> float:
    return math.sqrt(a.pow(2).sum().item())


def token_cos(a: torch.Tensor, b: torch.Tensor) -> list[float]:
    a, b = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    return [(a[i] @ b[i]).item() / (frob(a[i]) * frob(b[i])) for i in range(a.shape[0])]


@torch.no_grad()
def reference_taps(model64, idx):
    """The stream at every tap point, running the model's pieces by hand."""
    x = model64.wte(idx) + model64.wpe(torch.arange(idx.shape[1]))
    x = model64.embed_norm(x)
    blocks = []
    for block in model64.blocks:
        rec = {"in": x}
        for site in ("attn", "mlp"):
            r = getattr(block, site)
            s = r.in_norm(x) * r.in_scale
            f = r.out_norm(r.sublayer(s))
            rec[site] = {"x": x, "s": s, "F": f}
            x = r.post_norm(r.alpha * x + f)
        rec["out"] = x
        blocks.append(rec)
    return blocks, x, model64.lm_head(model64.final_norm(x))


@torch.no_grad()
def reference_attention(attn, s):
    """Per-head mean entropy and max logit, recomputed row by row from qkv; also the attention output."""
    Bn, Tn, C = s.shape
    hs = C // attn.n_head
    qkv = attn.qkv(s)
    q, k, v = qkv[..., :C], qkv[..., C:2 * C], qkv[..., 2 * C:]
    entropy, max_logit = [0.0] * attn.n_head, [-math.inf] * attn.n_head
    y = torch.zeros_like(s)
    for h in range(attn.n_head):
        cols = slice(h * hs, (h + 1) * hs)
        for b in range(Bn):
            for t in range(Tn):
                logits = [(q[b, t, cols] @ k[b, u, cols]).item() / math.sqrt(hs) for u in range(t + 1)]
                m = max(logits)
                z = sum(math.exp(l - m) for l in logits)
                p = [math.exp(l - m) / z for l in logits]
                entropy[h] -= sum(pi * math.log(pi) for pi in p if pi > 0) / (Bn * Tn)
                max_logit[h] = max(max_logit[h], m)
                y[b, t, cols] = sum(p[u] * v[b, u, cols] for u in range(t + 1))
    out = attn.proj(attn.inner_norm(y))
    return entropy, max_logit, out


def expected_values(before: torch.nn.Module, after: torch.nn.Module, idx, targets) -> dict[tuple, float | None]:
    """Everything the probe should store for step `before` → `after`, computed without the probe."""
    exp: dict[tuple, float | None] = {}
    # gradients: an untouched copy, its own forward and backward
    grad_model = copy.deepcopy(before)
    grad_model.train()
    grad_model(idx, targets)[1].backward()

    model64 = copy.deepcopy(before).double().eval()
    blocks, final_in, logits = reference_taps(model64, idx)
    # the hand-run pieces are the model: same logits as its own forward
    assert torch.allclose(logits, model64(idx)[0], rtol=0, atol=1e-12)

    for layer, rec in enumerate(blocks):
        x, y = rec["in"], rec["out"]
        cos = token_cos(x, y)
        exp[(layer, "block", "residual_rms", None)] = rms(x)
        exp[(layer, "block", "contribution_ratio", None)] = frob(y - x) / frob(x)
        exp[(layer, "block", "cosine", None)] = sum(cos) / len(cos)
        exp[(layer, "block", "angular_distance", None)] = sum(math.acos(max(-1.0, min(1.0, c))) / math.pi
                                                              for c in cos) / len(cos)
        exp[(layer, "block", "block_influence", None)] = 1 - sum(cos) / len(cos)
        for site in ("attn", "mlp"):
            b = rec[site]
            exp[(layer, site, "residual_rms", None)] = rms(b["x"])
            exp[(layer, site, "branch_rms", None)] = rms(b["F"])
            exp[(layer, site, "contribution_ratio", None)] = frob(b["F"]) / frob(b["x"])
        attn = model64.blocks[layer].attn
        entropy, max_logit, attn_out = reference_attention(attn.sublayer, rec["attn"]["s"])
        # the recomputed q, k, v reproduce the sub-layer's own output: they are the ones the model uses
        assert torch.allclose(attn.out_norm(attn_out), rec["attn"]["F"], rtol=0, atol=1e-12)
        for h in range(N_HEAD):
            exp[(layer, "attn", "attn_entropy", h)] = entropy[h]
            exp[(layer, "attn", "attn_max_logit", h)] = max_logit[h]

        # per parameter, per branch, per block: root-sum-squares
        sums: dict[str, dict[str, float]] = {}
        b_params = dict(before.blocks[layer].named_parameters())
        a_params = dict(after.blocks[layer].named_parameters())
        g_params = dict(grad_model.blocks[layer].named_parameters())
        for name, w0 in b_params.items():
            w0, w1, g = w0.detach().double(), a_params[name].detach().double(), g_params[name].grad.double()
            sq = {"grad": g.pow(2).sum().item(), "weight": w0.pow(2).sum().item(), "update": (w1 - w0).pow(2).sum().item()}
            for group in (name, name.split(".")[0], "block"):
                acc = sums.setdefault(group, {"grad": 0.0, "weight": 0.0, "update": 0.0})
                for key in acc:
                    acc[key] += sq[key]
        assert {g for g in sums if "." not in g} == {"attn", "mlp", "block"}
        for group, acc in sums.items():
            exp[(layer, group, "grad_norm", None)] = math.sqrt(acc["grad"])
            exp[(layer, group, "weight_norm", None)] = math.sqrt(acc["weight"])
            exp[(layer, group, "update_ratio", None)] = (math.sqrt(acc["update"] / acc["weight"])
                                                         if acc["weight"] > 0 else None)  # NaN is stored as NULL

    exp[(None, "model", "final_stream_rms", None)] = rms(final_in)
    flat = logits.reshape(-1, V)
    exp[(None, "model", "logits_rms", None)] = rms(flat)
    exp[(None, "model", "logits_max", None)] = flat.max().item()
    exp[(None, "model", "log_partition", None)] = sum(
        math.log(sum(math.exp(v) for v in row)) for row in flat.tolist()) / flat.shape[0]
    return exp


def expected_keys(model) -> set[tuple]:
    """The (layer, site, metric, head) rows one measured step writes."""
    keys = {(None, "model", m, None) for m in MODEL_METRICS}
    for layer, block in enumerate(model.blocks):
        keys |= {(layer, "block", m, None) for m in BLOCK_FWD}
        keys |= {(layer, site, m, None) for site in ("attn", "mlp") for m in BRANCH_FWD}
        keys |= {(layer, "attn", m, h) for m in ("attn_entropy", "attn_max_logit") for h in range(N_HEAD)}
        for site in ["block", "attn", "mlp", *(name for name, _ in block.named_parameters())]:
            keys |= {(layer, site, m, None) for m in PARAM_METRICS}
    return keys


# -- the tests ------------------------------------------------------------------------------

@pytest.mark.parametrize("scheme", ["pre", "post", "sandwich", "lns"])
def test_every_stored_value_matches_an_independent_recomputation(tmp_path, scheme):
    model = make_model(scheme)
    before = copy.deepcopy(model)
    idx, targets = make_batch()
    store = DiagnosticsStore(tmp_path)
    measured_step(model, store, idx, targets)

    got = stored(store, 0)
    expected = expected_values(before, model, idx, targets)
    assert set(got) == set(expected) == expected_keys(model)  # nothing missing, nothing extra
    assert {metric for (_, _, metric, _) in got} == set(METRICS)
    for key, value in expected.items():
        if value is None:
            assert got[key] is None, key
        else:
            assert got[key] == pytest.approx(value, rel=2e-5, abs=2e-6), key
    assert store.steps() == [0]
    # with init_std 0.3 the values are far from trivial (a wrong site or formula shows)
    assert 0.05 < expected[(0, "block", "block_influence", None)] < 1.5
    assert expected[(0, "attn", "attn_entropy", 0)] != pytest.approx(expected[(0, "attn", "attn_entropy", 1)], rel=1e-3)


def test_update_ratio_of_a_zero_initialised_parameter_is_null_not_nan(tmp_path):
    model = make_model("pre")
    idx, targets = make_batch()
    store = DiagnosticsStore(tmp_path)
    measured_step(model, store, idx, targets)
    got = stored(store, 0)
    # attn.sublayer.qkv.bias starts at 0: ‖ΔW‖/‖W‖ is undefined, stored as NULL; its weight norm is 0
    assert got[(0, "attn.sublayer.qkv.bias", "weight_norm", None)] == 0.0
    assert got[(0, "attn.sublayer.qkv.bias", "update_ratio", None)] is None
    assert got[(0, "attn", "update_ratio", None)] is not None


def test_query_returns_per_layer_lists_and_averages_heads(tmp_path):
    model = make_model("pre")
    idx, targets = make_batch()
    store = DiagnosticsStore(tmp_path)
    measured_step(model, store, idx, targets, step=0)
    got = stored(store, 0)
    assert store.query("residual_rms", "block", 0) == {
        0: [got[(layer, "block", "residual_rms", None)] for layer in range(N_LAYER)]}
    entropy = store.query("attn_entropy", "attn")
    assert list(entropy) == [0]
    for layer in range(N_LAYER):
        mean = sum(got[(layer, "attn", "attn_entropy", h)] for h in range(N_HEAD)) / N_HEAD
        assert entropy[0][layer] == pytest.approx(mean, rel=1e-12)
    assert store.query("logits_max", "model") == {0: [got[(None, "model", "logits_max", None)]]}
    assert store.query("residual_rms", "block", step=5) == {}


def test_probe_leaves_forward_and_gradients_unchanged(tmp_path):
    model = make_model("pre")
    plain = copy.deepcopy(model)
    idx, targets = make_batch()
    logits = measured_step(model, DiagnosticsStore(tmp_path), idx, targets)
    plain.train()
    plain_logits, plain_loss = plain(idx, targets)
    assert torch.equal(logits, plain_logits)
    # after the same AdamW step, the weights are bit-identical
    plain_loss.backward()
    torch.optim.AdamW(plain.parameters(), lr=0.05, weight_decay=0.1).step()
    for (name, p), q in zip(model.named_parameters(), plain.parameters()):
        assert torch.equal(p, q), name


def test_due_is_step_zero_and_multiples_of_interval(tmp_path):
    model, store = make_model(), DiagnosticsStore(tmp_path)
    assert [s for s in range(23) if LayerProbe(model, store, 5).due(s)] == [0, 5, 10, 15, 20]
    assert [s for s in range(4) if LayerProbe(model, store, 1).due(s)] == [0, 1, 2, 3]
    assert not any(LayerProbe(model, store, None).due(s) for s in range(12))
    assert LayerProbe(model, store, None).session(0) is NO_PROBE
    assert LayerProbe(model, store, 5).session(7) is NO_PROBE
    assert isinstance(LayerProbe(model, store, 5).session(10), ProbeSession)


def test_unmeasured_step_attaches_no_hooks_and_writes_nothing(tmp_path):
    model, store = make_model(), DiagnosticsStore(tmp_path)
    idx, targets = make_batch()
    session = LayerProbe(model, store, 5).session(3)
    with session:
        assert count_hooks(model) == 0
        _, loss = model(idx, targets)
    loss.backward()
    session.after_backward()
    session.before_update()
    session.after_update()
    assert count_hooks(model) == 0
    assert store.steps() == []


def test_measured_step_hooks_are_removed_after_the_session(tmp_path):
    model, store = make_model(), DiagnosticsStore(tmp_path)
    idx, _ = make_batch()
    session = LayerProbe(model, store, 5).session(5)
    with session:
        assert count_hooks(model) > 0
        model(idx)
    assert count_hooks(model) == 0
    # also when the forward fails inside the session
    session = LayerProbe(model, store, 5).session(10)
    with pytest.raises(ValueError, match="exceeds block_size"):
        with session:
            model(torch.zeros(1, T + 1, dtype=torch.long))
    assert count_hooks(model) == 0
    assert not torch.nn.modules.module._global_forward_hooks


def test_trainer_measures_step_zero_and_every_interval_with_the_weights_of_that_step(tmp_path):
    """Step s is measured with the weights after s updates; its update ratio is that of update s → s+1."""
    # a tiny grad_clip: gradients are stored before clipping, so they are far above it
    cfg = tiny_config(train={"steps": 12, "eval_interval": 12, "ckpt_interval": 12, "grad_clip": 1e-3},
                      diagnostics={"interval": 4, "layer_skip": False})
    snapshots: dict[int, dict[str, torch.Tensor]] = {}
    trainer = Trainer(cfg, tmp_path / "run")

    def on_log(row):  # called after each step with the weights after `row["step"]` updates
        snapshots[row["step"]] = {name: p.detach().clone() for name, p in trainer.model.blocks.named_parameters()}

    trainer.on_log = on_log
    assert trainer.run().status == "completed"
    store = DiagnosticsStore(tmp_path / "run")
    assert store.steps() == [0, 4, 8]
    counts = {s: len(stored(store, s)) for s in store.steps()}
    assert len(set(counts.values())) == 1
    for s in (0, 4, 8):
        got = stored(store, s)
        for layer in range(cfg.model.n_layer):
            w0 = [w.double() for name, w in snapshots[s].items() if name.startswith(f"{layer}.")]
            w1 = [w.double() for name, w in snapshots[s + 1].items() if name.startswith(f"{layer}.")]
            norm0 = math.sqrt(sum(w.pow(2).sum().item() for w in w0))
            delta = math.sqrt(sum((b - a).pow(2).sum().item() for a, b in zip(w0, w1)))
            assert got[(layer, "block", "weight_norm", None)] == pytest.approx(norm0, rel=1e-6)
            assert got[(layer, "block", "update_ratio", None)] == pytest.approx(delta / norm0, rel=1e-4)
        # the blocks' gradients are part of the whole model's pre-clip norm, logged for update s → s+1
        total = math.sqrt(sum(got[(layer, "block", "grad_norm", None)] ** 2 for layer in range(cfg.model.n_layer)))
        logged = next(r for r in RunDir(tmp_path / "run").metrics() if r["step"] == s + 1)["grad_norm"]
        assert 100 * cfg.train.grad_clip < total <= logged * (1 + 1e-6)
