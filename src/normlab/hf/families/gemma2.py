"""Gemma 2 (arXiv 2408.00118): Sandwich-LN with RMSNorm (a norm before and after each sub-layer), GeGLU, RoPE,
grouped-query attention, √d-scaled embeddings, attention and final-logit soft-capping."""
from __future__ import annotations

from normlab.hf.adapter import ONE_PLUS, adapter
from normlab.hf.families.llama import Llama, llama_attention
from normlab.nn.config import ModelConfig


@adapter
class Gemma2(Llama):
    """Its norms scale by (1 + w): normlab's RMSNorm scales by its weight, so the weight is read as 1 + w (the
    same fp32 value the model computes) and written back as w. Its sliding-window layers attend exactly as
    the others up to the window, which caps the context as for Mistral."""

    family, model_types, exportable = "Gemma-2", ("gemma2",), True
    summary = "Sandwich-LN RMSNorm decoder, rotary positions, GeGLU MLP, no biases"
    facts = dict(arch="decoder", scheme="sandwich", norm="rmsnorm", positions="rope", mlp="geglu", final_norm=True,
                 norm_bias=False, bias=False)
    free = ("n_kv_head", "d_head", "attn_scale", "attn_softcap", "logit_softcap")
    scales_embedding = True
    ignore = {}
    norm_slots = {"attn.in_norm": "input_layernorm", "attn.out_norm": "post_attention_layernorm",
                  "mlp.in_norm": "pre_feedforward_layernorm", "mlp.out_norm": "post_feedforward_layernorm"}
    norm_codec = ONE_PLUS

    def settings(self, hf, heads_in_checkpoint):
        hf.require(not hf.get("attention_bias"), "attention_bias")
        act = hf.get("hidden_activation") or hf.get("hidden_act") or "gelu_pytorch_tanh"
        attention = llama_attention(hf)
        head_dim = attention["d_head"] or attention["d_model"] // attention["n_head"]
        return dict(**attention, d_ff=hf.get("intermediate_size"), norm_eps=hf.get("rms_norm_eps", 1e-6),
                    gelu_approximate=hf.gelu_form(act), attn_scale=hf.get("query_pre_attn_scalar", head_dim) ** -0.5,
                    attn_softcap=hf.get("attn_logit_softcapping"), logit_softcap=hf.get("final_logit_softcapping"),
                    tie_weights=bool(hf.get("tie_word_embeddings", True)))

    def refusals(self, cfg):
        wrong = super().refusals(cfg)
        scalar = _scalar(cfg)
        if abs(scalar - round(scalar)) > 1e-6 * scalar:
            wrong.append(f"attn_scale = {cfg.attn_scale} (Gemma-2 scales by query_pre_attn_scalar^-½, an integer's)")
        return wrong

    def hf_config(self, cfg, tied, **special):
        import transformers  # an optional extra: only export needs it

        return transformers.Gemma2Config(
            vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.resolved_d_ff(),
            num_hidden_layers=cfg.n_layer, num_attention_heads=cfg.n_head,
            num_key_value_heads=cfg.n_kv_head or cfg.n_head, head_dim=cfg.head_dim,
            hidden_activation="gelu_pytorch_tanh" if cfg.gelu_approximate == "tanh" else "gelu",
            max_position_embeddings=cfg.block_size, sliding_window=cfg.block_size, rms_norm_eps=cfg.norm_eps,
            query_pre_attn_scalar=round(_scalar(cfg)),
            attn_logit_softcapping=cfg.attn_softcap, final_logit_softcapping=cfg.logit_softcap,
            tie_word_embeddings=tied, rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta},
            rope_theta=cfg.rope_theta, architectures=["Gemma2ForCausalLM"], **special)


def _scalar(cfg: ModelConfig) -> float:
    """Gemma-2's query_pre_attn_scalar: attention scales by its −½ power."""
    return (cfg.attn_scale or cfg.head_dim ** -0.5) ** -2
