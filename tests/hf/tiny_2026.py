"""Tiny random language models of the 2026 residual designs, saved as Hugging Face directories, for the tests of
`normlab diagnose`: the hyper-connections of DeepSeek-V4, HY-V4, GLM-5-Next and Qwen4-exp, and the Attention
Residuals of Inkling-2. Each is built with transformers' own classes from a seed and saved in float32 safetensors.

GLM-5-Next has no causal LM class in transformers 5.24, only `Glm5NextForConditionalGeneration` (text and
vision): its tiny model carries a one-layer vision tower that text-only diagnosis never runs."""
from __future__ import annotations

import pathlib

import torch
import transformers

FAMILIES = ("deepseek_v4", "hy_v4", "glm5_next", "qwen4_exp", "inkling2")

COMMON = dict(vocab_size=256, num_hidden_layers=4, max_position_embeddings=256)

OVERRIDES = {
    "deepseek_v4": dict(
        hidden_size=64, num_attention_heads=4, head_dim=16, partial_rotary_factor=0.5, q_lora_rank=32,
        n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, o_groups=2, o_lora_rank=16,
        layer_types=["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                     "compressed_sparse_attention"],
        mlp_layer_types=["hash_moe", "moe", "moe", "moe"], sliding_window=16,
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
        index_n_heads=2, index_head_dim=16, index_topk=4, hc_mult=4, bos_token_id=1, eos_token_id=2),
    "hy_v4": dict(
        hidden_size=64, intermediate_size=64, moe_intermediate_size=32, num_attention_heads=4,
        n_routed_experts=4, num_experts_per_tok=2, q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=16,
        qk_rope_head_dim=8, v_head_dim=16, mlp_layer_types=["dense", "sparse", "sparse", "sparse"],
        indexer_types=["full", "full", "shared", "shared"], index_topk=8, index_head_dim=16, index_n_heads=2,
        hc_mult=4, pad_token_id=0, bos_token_id=1, eos_token_id=2),
    "glm5_next": dict(
        text_config=dict(
            COMMON, hidden_size=64, intermediate_size=64, moe_intermediate_size=32, num_attention_heads=4,
            num_key_value_heads=4, n_routed_experts=4, num_experts_per_tok=2, q_lora_rank=32, kv_lora_rank=16,
            qk_nope_head_dim=16, v_head_dim=16, mlp_layer_types=["dense", "sparse", "sparse", "sparse"],
            layer_types=["linear_attention", "indexed_attention", "linear_attention", "indexed_attention"],
            indexer_types=["full", "full", "shared", "full"], index_topk=8, index_kpool=4, index_head_dim=16,
            index_n_heads=2, linear_head_dim=16, linear_num_heads=4, hc_mult=4, pad_token_id=0, eos_token_id=2),
        vision_config=dict(depth=1, hidden_size=32, num_heads=2, out_hidden_size=64, intermediate_size=32,
                           projection_intermediate_size=32, patch_size=4),
        image_token_id=250, video_token_id=251, image_start_token_id=252, image_end_token_id=253,
        video_start_token_id=254, video_end_token_id=255),
    "qwen4_exp": dict(
        hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        layer_types=["linear_attention", "linear_attention", "linear_attention", "indexed_attention"],
        linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=32,
        hc_count=4, hc_lowrank=8, ple_layer_ids=[2], ple_embed_dim=32, heads_per_ngram=2,
        ngram_vocab_size_base=64, make_ngram_vocab_size_divisible_by=8, split_ngram_parts=2,
        indexer_n_heads=2, indexer_kv_heads=1, indexer_head_dim=16, indexer_budget=8, indexer_compress_ratio=4,
        eos_token_id=2),
    "inkling2": dict(
        hidden_size=64, unpadded_vocab_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        swa_num_attention_heads=4, swa_num_key_value_heads=2, swa_head_dim=16, sliding_window_size=16,
        d_rel=8, rel_extent=16, layer_types=["hybrid_sliding", "hybrid", "hybrid_sliding", "hybrid"],
        n_layers_per_attn_res_block=2, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
        eos_token_id=2),
}

CLASSES = {
    "deepseek_v4": ("DeepseekV4Config", "DeepseekV4ForCausalLM"),
    "hy_v4": ("HYV4Config", "HYV4ForCausalLM"),
    "glm5_next": ("Glm5NextConfig", "Glm5NextForConditionalGeneration"),
    "qwen4_exp": ("Qwen4ExpTextConfig", "Qwen4ExpForCausalLM"),
    "inkling2": ("Inkling2TextConfig", "Inkling2ForCausalLM"),
}


def save_tiny(model_type: str, out: pathlib.Path, seed: int = 0) -> pathlib.Path:
    """Build the tiny random model of `model_type` (one of FAMILIES) and save it to `out`."""
    if model_type not in CLASSES:
        raise ValueError(f"no tiny model for {model_type!r}; one of {FAMILIES}")
    config_name, model_name = CLASSES[model_type]
    common = {} if "text_config" in OVERRIDES[model_type] else COMMON
    config = getattr(transformers, config_name)(**common, **OVERRIDES[model_type])
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(config).float()
    model.save_pretrained(out, safe_serialization=True)
    return pathlib.Path(out)
