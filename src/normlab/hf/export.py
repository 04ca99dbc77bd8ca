"""A normlab model written back as a Hugging Face directory: `normlab export RUN_DIR --format hf --out DIR`.

DIR gets config.json and model.safetensors (layouts: GPT-2, Llama, Qwen3, Gemma-2, BERT) that `transformers.AutoModel*.from_pretrained(DIR)` loads with no
remote code, and the run's tokenizer: the one an imported model came with, or normlab's character
vocabulary as a `tokenizers` word-level tokenizer over single characters. config.json's bos/eos/pad ids are
the ones that tokenizer defines as special tokens, null where it has none (a character vocabulary has none):
never a config class's defaults, which in a character vocabulary are characters. A layout is one class: which
normlab models it can hold (`refusal` says why not, else None), its transformers config, and where each
normlab tensor goes. A placement with no Hugging Face layout (Post-LN decoder, DeepNorm, Mix-LN, ...) is
refused in one line naming the layouts there are.

What a layout lacks is written so that the function is the same: a bias the normlab model does not have
is written as zeros, and a token embedding scaled in the forward pass (√d under the `xiong` init) is
written pre-scaled, with the head untied where it was tied, so both keep their values.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from normlab.hf.files import HFDirError
from normlab.nn.config import ModelConfig
from normlab.nn.schemes import SCHEMES

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "vocab.json",
                   "merges.txt", "tokenizer.model")


class Layout:
    """One Hugging Face layout normlab models can be written in."""

    name: ClassVar[str] = ""
    holds: ClassVar[str] = ""  # the normlab models it holds, in words (for the refusal)
    embed_scale: ClassVar[str] = "1"  # the token embedding's factor the layout applies: "1" or "sqrt(d)"

    def refusal(self, cfg: ModelConfig) -> str | None:
        raise NotImplementedError

    def config(self, cfg: ModelConfig, tied: bool, **special: int | None) -> Any:
        """The transformers config; `special`: bos/eos/pad_token_id, which the config takes as they are."""
        raise NotImplementedError

    def tensors(self, cfg: ModelConfig, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        raise NotImplementedError


ANY = object()  # a setting a layout holds whatever its value


def _differences(cfg: ModelConfig, **want: Any) -> str | None:
    """The first setting of cfg that differs from what a layout needs, in words; None when all agree."""
    got = {"arch": cfg.arch, "scheme": cfg.scheme, "norm": cfg.norm, "positions": cfg.positions, "mlp": cfg.mlp,
           "embed_norm": cfg.resolved_embed_norm(), "final_norm": cfg.resolved_final_norm(), "qk_norm": cfg.qk_norm,
           "grouped k/v": cfg.n_kv_head not in (None, cfg.n_head), "head_transform": cfg.head_transform,
           "inner norms": SCHEMES.get(cfg.scheme).inner_norms, "norm_affine": cfg.norm_affine, "dropout": cfg.dropout > 0,
           "qkv_bias apart from bias": cfg.qkv_bias is not None and cfg.qkv_bias != cfg.bias,
           "attn_scale": cfg.attn_scale, "attn_softcap": cfg.attn_softcap, "logit_softcap": cfg.logit_softcap,
           "head_bias": cfg.head_bias, "rope_fraction": cfg.rope_fraction, "d_head apart": cfg.head_dim * cfg.n_head != cfg.d_model}
    want = {"embed_norm": False, "qk_norm": "none", "grouped k/v": False, "head_transform": False, "inner norms": False,
            "norm_affine": True, "qkv_bias apart from bias": False, "attn_scale": None, "attn_softcap": None,
            "logit_softcap": None, "head_bias": False, "rope_fraction": 1.0, "d_head apart": False, **want}
    unchecked = {k for k, v in want.items() if v is ANY}
    wrong = [f"{k} = {got[k]!r} (it needs {v!r})" for k, v in want.items() if k not in unchecked and got.get(k) != v]
    return wrong[0] if wrong else None


def _bias(state: dict[str, torch.Tensor], key: str, rows: int) -> torch.Tensor:
    return state.get(key, torch.zeros(rows))


class GPT2Layout(Layout):
    name, holds = "gpt2", "Pre-LN LayerNorm decoder, learned positions, GELU MLP"

    def refusal(self, cfg):
        return _differences(cfg, arch="decoder", scheme="pre", norm="layernorm", positions="learned", mlp="gelu",
                            final_norm=True, dropout=False)

    def config(self, cfg, tied, **special):
        import transformers

        return transformers.GPT2Config(
            vocab_size=cfg.vocab_size, n_positions=cfg.block_size, n_embd=cfg.d_model, n_layer=cfg.n_layer,
            n_head=cfg.n_head, n_inner=cfg.resolved_d_ff(), layer_norm_epsilon=cfg.norm_eps,
            activation_function="gelu_new" if cfg.gelu_approximate == "tanh" else "gelu", tie_word_embeddings=tied,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, architectures=["GPT2LMHeadModel"], **special)

    def tensors(self, cfg, state):
        d, out = cfg.d_model, {"transformer.wte.weight": state["wte.weight"], "transformer.wpe.weight": state["wpe.weight"]}
        norms = {"ln_1": "attn.in_norm", "ln_2": "mlp.in_norm"}
        linears = {"attn.c_attn": "attn.sublayer.qkv", "attn.c_proj": "attn.sublayer.proj",
                   "mlp.c_fc": "mlp.sublayer.fc", "mlp.c_proj": "mlp.sublayer.proj"}
        for i in range(cfg.n_layer):
            h, b = f"transformer.h.{i}.", f"blocks.{i}."
            for theirs, ours in norms.items():
                out[f"{h}{theirs}.weight"] = state[f"{b}{ours}.weight"]
                out[f"{h}{theirs}.bias"] = _bias(state, f"{b}{ours}.bias", d)
            for theirs, ours in linears.items():
                w = state[f"{b}{ours}.weight"]
                out[f"{h}{theirs}.weight"] = w.t()  # Conv1D keeps (in, out)
                out[f"{h}{theirs}.bias"] = _bias(state, f"{b}{ours}.bias", w.shape[0])
        out["transformer.ln_f.weight"] = state["final_norm.weight"]
        out["transformer.ln_f.bias"] = _bias(state, "final_norm.bias", d)
        return out


class LlamaLayout(Layout):
    name, holds = "llama", "Pre-LN RMSNorm decoder, rotary positions, SwiGLU MLP, no biases (Qwen3: with QK-norm per head)"
    model_type: ClassVar[str] = "llama"
    qk_norm: ClassVar[str] = "none"

    def refusal(self, cfg):
        wrong = _differences(cfg, arch="decoder", scheme="pre", norm="rmsnorm", positions="rope", mlp="swiglu",
                             final_norm=True, dropout=False, qk_norm=self.qk_norm, **{"grouped k/v": ANY, "d_head apart": ANY})
        if wrong is None and (cfg.bias or cfg.qkv_bias or cfg.resolved_norm_bias()):
            return "bias = true (the Llama layout has no biases)"
        return wrong

    def config(self, cfg, tied, **special):
        import transformers

        make = transformers.Qwen3Config if self.model_type == "qwen3" else transformers.LlamaConfig
        return make(
            vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.resolved_d_ff(),
            num_hidden_layers=cfg.n_layer, num_attention_heads=cfg.n_head,
            num_key_value_heads=cfg.n_kv_head or cfg.n_head, head_dim=cfg.head_dim, hidden_act="silu",
            max_position_embeddings=cfg.block_size, rms_norm_eps=cfg.norm_eps, tie_word_embeddings=tied,
            rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta}, rope_theta=cfg.rope_theta,
            attention_bias=False,
            architectures=["Qwen3ForCausalLM" if self.model_type == "qwen3" else "LlamaForCausalLM"], **special)

    def tensors(self, cfg, state):
        out = {"model.embed_tokens.weight": state["wte.weight"], "model.norm.weight": state["final_norm.weight"]}
        q_rows, kv_rows = cfg.n_head * cfg.head_dim, (cfg.n_kv_head or cfg.n_head) * cfg.head_dim
        for i in range(cfg.n_layer):
            h, b = f"model.layers.{i}.", f"blocks.{i}."
            out[f"{h}input_layernorm.weight"] = state[f"{b}attn.in_norm.weight"]
            out[f"{h}post_attention_layernorm.weight"] = state[f"{b}mlp.in_norm.weight"]
            q, k, v = state[f"{b}attn.sublayer.qkv.weight"].split((q_rows, kv_rows, kv_rows))
            out.update({f"{h}self_attn.q_proj.weight": q, f"{h}self_attn.k_proj.weight": k,
                        f"{h}self_attn.v_proj.weight": v, f"{h}self_attn.o_proj.weight": state[f"{b}attn.sublayer.proj.weight"]})
            if cfg.qk_norm == "per_head":
                out[f"{h}self_attn.q_norm.weight"] = state[f"{b}attn.sublayer.q_norm.weight"]
                out[f"{h}self_attn.k_norm.weight"] = state[f"{b}attn.sublayer.k_norm.weight"]
            gate, up = state[f"{b}mlp.sublayer.fc.weight"].chunk(2)
            out.update({f"{h}mlp.gate_proj.weight": gate, f"{h}mlp.up_proj.weight": up,
                        f"{h}mlp.down_proj.weight": state[f"{b}mlp.sublayer.proj.weight"]})
        return out


class Qwen3Layout(LlamaLayout):
    name, holds, model_type, qk_norm = "qwen3", "the Llama layout with QK-norm per head", "qwen3", "per_head"


class Gemma2Layout(Layout):
    name, holds = "gemma2", "Sandwich-LN RMSNorm decoder, rotary positions, GeGLU MLP, no biases"
    embed_scale: ClassVar[str] = "sqrt(d)"
    norms = {"attn.in_norm": "input_layernorm", "attn.out_norm": "post_attention_layernorm",
             "mlp.in_norm": "pre_feedforward_layernorm", "mlp.out_norm": "post_feedforward_layernorm"}

    def refusal(self, cfg):
        wrong = _differences(cfg, arch="decoder", scheme="sandwich", norm="rmsnorm", positions="rope", mlp="geglu",
                             final_norm=True, dropout=False, attn_scale=ANY, attn_softcap=ANY, logit_softcap=ANY,
                             **{"grouped k/v": ANY, "d_head apart": ANY})
        if wrong is None and (cfg.bias or cfg.qkv_bias or cfg.resolved_norm_bias()):
            return "bias = true (the Gemma-2 layout has no biases)"
        scalar = self._scalar(cfg)
        if wrong is None and abs(scalar - round(scalar)) > 1e-6 * scalar:
            return f"attn_scale = {cfg.attn_scale} (Gemma-2 scales by query_pre_attn_scalar^-½, an integer's)"
        return wrong

    @staticmethod
    def _scalar(cfg: ModelConfig) -> float:
        return (cfg.attn_scale or cfg.head_dim ** -0.5) ** -2

    def config(self, cfg, tied, **special):
        import transformers

        return transformers.Gemma2Config(
            vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.resolved_d_ff(),
            num_hidden_layers=cfg.n_layer, num_attention_heads=cfg.n_head,
            num_key_value_heads=cfg.n_kv_head or cfg.n_head, head_dim=cfg.head_dim,
            hidden_activation="gelu_pytorch_tanh" if cfg.gelu_approximate == "tanh" else "gelu",
            max_position_embeddings=cfg.block_size, sliding_window=cfg.block_size, rms_norm_eps=cfg.norm_eps,
            query_pre_attn_scalar=round(self._scalar(cfg)),
            attn_logit_softcapping=cfg.attn_softcap, final_logit_softcapping=cfg.logit_softcap,
            tie_word_embeddings=tied, rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta},
            rope_theta=cfg.rope_theta,
            architectures=["Gemma2ForCausalLM"], **special)

    def tensors(self, cfg, state):
        out = {"model.embed_tokens.weight": state["wte.weight"], "model.norm.weight": state["final_norm.weight"] - 1.0}
        q_rows, kv_rows = cfg.n_head * cfg.head_dim, (cfg.n_kv_head or cfg.n_head) * cfg.head_dim
        for i in range(cfg.n_layer):
            h, b = f"model.layers.{i}.", f"blocks.{i}."
            out.update({f"{h}{theirs}.weight": state[f"{b}{ours}.weight"] - 1.0 for ours, theirs in self.norms.items()})
            q, k, v = state[f"{b}attn.sublayer.qkv.weight"].split((q_rows, kv_rows, kv_rows))
            out.update({f"{h}self_attn.q_proj.weight": q, f"{h}self_attn.k_proj.weight": k,
                        f"{h}self_attn.v_proj.weight": v, f"{h}self_attn.o_proj.weight": state[f"{b}attn.sublayer.proj.weight"]})
            gate, up = state[f"{b}mlp.sublayer.fc.weight"].chunk(2)
            out.update({f"{h}mlp.gate_proj.weight": gate, f"{h}mlp.up_proj.weight": up,
                        f"{h}mlp.down_proj.weight": state[f"{b}mlp.sublayer.proj.weight"]})
        return out


class BertLayout(Layout):
    name, holds = "bert", "Post-LN LayerNorm encoder with an embedding norm, learned positions, GELU MLP"

    def refusal(self, cfg):
        return _differences(cfg, arch="encoder", scheme="post", norm="layernorm", positions="learned", mlp="gelu",
                            embed_norm=True, final_norm=False, dropout=False, head_transform=ANY, head_bias=ANY)

    def config(self, cfg, tied, **special):
        import transformers

        return transformers.BertConfig(
            vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, num_hidden_layers=cfg.n_layer,
            num_attention_heads=cfg.n_head, intermediate_size=cfg.resolved_d_ff(),
            max_position_embeddings=cfg.block_size, layer_norm_eps=cfg.norm_eps, type_vocab_size=1,
            hidden_act="gelu_new" if cfg.gelu_approximate == "tanh" else "gelu", tie_word_embeddings=tied,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
            architectures=["BertForMaskedLM" if cfg.head_transform else "BertModel"], **special)

    def tensors(self, cfg, state):
        d, base = cfg.d_model, "bert." if cfg.head_transform else ""
        out = {f"{base}embeddings.word_embeddings.weight": state["wte.weight"],
               f"{base}embeddings.position_embeddings.weight": state["wpe.weight"],
               f"{base}embeddings.token_type_embeddings.weight": torch.zeros(1, d),  # one segment, folded in wpe
               f"{base}embeddings.LayerNorm.weight": state["embed_norm.weight"],
               f"{base}embeddings.LayerNorm.bias": _bias(state, "embed_norm.bias", d)}
        parts = {"attention.output.dense": "attn.sublayer.proj", "attention.output.LayerNorm": "attn.post_norm",
                 "intermediate.dense": "mlp.sublayer.fc", "output.dense": "mlp.sublayer.proj",
                 "output.LayerNorm": "mlp.post_norm"}
        for i in range(cfg.n_layer):
            h, b = f"{base}encoder.layer.{i}.", f"blocks.{i}."
            qkv_w = state[f"{b}attn.sublayer.qkv.weight"].split(d)
            qkv_b = _bias(state, f"{b}attn.sublayer.qkv.bias", 3 * d).split(d)
            for name, w, bias in zip(("query", "key", "value"), qkv_w, qkv_b):
                out[f"{h}attention.self.{name}.weight"], out[f"{h}attention.self.{name}.bias"] = w, bias
            for theirs, ours in parts.items():
                w = state[f"{b}{ours}.weight"]
                out[f"{h}{theirs}.weight"], out[f"{h}{theirs}.bias"] = w, _bias(state, f"{b}{ours}.bias", w.shape[0])
        if cfg.head_transform:
            t = "cls.predictions.transform."
            out.update({f"{t}dense.weight": state["head_transform.dense.weight"],
                        f"{t}dense.bias": _bias(state, "head_transform.dense.bias", d),
                        f"{t}LayerNorm.weight": state["head_transform.norm.weight"],
                        f"{t}LayerNorm.bias": _bias(state, "head_transform.norm.bias", d),
                        "cls.predictions.bias": _bias(state, "lm_head.bias", cfg.vocab_size)})
        return out


LAYOUTS: dict[str, Layout] = {layout.name: layout for layout in (GPT2Layout(), LlamaLayout(), Qwen3Layout(),
                                                                   Gemma2Layout(), BertLayout())}


def layout_for(cfg: ModelConfig) -> Layout:
    """The Hugging Face layout that holds this model, or a one-line refusal naming the layouts there are."""
    reasons = {name: layout.refusal(cfg) for name, layout in LAYOUTS.items()}
    for name, reason in reasons.items():
        if reason is None:
            return LAYOUTS[name]
    closest = min(reasons, key=lambda n: 0 if cfg.arch == "encoder" and n == "bert" else 1)
    raise ValueError(f"scheme {cfg.scheme!r} ({cfg.arch}, {cfg.norm}) has no Hugging Face layout "
                     f"(nearest, {closest}: {reasons[closest]}); exportable: "
                     + "; ".join(f"{n} ({layout.holds})" for n, layout in LAYOUTS.items()))


def hf_state(model: nn.Module, cfg: ModelConfig, layout: Layout) -> tuple[dict[str, torch.Tensor], bool]:
    """The model's tensors in fp32, and whether its head stays tied: where the model scales its token
    embedding by another factor than the layout does, the embedding is stored rescaled (the layout's factor
    then gives the model's), and a tied head is stored apart with the embedding as it was."""
    state = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    tied = cfg.tie_weights
    theirs = cfg.d_model ** 0.5 if layout.embed_scale == "sqrt(d)" else 1.0
    scale = float(getattr(model, "embed_scale", 1.0)) / theirs
    if scale != 1.0:
        if tied:
            state["lm_head.weight"], tied = state["wte.weight"].clone(), False
        state["wte.weight"] = state["wte.weight"] * scale
    return state, tied


def export_hf(model: nn.Module, cfg: ModelConfig, out: str | Path, tokenizer_from: Path | None = None,
              char_vocab: list[str] | None = None, mask_token: str | None = None) -> Path:
    """Write `model` (of `cfg`) to the new directory `out` in its Hugging Face layout (see the module doc)."""
    layout = layout_for(cfg)
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"{str(out)!r} exists and is not empty: export writes only into a new directory")
    from safetensors.torch import save_file

    state, tied = hf_state(model, cfg, layout)
    tensors = {k: v.contiguous() for k, v in layout.tensors(cfg, state).items()}
    if not tied and cfg.arch == "decoder":
        tensors["lm_head.weight"] = state["lm_head.weight"].contiguous()
    elif not tied:
        raise ValueError("an encoder whose head is not tied to its embedding has no place in the BERT layout")
    if not out.parent.is_dir():
        raise ValueError(f"{str(out.parent)!r} does not exist: export makes the directory {out.name!r}, not its parents")
    tmp = Path(tempfile.mkdtemp(prefix=".normlab-export-", dir=out.parent))
    try:
        _tokenizer(tmp, tokenizer_from, char_vocab, mask_token)
        # the tokenizer's special tokens, not the config class's defaults: those name characters here
        layout.config(cfg, tied, **special_token_ids(tmp)).save_pretrained(tmp)
        save_file(tensors, tmp / "model.safetensors", metadata={"format": "pt"})
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


SPECIAL_TOKENS = ("bos", "eos", "pad")


def special_token_ids(directory: Path) -> dict[str, int | None]:
    """`bos_token_id`, `eos_token_id` and `pad_token_id` as the directory's tokenizer defines them, None where it
    has no such token (normlab's character vocabulary has none). A config class's defaults (Llama's bos 1 and
    eos 2, Gemma-2's pad 0, eos 1, bos 2) would name characters of the text: generate() would stop at a space."""
    none = {f"{name}_token_id": None for name in SPECIAL_TOKENS}
    if not any((directory / f).is_file() for f in TOKENIZER_FILES):
        return none
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(directory, local_files_only=True, trust_remote_code=False)
    return {key: getattr(tok, key) for key in none}


def _tokenizer(out: Path, source: Path | None, char_vocab: list[str] | None, mask_token: str | None) -> None:
    """The tokenizer files of an imported model, copied; else normlab's characters as a word-level tokenizer
    (a masked LM's mask token, the last id, as its special token)."""
    if source is not None and any((source / f).is_file() for f in TOKENIZER_FILES):
        for name in TOKENIZER_FILES:
            if (source / name).is_file():
                shutil.copyfile(source / name, out / name)
        return
    if char_vocab is None:
        return
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {ch: i for i, ch in enumerate(char_vocab)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # every character alone
    tok.decoder = decoders.Fuse()  # characters join with nothing between them
    PreTrainedTokenizerFast(tokenizer_object=tok, mask_token=mask_token).save_pretrained(out)


__all__ = ["LAYOUTS", "HFDirError", "export_hf", "layout_for", "special_token_ids"]
