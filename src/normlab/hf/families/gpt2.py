"""GPT-2 (Radford et al. 2019): Pre-LN with LayerNorm, learned positions, GELU, biases, a tied head."""
from __future__ import annotations

from normlab.hf.adapter import CONV1D, WB, Adapter, adapter, same


@adapter
class GPT2(Adapter):
    """GPT-2's Conv1D weights are stored (in, out), so they are transposed both ways. A normlab model without
    biases is written with zero biases (the same function)."""

    family, model_types, exportable = "GPT-2", ("gpt2",), True
    summary = "Pre-LN LayerNorm decoder, learned positions, GELU MLP"
    facts = dict(arch="decoder", scheme="pre", norm="layernorm", positions="learned", mlp="gelu", final_norm=True,
                 bias=True)
    embedding, prefixes, block = "wte.weight", ("transformer.", ""), "h.{}."
    ignore = {r"h\.\d+\.attn\.(masked_)?bias": "the causal-mask buffer of old GPT-2 checkpoints, not a weight"}

    def settings(self, hf, heads_in_checkpoint):
        hf.require(not hf.get("scale_attn_by_inverse_layer_idx"), "scale_attn_by_inverse_layer_idx")
        hf.require(hf.get("scale_attn_weights", True), "scale_attn_weights = false")
        d = hf.get("n_embd")
        return dict(vocab_size=hf.get("vocab_size"), block_size=hf.get("n_positions"), n_layer=hf.get("n_layer"),
                    n_head=hf.get("n_head"), d_model=d, d_ff=hf.get("n_inner") or 4 * d,
                    norm_eps=hf.get("layer_norm_epsilon", 1e-5),
                    gelu_approximate=hf.gelu_form(hf.get("activation_function", "gelu_new")),
                    tie_weights=hf.get("tie_word_embeddings", True))

    def hf_config(self, cfg, tied, **special):
        import transformers  # an optional extra: only export needs it

        return transformers.GPT2Config(
            vocab_size=cfg.vocab_size, n_positions=cfg.block_size, n_embd=cfg.d_model, n_layer=cfg.n_layer,
            n_head=cfg.n_head, n_inner=cfg.resolved_d_ff(), layer_norm_epsilon=cfg.norm_eps,
            activation_function="gelu_new" if cfg.gelu_approximate == "tanh" else "gelu", tie_word_embeddings=tied,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, architectures=["GPT2LMHeadModel"], **special)

    def tensor_map(self, cfg):
        return [*same("wte", "wte"), *same("wpe", "wpe"), *same("final_norm", "ln_f", suffixes=WB)]

    def block_map(self, cfg):
        linears = {"attn.sublayer.qkv": "attn.c_attn", "attn.sublayer.proj": "attn.c_proj",
                   "mlp.sublayer.fc": "mlp.c_fc", "mlp.sublayer.proj": "mlp.c_proj"}
        return [*same("attn.in_norm", "ln_1", suffixes=WB), *same("mlp.in_norm", "ln_2", suffixes=WB),
                *(m for ours, theirs in linears.items()
                  for m in (*same(ours, theirs, CONV1D), *same(ours, theirs, suffixes=("bias",))))]
