"""Llama (Touvron et al. 2023) and the families that share its layout: Pre-LN with RMSNorm, RoPE, SwiGLU,
grouped-query attention; Mistral (a sliding window), Qwen2 (q/k/v bias), Qwen3 (QK-norm per head), OLMo 2
(the norms after each sub-layer)."""
from __future__ import annotations

from normlab.hf.adapter import GATE_UP, QKV, Adapter, Codec, Map, SAME, adapter, same
from normlab.nn.config import ModelConfig


def llama_projections(cfg: ModelConfig) -> list[Map]:
    """One block's attention and gated-MLP projections in the Llama naming, with q/k/v bias and QK-norm where
    the config has them: shared by Llama, its kin and Gemma 2."""
    qkv = tuple(f"self_attn.{p}_proj" for p in "qkv")
    maps = [Map("attn.sublayer.qkv.weight", tuple(f"{n}.weight" for n in qkv), QKV),
            *same("attn.sublayer.proj", "self_attn.o_proj"),
            Map("mlp.sublayer.fc.weight", ("mlp.gate_proj.weight", "mlp.up_proj.weight"), GATE_UP),
            *same("mlp.sublayer.proj", "mlp.down_proj")]
    if cfg.qkv_bias:
        maps.append(Map("attn.sublayer.qkv.bias", tuple(f"{n}.bias" for n in qkv), QKV))
    if cfg.qk_norm != "none":
        maps += [*same("attn.sublayer.q_norm", "self_attn.q_norm"), *same("attn.sublayer.k_norm", "self_attn.k_norm")]
    return maps


@adapter
class Llama(Adapter):
    """Llama's layout: its subclasses change a fact or the names of its two norms."""

    family, model_types, exportable = "Llama", ("llama", "mistral"), True
    summary = "Pre-LN RMSNorm decoder, rotary positions, SwiGLU MLP, no biases"
    facts = dict(arch="decoder", scheme="pre", norm="rmsnorm", positions="rope", mlp="swiglu", final_norm=True,
                 norm_bias=False, bias=False, qkv_bias=None, qk_norm="none")
    free = ("n_kv_head", "d_head")
    embedding, prefixes, block = "embed_tokens.weight", ("model.", ""), "layers.{}."
    ignore = {r"layers\.\d+\.self_attn\.rotary_emb\.inv_freq": "RoPE's frequencies, recomputed from rope_theta"}
    norm_slots: dict[str, str] = {"attn.in_norm": "input_layernorm", "mlp.in_norm": "post_attention_layernorm"}
    norm_codec: Codec = SAME
    config_class, architecture = "LlamaConfig", "LlamaForCausalLM"  # transformers' names for the layout

    def settings(self, hf, heads_in_checkpoint):
        hf.require(hf.get("hidden_act", "silu") == "silu", f"hidden_act {hf.get('hidden_act')!r} (SwiGLU is SiLU-gated)")
        hf.require(not hf.get("attention_bias") and not hf.get("mlp_bias"),
                   "attention_bias or mlp_bias (normlab's Llama layout has bias nowhere but q/k/v)")
        return dict(**llama_attention(hf), d_ff=hf.get("intermediate_size"), norm_eps=hf.get("rms_norm_eps", 1e-6),
                    tie_weights=bool(hf.get("tie_word_embeddings", False)))

    def hf_config(self, cfg, tied, **special):
        import transformers  # an optional extra: only export needs it

        return getattr(transformers, self.config_class)(
            vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.resolved_d_ff(),
            num_hidden_layers=cfg.n_layer, num_attention_heads=cfg.n_head,
            num_key_value_heads=cfg.n_kv_head or cfg.n_head, head_dim=cfg.head_dim, hidden_act="silu",
            max_position_embeddings=cfg.block_size, rms_norm_eps=cfg.norm_eps, tie_word_embeddings=tied,
            rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta}, rope_theta=cfg.rope_theta,
            attention_bias=False,
            architectures=[self.architecture], **special)

    def tensor_map(self, cfg):
        return [*same("wte", "embed_tokens"), *same("final_norm", "norm", self.norm_codec)]

    def block_map(self, cfg):
        norms = [m for ours, theirs in self.norm_slots.items() for m in same(ours, theirs, self.norm_codec)]
        return norms + llama_projections(cfg)


def llama_attention(hf) -> dict:
    """The sizes, heads and rotary embedding of a Llama-named config (Llama, its kin, Gemma 2)."""
    d, n_head = hf.get("hidden_size"), hf.get("num_attention_heads")
    head_dim = hf.get("head_dim") or d // n_head
    return dict(vocab_size=hf.get("vocab_size"), block_size=hf.context(), n_layer=hf.get("num_hidden_layers"),
                n_head=n_head, d_model=d, n_kv_head=hf.kv_heads(n_head),
                d_head=None if head_dim * n_head == d else head_dim, rope_theta=hf.rope_theta())


@adapter
class Qwen2(Llama):
    """Qwen2 (arXiv 2407.10671): Llama's layout with a bias on q, k and v (always: its config has no switch)."""

    family, model_types, exportable = "Qwen2", ("qwen2",), False
    summary = "Llama's layout with a q/k/v bias"
    facts = {**Llama.facts, "qkv_bias": True}


@adapter
class Qwen3(Llama):
    """Qwen3 (arXiv 2505.09388): Llama's layout with QK-norm (RMSNorm of each head's q and k before RoPE)."""

    family, model_types = "Qwen3", ("qwen3",)
    summary = "the Llama layout with QK-norm per head"
    facts = {**Llama.facts, "qk_norm": "per_head"}
    config_class, architecture = "Qwen3Config", "Qwen3ForCausalLM"


@adapter
class Olmo2(Llama):
    """OLMo 2 (arXiv 2501.00656): Llama's layout with the norms moved to each sub-layer's output (the
    `reordered` placement, x ← x + Norm(F(x))) and QK-norm over the full width of q and k."""

    family, model_types, exportable = "OLMo-2", ("olmo2",), False
    summary = "the reordered placement (x + Norm(F(x))), RMSNorm, QK-norm over the full width"
    facts = {**Llama.facts, "scheme": "reordered", "qk_norm": "full_width"}
    norm_slots = {"attn.out_norm": "post_attention_layernorm", "mlp.out_norm": "post_feedforward_layernorm"}
