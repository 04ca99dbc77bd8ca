"""XLM (Lample & Conneau 2019, arXiv 1901.07291) as a masked LM: a Post-LN encoder with an embedding
LayerNorm and an output projection tied to the embedding, with no transform before it.

It holds the encoder BERT's layout cannot serve as a masked LM: BERT's head (cls.predictions) always passes
the stream through dense → GELU → LayerNorm before the projection, which normlab's plain encoder (no
`head_transform`) lacks, so that encoder would lose its head as a BertModel. XLMWithLMHeadModel computes the
same blocks (q/k/v and output linears with biases, residual then LayerNorm, a 4·d exact-GELU MLP) and projects
the last stream straight onto the tied embedding (plus a bias), which is normlab's head; transformers'
pipeline("fill-mask") serves it (`tests/hf/test_client.py`).
"""
from __future__ import annotations

from normlab.hf.adapter import QKV, WB, Adapter, Map, adapter, same


@adapter
class XLM(Adapter):
    """One language, learned positions, no adaptive softmax, not causal: the XLM of a masked LM. Its blocks'
    tensors sit in one list per kind (attentions.i, layer_norm1.i, ffns.i, layer_norm2.i), not under one
    prefix per block, so the maps name each layer's tensors themselves."""

    family, model_types, exportable = "XLM", ("xlm",), True
    summary = "Post-LN LayerNorm encoder with an embedding norm and a plain tied head (4·d exact-GELU MLP)"
    facts = dict(arch="encoder", scheme="post", norm="layernorm", positions="learned", mlp="gelu", embed_norm=True,
                 final_norm=False, bias=True, gelu_approximate="none")
    free = ("head_bias",)
    embedding, prefixes, head = "embeddings.weight", ("transformer.", ""), "pred_layer.proj.weight"
    ignore = {r"position_ids": "a buffer of position indices, not a weight"}

    def settings(self, hf, heads_in_checkpoint):
        for key, plain in (("causal", False), ("asm", False), ("sinusoidal_embeddings", False),
                           ("gelu_activation", True)):
            hf.require(bool(hf.get(key, plain)) == plain, f"{key} = {hf.get(key)!r}")
        hf.require(hf.get("n_langs", 1) == 1 or not hf.get("use_lang_emb", True), "language embeddings")
        d = hf.get("emb_dim")
        return dict(vocab_size=hf.get("vocab_size") or hf.get("n_words"), block_size=hf.get("max_position_embeddings"),
                    n_layer=hf.get("n_layers"), n_head=hf.get("n_heads"), d_model=d, d_ff=4 * d,
                    norm_eps=hf.get("layer_norm_eps", 1e-12), tie_weights=True, head_bias=True)

    def refusals(self, cfg):
        wrong = super().refusals(cfg)
        if cfg.resolved_d_ff() != 4 * cfg.d_model:
            wrong.append(f"d_ff = {cfg.resolved_d_ff()} (the XLM layout's MLP is 4·d_model = {4 * cfg.d_model})")
        if not cfg.tie_weights:
            wrong.append("tie_weights = false (the XLM layout's head is the embedding)")
        return wrong

    def hf_config(self, cfg, tied, pad_token_id=None, **special):
        import transformers  # an optional extra: only export needs it

        if pad_token_id is None:  # XLM counts a sequence's length by it where no attention mask is given
            raise ValueError("the XLM layout needs a pad token, and the run's tokenizer has none")
        return transformers.XLMConfig(
            vocab_size=cfg.vocab_size, emb_dim=cfg.d_model, n_layers=cfg.n_layer, n_heads=cfg.n_head,
            max_position_embeddings=cfg.block_size, layer_norm_eps=cfg.norm_eps, dropout=0.0, attention_dropout=0.0,
            gelu_activation=True, sinusoidal_embeddings=False, causal=False, asm=False, n_langs=1, use_lang_emb=False,
            is_encoder=True, tie_word_embeddings=True, architectures=["XLMWithLMHeadModel"],
            pad_token_id=pad_token_id, **special)

    def tensor_map(self, cfg):
        return [*same("wte", "embeddings"), *same("wpe", "position_embeddings"),
                *same("embed_norm", "layer_norm_emb", suffixes=WB), Map("lm_head.bias", ("pred_layer.proj.bias",), in_base=False)]

    def maps(self, cfg):
        parts = {"attn.sublayer.proj": "attentions.{}.out_lin", "attn.post_norm": "layer_norm1.{}",
                 "mlp.sublayer.fc": "ffns.{}.lin1", "mlp.sublayer.proj": "ffns.{}.lin2", "mlp.post_norm": "layer_norm2.{}"}
        blocks = []
        for i in range(cfg.n_layer):
            blocks += [Map(f"blocks.{i}.attn.sublayer.qkv.{s}", tuple(f"attentions.{i}.{p}_lin.{s}" for p in "qkv"),
                           QKV) for s in WB]
            blocks += [m for ours, theirs in parts.items() for m in same(f"blocks.{i}.{ours}", theirs.format(i), suffixes=WB)]
        return self.tensor_map(cfg) + blocks

