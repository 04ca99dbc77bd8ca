"""`normlab diagnose` names each Hugging Face family's layout from the model's own forward pass.

One tiny random model per family (2 layers, width 32, vocabulary 128), built from its transformers config class
and saved with safetensors; no model_type is looked up, so a family whose block is wired differently from its
neighbours (GPT-NeoX with and without use_parallel_residual) must read differently. Then layouts built here
by hand: the tests that `diagnose` says "unrecognised" rather than a wrong name.
"""
from __future__ import annotations

import json

import pytest
import torch
from torch import nn
from typer.testing import CliRunner

from normlab.cli import app
from normlab.diagnostics.structure import detect_placement, placement_text

T = pytest.importorskip("transformers", reason="test extra: pip install -e '.[test]'")

runner = CliRunner()
TOKENS = dict(vocab_size=128, bos_token_id=0, eos_token_id=0, pad_token_id=0)
DECODER = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
               max_position_embeddings=64, **TOKENS)
GQA = dict(DECODER, num_key_value_heads=1)
FALCON = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, **TOKENS)
OPT = dict(hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=2, word_embed_proj_dim=32,
           max_position_embeddings=64, **TOKENS)
ENCODER = dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
               max_position_embeddings=80)

# family: (model builder, (placement, normalizer, QK-norm, final norm))
FAMILIES = {
    "gpt2": (lambda: T.GPT2LMHeadModel(T.GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=64, **TOKENS)),
             ("pre", "layernorm", False, True)),
    "llama": (lambda: T.LlamaForCausalLM(T.LlamaConfig(**GQA)), ("pre", "rmsnorm", False, True)),
    "mistral": (lambda: T.MistralForCausalLM(T.MistralConfig(**GQA)), ("pre", "rmsnorm", False, True)),
    "qwen2": (lambda: T.Qwen2ForCausalLM(T.Qwen2Config(**GQA)), ("pre", "rmsnorm", False, True)),
    "qwen3": (lambda: T.Qwen3ForCausalLM(T.Qwen3Config(**GQA, head_dim=16)), ("pre", "rmsnorm", True, True)),
    "mixtral": (lambda: T.MixtralForCausalLM(T.MixtralConfig(**GQA, num_local_experts=2, num_experts_per_tok=1)),
                ("pre", "rmsnorm", False, True)),
    "gemma2": (lambda: T.Gemma2ForCausalLM(T.Gemma2Config(**GQA, head_dim=16, sliding_window=16)),
               ("sandwich", "rmsnorm", False, True)),
    "gemma3": (lambda: T.Gemma3ForCausalLM(T.Gemma3TextConfig(**GQA, head_dim=16, sliding_window=16)),
               ("sandwich", "rmsnorm", True, True)),
    "olmo2": (lambda: T.Olmo2ForCausalLM(T.Olmo2Config(**GQA)), ("reordered", "rmsnorm", True, True)),
    "opt": (lambda: T.OPTForCausalLM(T.OPTConfig(**OPT)), ("pre", "layernorm", False, True)),
    "opt-post": (lambda: T.OPTForCausalLM(T.OPTConfig(**OPT, do_layer_norm_before=False)),
                 ("post", "layernorm", False, False)),
    "bloom": (lambda: T.BloomForCausalLM(T.BloomConfig(hidden_size=32, n_layer=2, n_head=2, **TOKENS)),
              ("pre", "layernorm", False, True)),
    "gpt-neo": (lambda: T.GPTNeoForCausalLM(T.GPTNeoConfig(hidden_size=32, num_layers=2, num_heads=2,
                                                           attention_types=[[["global"], 2]],
                                                           max_position_embeddings=64, **TOKENS)),
                ("pre", "layernorm", False, True)),
    "gptj": (lambda: T.GPTJForCausalLM(T.GPTJConfig(n_embd=32, n_layer=2, n_head=2, rotary_dim=8, n_positions=64,
                                                    **TOKENS)),
             ("parallel", "layernorm", False, True)),
    "gpt-neox": (lambda: T.GPTNeoXForCausalLM(T.GPTNeoXConfig(**DECODER, use_parallel_residual=True)),
                 ("parallel", "layernorm", False, True)),
    "gpt-neox-sequential": (lambda: T.GPTNeoXForCausalLM(T.GPTNeoXConfig(**DECODER, use_parallel_residual=False)),
                            ("pre", "layernorm", False, True)),
    "falcon": (lambda: T.FalconForCausalLM(T.FalconConfig(**FALCON, parallel_attn=True)),
               ("parallel", "layernorm", False, True)),
    "falcon-sequential": (lambda: T.FalconForCausalLM(T.FalconConfig(**FALCON, parallel_attn=False)),
                          ("pre", "layernorm", False, True)),
    "falcon-new-architecture": (lambda: T.FalconForCausalLM(T.FalconConfig(**FALCON, new_decoder_architecture=True,
                                                                           num_kv_heads=2)),
                                ("parallel", "layernorm", False, True)),
    "stablelm-parallel": (lambda: T.StableLmForCausalLM(T.StableLmConfig(**GQA, use_parallel_residual=True)),
                          ("parallel", "layernorm", False, True)),
    "phi": (lambda: T.PhiForCausalLM(T.PhiConfig(**DECODER)), ("parallel", "layernorm", False, True)),
    "cohere": (lambda: T.CohereForCausalLM(T.CohereConfig(**GQA)), ("parallel", "layernorm", False, True)),
    # a minimal T5Config names no decoder_start_token_id: the decoder starts from the pad token, as T5's does
    "t5": (lambda: T.T5ForConditionalGeneration(T.T5Config(vocab_size=128, d_model=32, d_kv=16, d_ff=64,
                                                           num_layers=2, num_heads=2)),
           ("pre", "rmsnorm", False, True)),
    "bart": (lambda: T.BartForConditionalGeneration(T.BartConfig(vocab_size=128, d_model=32, encoder_layers=2,
                                                                 decoder_layers=2, encoder_attention_heads=2,
                                                                 decoder_attention_heads=2, encoder_ffn_dim=64,
                                                                 decoder_ffn_dim=64, max_position_embeddings=64)),
             ("post", "layernorm", False, False)),
    "bert": (lambda: T.BertForMaskedLM(T.BertConfig(**ENCODER)), ("post", "layernorm", False, False)),
    "roberta": (lambda: T.RobertaForMaskedLM(T.RobertaConfig(**ENCODER, pad_token_id=1)),
                ("post", "layernorm", False, False)),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_is_named_from_its_structure(tmp_path, family):
    build, expected = FAMILIES[family]
    torch.manual_seed(0)
    build().save_pretrained(tmp_path, safe_serialization=True)
    result = runner.invoke(app, ["diagnose", str(tmp_path), "--json", "--no-skip"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["placement"], data["normalizer"], data["qk_norm"], data["final_norm"]) == expected
    assert "placement_seen" not in data
    for stack in (data.get("stacks") or {}).values():  # T5 and BART: the encoder and the decoder alike
        assert (stack["placement"], stack["normalizer"]) == expected[:2]


class Layer(nn.Module):
    """One norm (two for `keel`) and two sub-layers, wired as `how` says; `+qkv`: q, k and v normalized per head
    inside the attention sub-layer."""

    def __init__(self, how: str, d: int = 8):
        super().__init__()
        self.how, self.qkv = how.removesuffix("+qkv"), how.endswith("+qkv")
        self.norm, self.out = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn, self.mlp = nn.Linear(d, d), nn.Linear(d, d)
        self.q_norm, self.k_norm, self.v_norm = nn.LayerNorm(d // 2), nn.LayerNorm(d // 2), nn.LayerNorm(d // 2)

    def attend(self, x):
        if not self.qkv:
            return self.attn(x)
        heads = x.view(*x.shape[:-1], 2, x.shape[-1] // 2)  # per head: a 4-d input
        return self.attn((self.q_norm(heads) + self.k_norm(heads) + self.v_norm(heads)).flatten(-2))

    def forward(self, x):
        if self.how == "side-by-side":  # x ← x + A(Norm(x)) + M(Norm(x)): GPT-J's block
            h = self.norm(x)
            return x + self.attend(h) + self.mlp(h)
        if self.how == "sequential":  # x' = x + A(Norm(x)); x' + M(x'): the MLP reads the sum, un-normalized
            x = x + self.attend(self.norm(x))
            return x + self.mlp(x)
        if self.how == "post":  # x ← Norm(x + A(x))
            return self.norm(x + self.attend(x))
        if self.how in ("hybrid", "half-pre"):  # y = x + A(x), then the MLP on Norm(y)
            y = x + self.attend(x)
            h = self.norm(y)
            return (h if self.how == "hybrid" else y) + self.mlp(h)  # HybridNorm carries Norm(y) on, half-pre y
        # keel: x ← Norm'(x + A(Norm(x))): one norm reads the input, another gives the output
        return self.out(x + self.attend(self.norm(x)))


def run_stack(*layers: nn.Module) -> dict:
    stack = nn.ModuleList(layers)
    model = nn.Module()
    model.layers = stack

    def forward():
        x = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(0))
        for layer in stack:
            x = layer(x)
    return detect_placement(model, forward)


def test_a_shared_norm_read_side_by_side_is_parallel_and_read_in_sequence_is_pre():
    assert run_stack(Layer("side-by-side"), Layer("side-by-side"))["placement"] == "parallel"
    assert run_stack(Layer("sequential"), Layer("sequential"))["placement"] == "pre"


def test_a_layout_no_name_fits_is_unrecognised_with_what_was_seen():
    found = run_stack(Layer("half-pre"), Layer("half-pre"))  # only the MLP reads a norm, of the attention's sum
    assert found["placement"] == "unrecognised"
    assert found["placement_seen"] == ("layer 0: 1 norm(s), 0 on the layer input, 0 on a sub-layer's output, "
                                       "output is not a norm's")
    assert placement_text(found) == f"unrecognised ({found['placement_seen']})"  # as the CLI and the page print it
    mixed = run_stack(Layer("side-by-side"), Layer("post"))  # a parallel layer under a post one: neither, nor Mix-LN
    assert (mixed["placement"], mixed["placement_seen"]) == ("unrecognised", "layers read as parallel (1), post (1)")
    assert run_stack(Layer("post"), Layer("sequential"))["placement"] == "mix"  # Post-LN below Pre-LN is Mix-LN's layout


def test_post_ln_with_an_input_norm_is_keel():
    assert run_stack(Layer("keel"), Layer("keel"))["placement"] == "keel"


def test_hybridnorm_is_told_from_a_half_pre_layout_by_what_its_ffn_residual_carries():
    """Both normalize only the attention's sum; HybridNorm's FFN residual carries the normalized sum, the other
    the sum itself. Without its QKV-norm the layout is not HybridNorm's either."""
    hybrid = run_stack(Layer("hybrid+qkv"), Layer("hybrid+qkv"))
    assert (hybrid["placement"], hybrid["qk_norm"]) == ("hybrid", True)
    half = run_stack(Layer("half-pre+qkv"), Layer("half-pre+qkv"))
    assert half["placement"] == "unrecognised" and "normalized between" not in half["placement_seen"]
    assert half["placement_seen"].endswith("3 norm(s) on queries, keys or values")
    no_qkv = run_stack(Layer("hybrid"), Layer("hybrid"))
    assert no_qkv["placement"] == "unrecognised"
    assert no_qkv["placement_seen"].endswith("normalized between its sub-layers")
    # HybridNorm*'s first block is Pre-Norm; a Pre-LN block above HybridNorm's is neither
    assert run_stack(Layer("sequential+qkv"), Layer("hybrid+qkv"))["placement"] == "hybrid"
    assert run_stack(Layer("hybrid+qkv"), Layer("sequential+qkv"))["placement"] == "unrecognised"
