"""Each pure metric in normlab.diagnostics.stats against a value computed by hand."""
from __future__ import annotations

import math

import pytest
import torch

from normlab.diagnostics import stats


def t(values, dtype=torch.float32) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype)


# -- rms --------------------------------------------------------------------------------------

def test_rms_single_token():
    # (9 + 16) / 2 = 12.5
    assert stats.rms(t([[3.0, 4.0]])) == pytest.approx(math.sqrt(12.5), rel=1e-7)


def test_rms_is_over_every_element_of_a_batch():
    # B=2, T=1, C=2: squares 9, 16, 1, 1 -> mean 27/4
    x = t([[[3.0, 4.0]], [[1.0, -1.0]]])
    assert stats.rms(x) == pytest.approx(math.sqrt(27 / 4), rel=1e-7)


def test_rms_mask_excludes_padded_tokens():
    x = t([[[3.0, 4.0], [100.0, 100.0]], [[0.0, 0.0], [1.0, 1.0]]])  # (B=2, T=2, C=2)
    mask = t([[1, 0], [0, 1]])
    # kept tokens: [3, 4] and [1, 1] -> squares 9 + 16 + 1 + 1 = 27 over 4 elements
    assert stats.rms(x, mask) == pytest.approx(math.sqrt(27 / 4), rel=1e-7)
    # without the mask the padded [100, 100] and [0, 0] count: (27 + 20000) / 8
    assert stats.rms(x) == pytest.approx(math.sqrt(20027 / 8), rel=1e-7)


def test_rms_returns_python_float_and_keeps_fp64():
    x = t([[1.0 + 1e-12, -(1.0 + 1e-12)]], dtype=torch.float64)
    value = stats.rms(x)
    assert isinstance(value, float)
    assert value == pytest.approx(1.0 + 1e-12, abs=1e-15)  # fp32 would round it to exactly 1
    assert value != 1.0


# -- norm_ratio ---------------------------------------------------------------------------------

def test_norm_ratio_single_token():
    # ‖[3, 4]‖ = 5, ‖[0, 10]‖ = 10
    assert stats.norm_ratio(t([[3.0, 4.0]]), t([[0.0, 10.0]])) == pytest.approx(0.5, rel=1e-7)


def test_norm_ratio_is_frobenius_not_a_mean_of_token_ratios():
    f = t([[[3.0, 4.0], [0.0, 0.0]]])  # ‖f‖_F = 5
    x = t([[[1.0, 0.0], [0.0, 1.0]]])  # ‖x‖_F = √2
    # per-token ratios would be 5 and 0 (mean 2.5); the Frobenius ratio is 5/√2
    assert stats.norm_ratio(f, x) == pytest.approx(5 / math.sqrt(2), rel=1e-7)


def test_norm_ratio_mask():
    f = t([[[3.0, 4.0], [50.0, 0.0]]])
    x = t([[[0.0, 2.0], [1.0, 0.0]]])
    mask = t([[1, 0]])
    assert stats.norm_ratio(f, x, mask) == pytest.approx(5 / 2, rel=1e-7)
    # unmasked: ‖f‖ = √(25 + 2500), ‖x‖ = √5
    assert stats.norm_ratio(f, x) == pytest.approx(math.sqrt(2525 / 5), rel=1e-7)


# -- cosines, angular distance, block influence ------------------------------------------------

def test_token_cosines_hand_values():
    a = t([[[1.0, 0.0], [1.0, 1.0], [1.0, 0.0], [2.0, 0.0]]])
    b = t([[[0.0, 1.0], [3.0, 3.0], [-1.0, 0.0], [1.0, 1.0]]])
    cos = stats.token_cosines(a, b)
    assert cos.shape == (4,)
    assert cos.tolist() == pytest.approx([0.0, 1.0, -1.0, 1 / math.sqrt(2)], abs=1e-7)


def test_mean_cosine():
    a = t([[[1.0, 0.0], [1.0, 0.0]]])
    b = t([[[0.0, 5.0], [1.0, 1.0]]])
    # cos = 0 and 1/√2 -> mean 1/(2√2)
    assert stats.mean_cosine(a, b) == pytest.approx(1 / (2 * math.sqrt(2)), rel=1e-6)


def test_orthogonal_vectors():
    a, b = t([[[1.0, 0.0]]]), t([[[0.0, 2.0]]])
    assert stats.mean_cosine(a, b) == pytest.approx(0.0, abs=1e-7)
    assert stats.angular_distance(a, b) == pytest.approx(0.5, abs=1e-7)
    assert stats.block_influence(a, b) == pytest.approx(1.0, abs=1e-7)


def test_opposite_and_parallel_vectors():
    a = t([[[2.0, 0.0]]])  # axis-aligned: the cosines are exactly ±1 in fp32 (arccos is ill-conditioned there)
    assert stats.angular_distance(a, -3 * a) == pytest.approx(1.0, abs=1e-6)
    assert stats.block_influence(a, -3 * a) == pytest.approx(2.0, abs=1e-6)
    assert stats.angular_distance(a, 5 * a) == pytest.approx(0.0, abs=1e-6)
    assert stats.block_influence(a, 5 * a) == pytest.approx(0.0, abs=1e-6)
    b = t([[[1.0, 2.0]]])  # not axis-aligned
    assert stats.block_influence(b, -3 * b) == pytest.approx(2.0, abs=1e-6)
    assert stats.angular_distance(b, -3 * b) == pytest.approx(1.0, abs=1e-3)


def test_angular_distance_is_a_mean_over_tokens_of_the_angle():
    a = t([[[1.0, 0.0], [1.0, 0.0]]])
    b = t([[[0.0, 1.0], [1.0, 1.0]]])
    # angles π/2 and π/4 -> (0.5 + 0.25) / 2 (not arccos of the mean cosine, which is 0.3125...)
    assert stats.angular_distance(a, b) == pytest.approx(0.375, rel=1e-6)
    assert stats.block_influence(a, b) == pytest.approx(1 - 1 / (2 * math.sqrt(2)), rel=1e-6)


def test_cosine_metrics_mask_excludes_padded_tokens():
    a = t([[[1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0], [1.0, 0.0]]])
    b = t([[[0.0, 1.0], [-1.0, 0.0]], [[0.0, 1.0], [-1.0, 0.0]]])
    mask = t([[1, 0], [1, 0]])
    # kept tokens: orthogonal (cos 0, angle 0.5) and parallel (cos 1, angle 0)
    assert stats.mean_cosine(a, b, mask) == pytest.approx(0.5, abs=1e-7)
    assert stats.angular_distance(a, b, mask) == pytest.approx(0.25, abs=1e-6)
    assert stats.block_influence(a, b, mask) == pytest.approx(0.5, abs=1e-7)
    # unmasked, the two opposite pairs join: cos 0, -1, 1, -1
    assert stats.mean_cosine(a, b) == pytest.approx(-0.25, abs=1e-7)
    assert stats.angular_distance(a, b) == pytest.approx((0.5 + 1 + 0 + 1) / 4, abs=1e-6)


# -- attention_stats ---------------------------------------------------------------------------

def test_zero_queries_give_uniform_causal_rows():
    B, nh, T, hs = 2, 3, 5, 4
    q = torch.zeros(B, nh, T, hs)
    k = torch.randn(B, nh, T, hs, generator=torch.Generator().manual_seed(0))
    entropy, max_logit = stats.attention_stats(q, k)
    # row t is uniform over t + 1 keys: entropy log(t + 1); all logits are 0
    expected = sum(math.log(t_ + 1) for t_ in range(T)) / T
    assert entropy.shape == (nh,) and max_logit.shape == (nh,)
    assert entropy.tolist() == pytest.approx([expected] * nh, rel=1e-6)
    assert max_logit.tolist() == [0.0] * nh


def test_zero_queries_give_uniform_bidirectional_rows():
    """An encoder's attention has no mask: every row is uniform over all T keys (entropy log T)."""
    B, nh, T, hs = 2, 3, 5, 4
    q = torch.zeros(B, nh, T, hs)
    k = torch.randn(B, nh, T, hs, generator=torch.Generator().manual_seed(0))
    entropy, _ = stats.attention_stats(q, k, causal_mask=False)
    assert entropy.tolist() == pytest.approx([math.log(T)] * nh, rel=1e-6)


def test_an_encoders_probe_measures_unmasked_attention(tmp_path):
    """The probe passes each attention's own mask choice: an encoder's entropy at init is near log T."""
    import normlab
    from normlab.diagnostics.probe import LayerProbe
    from normlab.rundir.diagnostics_store import DiagnosticsStore

    torch.manual_seed(0)
    model = normlab.build_model(dict(vocab_size=12, block_size=16, n_layer=1, n_head=2, d_model=16, arch="encoder",
                                     init_std=1e-4))  # tiny weights: near-uniform attention
    store = DiagnosticsStore(tmp_path)
    probe = LayerProbe(model, store, 1)
    x = torch.randint(11, (2, 16))
    session = probe.session(0)
    with session:
        _, loss = model(x, x)
    loss.backward()
    session.after_backward()
    session.before_update()
    session.after_update()  # writes the step's rows
    rows = store.query("attn_entropy", "attn", 0)[0]
    assert rows and all(abs(v - math.log(16)) < 0.05 for v in rows if v is not None)


def test_attention_stats_hand_logits_per_head():
    # B=1, nh=2, T=2, hs=4: √hs = 2
    q = torch.zeros(1, 2, 2, 4)
    k = torch.zeros(1, 2, 2, 4)
    q[0, 0, :, 0] = torch.tensor([4.0, 2.0])
    k[0, 0, :, 0] = torch.tensor([1.0, 3.0])
    # head 0 logits q·k/2: row 0 = [2, (6 masked)], row 1 = [1, 3]; head 1: q = 0 -> all 0
    entropy, max_logit = stats.attention_stats(q, k)
    assert max_logit.tolist() == pytest.approx([3.0, 0.0], abs=1e-6)  # 6 is above the diagonal: masked
    p = [math.exp(1) / (math.exp(1) + math.exp(3)), math.exp(3) / (math.exp(1) + math.exp(3))]
    h_row1 = -sum(pi * math.log(pi) for pi in p)
    assert h_row1 == pytest.approx(1 + math.log(1 + math.e ** 2) - (1 + 3 * math.e ** 2) / (1 + math.e ** 2))
    # row 0 sees one key: entropy 0; per-head mean over the two rows
    assert entropy.tolist() == pytest.approx([h_row1 / 2, math.log(2) / 2], rel=1e-6)


def test_attention_stats_average_over_batch_and_max_over_batch():
    q = torch.zeros(2, 1, 2, 1)
    k = torch.zeros(2, 1, 2, 1)
    # batch 1: row 1 logits q·k/1 = [100·(-100), 100·100] -> one-hot, entropy exactly 0
    q[1, 0, 1, 0] = 100.0
    k[1, 0, :, 0] = torch.tensor([-100.0, 100.0])
    entropy, max_logit = stats.attention_stats(q, k)
    # batch 0 uniform: (0 + log 2)/2; batch 1: 0 -> mean log(2)/4
    assert entropy.tolist() == pytest.approx([math.log(2) / 4], rel=1e-6)
    assert max_logit.tolist() == [10000.0]


# -- logit_stats ------------------------------------------------------------------------------

def test_logit_stats_hand_values():
    l3, l7 = math.log(3), math.log(7)
    logits = t([[[0.0, l3], [l7, 0.0]]])  # (B=1, T=2, V=2)
    out = stats.logit_stats(logits)
    assert set(out) == {"logits_rms", "logits_max", "log_partition"}
    assert out["logits_rms"] == pytest.approx(math.sqrt((l3 ** 2 + l7 ** 2) / 4), rel=1e-6)
    assert out["logits_max"] == pytest.approx(l7, rel=1e-6)
    # log(1 + 3) = log 4 and log(7 + 1) = log 8: mean 2.5·log 2
    assert out["log_partition"] == pytest.approx(2.5 * math.log(2), rel=1e-6)


def test_log_partition_of_equal_logits():
    # V equal logits c: log Σ exp = c + log V
    logits = torch.full((1, 3, 5), 2.0)
    assert stats.logit_stats(logits)["log_partition"] == pytest.approx(2.0 + math.log(5), rel=1e-6)
