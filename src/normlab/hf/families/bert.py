"""BERT (Devlin et al. 2019, arXiv 1810.04805): a Post-LN encoder with an embedding LayerNorm."""
from __future__ import annotations

import torch

from normlab.hf.adapter import QKV, WB, Adapter, Codec, Map, adapter, same

# normlab reads one segment: segment 0's embedding is added into the position table (the sum the model
# computes is the same), and written back as a single zero segment
FOLD_SEGMENT = Codec(lambda parts, cfg: parts[0] + parts[1][0], lambda t, cfg: [t, torch.zeros(1, cfg.d_model)])


@adapter
class BERT(Adapter):
    """The other segments' rows are left out, said so. The pooler ([CLS] → tanh dense, for sentence
    classification) has no counterpart in a masked LM and is left out too. The masked-LM head
    (cls.predictions, outside the base model) is read where the checkpoint has one."""

    family, model_types, exportable = "BERT", ("bert",), True
    summary = "Post-LN LayerNorm encoder with an embedding norm, learned positions, GELU MLP, BERT's masked-LM head"
    # export writes a BERT with its masked-LM head (BertForMaskedLM), whose transform the model must have; an
    # encoder without one goes to the XLM layout, whose head is the plain projection. Import reads either.
    facts = dict(arch="encoder", scheme="post", norm="layernorm", positions="learned", mlp="gelu", embed_norm=True,
                 final_norm=False, bias=True, head_transform=True)
    free = ("head_bias",)
    embedding, prefixes, block = "embeddings.word_embeddings.weight", ("bert.", ""), "encoder.layer.{}."
    head = "cls.predictions.decoder.weight"
    ignore = {r"pooler\.dense\.(weight|bias)": "the pooler ([CLS] classifier input): no counterpart in a masked LM",
              r"embeddings\.position_ids": "a buffer of position indices, not a weight",
              r"(cls\.)?seq_relationship\.(weight|bias)|cls\.seq_relationship\..*":
                  "the next-sentence head: normlab trains no sentence pairs"}

    def settings(self, hf, heads_in_checkpoint):
        kind = hf.get("position_embedding_type", "absolute")
        hf.require(kind == "absolute", f"position_embedding_type {kind!r}")
        return dict(vocab_size=hf.get("vocab_size"), block_size=hf.get("max_position_embeddings"),
                    n_layer=hf.get("num_hidden_layers"), n_head=hf.get("num_attention_heads"),
                    d_model=hf.get("hidden_size"), d_ff=hf.get("intermediate_size"),
                    norm_eps=hf.get("layer_norm_eps", 1e-12), gelu_approximate=hf.gelu_form(hf.get("hidden_act", "gelu")),
                    tie_weights=hf.get("tie_word_embeddings", True), head_transform=heads_in_checkpoint,
                    head_bias=heads_in_checkpoint)

    def hf_config(self, cfg, tied, **special):
        import transformers  # an optional extra: only export needs it

        return transformers.BertConfig(
            vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, num_hidden_layers=cfg.n_layer,
            num_attention_heads=cfg.n_head, intermediate_size=cfg.resolved_d_ff(),
            max_position_embeddings=cfg.block_size, layer_norm_eps=cfg.norm_eps, type_vocab_size=1,
            hidden_act="gelu_new" if cfg.gelu_approximate == "tanh" else "gelu", tie_word_embeddings=tied,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
            architectures=["BertForMaskedLM"], **special)

    def base(self, cfg):
        return "bert."  # BertForMaskedLM's base model

    def tensor_map(self, cfg):
        maps = [*same("wte", "embeddings.word_embeddings"),
                Map("wpe.weight", ("embeddings.position_embeddings.weight", "embeddings.token_type_embeddings.weight"),
                    FOLD_SEGMENT), *same("embed_norm", "embeddings.LayerNorm", suffixes=WB)]
        if cfg.head_transform:
            t = "cls.predictions.transform."
            maps += [Map(m.ours, m.theirs, in_base=False) for m in (
                *same("head_transform.dense", f"{t}dense", suffixes=WB),
                *same("head_transform.norm", f"{t}LayerNorm", suffixes=WB), Map("lm_head.bias", ("cls.predictions.bias",)))]
        return maps

    def block_map(self, cfg):
        parts = {"attn.sublayer.proj": "attention.output.dense", "attn.post_norm": "attention.output.LayerNorm",
                 "mlp.sublayer.fc": "intermediate.dense", "mlp.sublayer.proj": "output.dense",
                 "mlp.post_norm": "output.LayerNorm"}
        qkv = [Map(f"attn.sublayer.qkv.{s}", tuple(f"attention.self.{p}.{s}" for p in ("query", "key", "value")), QKV)
               for s in WB]
        return qkv + [m for ours, theirs in parts.items() for m in same(ours, theirs, suffixes=WB)]

    def read_extra(self, cfg, checkpoint, hf):
        segments = checkpoint.peek("embeddings.token_type_embeddings.weight").shape[0]
        if segments > 1:
            rest = "1" if segments == 2 else f"1–{segments - 1}"
            hf.notes.append(f"segment embedding {rest} left out: normlab reads one segment (segment 0's is "
                            "added into the position table)")
        if cfg.head_transform and checkpoint.has("cls.predictions.decoder.bias"):
            checkpoint.fetch("cls.predictions.decoder.bias")  # the same tensor as cls.predictions.bias, saved twice
