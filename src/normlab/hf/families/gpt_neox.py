"""GPT-NeoX (Black et al. 2022, arXiv 2204.06745 §2.1) and Pythia: a parallel block with two LayerNorms."""
from __future__ import annotations

from normlab.hf.adapter import NEOX_QKV, WB, Adapter, Map, adapter, same


@adapter
class GPTNeoX(Adapter):
    """x ← x + Attn(LN₁(x)) + MLP(LN₂(x)) (sequential Pre-LN with use_parallel_residual = false), RoPE on a
    share of each head (rotary_pct), biases everywhere, an untied head. Its fused q/k/v rows are grouped by
    head (q, k, v of head 0, then of head 1, ...): they are regrouped as normlab's q of every head, then k, v."""

    family, model_types = "GPT-NeoX", ("gpt_neox",)
    head = "embed_out.weight"
    summary = "the parallel placement with two LayerNorms, RoPE on a share of each head"
    facts = dict(arch="decoder", norm="layernorm", positions="rope", mlp="gelu", final_norm=True)
    embedding, prefixes, block = "embed_in.weight", ("gpt_neox.", ""), "layers.{}."
    ignore = {r"layers\.\d+\.attention\.(bias|masked_bias|rotary_emb\.inv_freq)": "a buffer (mask, RoPE's "
              "frequencies), not a weight"}

    def settings(self, hf, heads_in_checkpoint):
        params = hf.get("rope_parameters") or {}
        parallel = hf.get("use_parallel_residual", True)
        theta = hf.rope_theta() if params or hf.get("rope_scaling") else hf.get("rotary_emb_base") or 10000.0
        return dict(
            scheme="parallel" if parallel else "pre", scheme_options={"shared_norm": 0.0} if parallel else {},
            vocab_size=hf.get("vocab_size"), block_size=hf.get("max_position_embeddings"),
            n_layer=hf.get("num_hidden_layers"), n_head=hf.get("num_attention_heads"), d_model=hf.get("hidden_size"),
            d_ff=hf.get("intermediate_size"), norm_eps=hf.get("layer_norm_eps", 1e-5),
            bias=bool(hf.get("attention_bias", True)), gelu_approximate=hf.gelu_form(hf.get("hidden_act", "gelu")),
            rope_theta=float(theta),
            rope_fraction=float(params.get("partial_rotary_factor") or hf.get("rotary_pct") or 0.25),
            tie_weights=bool(hf.get("tie_word_embeddings", False)))

    def tensor_map(self, cfg):
        return [*same("wte", "embed_in"), *same("final_norm", "final_layer_norm", suffixes=WB)]

    def block_map(self, cfg):
        linear = WB if cfg.bias else ("weight",)
        return [*same("attn.in_norm", "input_layernorm", suffixes=WB),
                *same("mlp.in_norm", "post_attention_layernorm", suffixes=WB),
                *(Map(f"attn.sublayer.qkv.{s}", (f"attention.query_key_value.{s}",), NEOX_QKV) for s in linear),
                *same("attn.sublayer.proj", "attention.dense", suffixes=linear),
                *same("mlp.sublayer.fc", "mlp.dense_h_to_4h", suffixes=linear),
                *same("mlp.sublayer.proj", "mlp.dense_4h_to_h", suffixes=linear)]
