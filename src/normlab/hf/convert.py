"""A Hugging Face checkpoint as a normlab model: `from_hf(path)`.

A family is one class that knows three things of its layout: how its config.json reads as a normlab
`ModelConfig` (placement, normalizer, activation, positions, attention layout, tying, ε), which checkpoint
tensor becomes which normlab parameter (`tensors`), and which tensors it leaves out on purpose, with why.
Nothing else is read: every tensor of the checkpoint is either used or listed as ignored, or the import
fails, so a weight can never be skipped in silence. Weights are read by `normlab.hf.files` (safetensors, or
a `.bin` through torch's weights-only unpickler); no code from the directory runs, nothing is downloaded.

    GPT-2         Pre-LN, LayerNorm, learned positions, GELU (tanh), biases, tied head
    Llama         Pre-LN, RMSNorm, RoPE, SwiGLU, grouped-query attention (Mistral, Qwen2: q/k/v bias)
    Qwen3         Llama's layout with QK-norm per head and its own head width
    GPT-NeoX      the parallel placement with two LayerNorms, RoPE on a share of each head
    OLMo-2        the reordered placement (x + Norm(F(x))) with QK-norm over the full width
    Gemma-2       Sandwich-LN, RMSNorm (1 + w), GeGLU, RoPE, soft-capping, √d-scaled embeddings
    BERT          Post-LN encoder, an embedding LayerNorm, GELU, the masked-LM head where it has one
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar

import torch
from torch import nn

from normlab.hf.files import HFDirError, read_config, read_weights
from normlab.nn.config import ModelConfig
from normlab.nn.model import build_model

Fetch = Callable[[str], torch.Tensor]  # a checkpoint tensor by its name (the family's base prefix added)


class UnsupportedModel(HFDirError):
    """A checkpoint normlab cannot represent; the message names what is missing."""


@dataclass
class Imported:
    """A normlab model built from a checkpoint, and what the import did with every tensor."""

    model: nn.Module
    config: ModelConfig
    family: str
    hf_config: dict[str, Any]
    used: list[str]
    ignored: dict[str, str]  # checkpoint tensor -> why it has no normlab counterpart
    notes: list[str] = field(default_factory=list)  # settings normlab reads differently, in words

    def describe(self) -> dict[str, Any]:
        return {"family": self.family, "model_type": self.hf_config.get("model_type"), "used": len(self.used),
                "ignored": self.ignored, "notes": self.notes}


FAMILIES: dict[str, type["Family"]] = {}


def family(cls: type["Family"]) -> type["Family"]:
    for model_type in cls.model_types:
        FAMILIES[model_type] = cls
    return cls


# model types normlab knows it cannot represent yet, and what each lacks
MISSING = {
    "gemma": "Gemma's (1 + w) norm weights and √d-scaled embeddings",
    "gemma3": "Gemma-3's (1 + w) norm weights, sliding-window layers and dual RoPE bases",
    "gemma3_text": "Gemma-3's (1 + w) norm weights, sliding-window layers and dual RoPE bases",
    "gptj": "a parallel-residual block (attention and MLP read the same input)",
    "falcon": "a parallel-residual block",
    "phi": "a parallel-residual block and partial rotary embeddings",
    "cohere": "a parallel-residual block",
    "t5": "an encoder-decoder with relative position buckets",
    "bart": "an encoder-decoder with offset learned positions",
    "opt": "OPT's offset learned positions",
    "bloom": "ALiBi position biases",
    "roberta": "RoBERTa's padding-offset positions",
}


class Family:
    """One Hugging Face layout. Subclasses say how its config reads and where its tensors go."""

    name: ClassVar[str] = ""
    model_types: ClassVar[tuple[str, ...]] = ()
    embedding: ClassVar[str] = ""  # the token embedding's name under the base model: finds the base prefix
    prefixes: ClassVar[tuple[str, ...]] = ("",)
    ignore: ClassVar[dict[str, str]] = {}  # regex over names (base prefix removed) -> why

    def __init__(self, hf: dict[str, Any], path: Path):
        self.hf, self.path = hf, path
        self.notes: list[str] = []

    def get(self, key: str, default: Any = None) -> Any:
        return self.hf.get(key, default)

    def require(self, condition: bool, what: str) -> None:
        if not condition:
            raise UnsupportedModel(self.path / "config.json", f"a {self.name} model with {what}: normlab cannot "
                                   "represent it")

    def model_config(self, heads_in_checkpoint: bool) -> ModelConfig:
        raise NotImplementedError

    def tensors(self, cfg: ModelConfig, fetch: Fetch, has: Callable[[str], bool]) -> dict[str, torch.Tensor]:
        """normlab state-dict entries built from the checkpoint's tensors (fetch marks a tensor used)."""
        raise NotImplementedError


def _gelu_form(fam: Family, act: str) -> str:
    forms = {"gelu": "none", "gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu_fast": "tanh"}
    fam.require(act in forms, f"activation {act!r} (normlab's GELU MLP: {', '.join(forms)})")
    return forms[act]


def _rope_theta(fam: Family) -> float:
    """RoPE's base from either config spelling (transformers ≥ 5: rope_parameters), refusing scaled RoPE."""
    params = fam.get("rope_parameters") or {}
    scaling = fam.get("rope_scaling") or {}
    kind = params.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
    fam.require(kind == "default", f"rope_type {kind!r} (normlab's rotary embedding is the unscaled one)")
    return float(params.get("rope_theta") or fam.get("rope_theta") or 10000.0)


def _context(fam: Family) -> int:
    """The longest sequence: max_position_embeddings, or a sliding window where one is on. Sequences no longer
    than the window attend exactly as the model does, so the window is where normlab stops."""
    context = fam.get("max_position_embeddings") or 2048
    window = fam.get("sliding_window")
    if window and fam.get("use_sliding_window", True) and window < context:
        fam.notes.append(f"block_size = the sliding window ({window}) of max_position_embeddings {context}: "
                         "within it attention is exact")
        return window
    return context


def _llama_projections(cfg: ModelConfig, fetch: Fetch, h: str, b: str) -> dict[str, torch.Tensor]:
    """One block's attention and SwiGLU/GeGLU projections in the Llama naming (HF layer `h`, normlab block `b`),
    with q/k/v bias and QK-norm where the config has them: shared by Llama, its kin and Gemma 2."""
    qkv = [f"{h}self_attn.{p}_proj" for p in "qkv"]
    out = {f"{b}attn.sublayer.qkv.weight": torch.cat([fetch(f"{n}.weight") for n in qkv]),
           f"{b}attn.sublayer.proj.weight": fetch(f"{h}self_attn.o_proj.weight"),
           f"{b}mlp.sublayer.fc.weight": torch.cat([fetch(f"{h}mlp.gate_proj.weight"), fetch(f"{h}mlp.up_proj.weight")]),
           f"{b}mlp.sublayer.proj.weight": fetch(f"{h}mlp.down_proj.weight")}
    if cfg.qkv_bias:
        out[f"{b}attn.sublayer.qkv.bias"] = torch.cat([fetch(f"{n}.bias") for n in qkv])
    if cfg.qk_norm != "none":
        out[f"{b}attn.sublayer.q_norm.weight"] = fetch(f"{h}self_attn.q_norm.weight")
        out[f"{b}attn.sublayer.k_norm.weight"] = fetch(f"{h}self_attn.k_norm.weight")
    return out


def _kv_heads(fam: Family, n_head: int) -> int | None:
    """Grouped key/value heads, or None where there are as many as query heads (one model, one run id)."""
    n_kv = fam.get("num_key_value_heads") or n_head
    return None if n_kv == n_head else n_kv


@family
class GPT2(Family):
    """GPT-2 (Radford et al. 2019): Pre-LN with LayerNorm, learned positions, Conv1D weights stored (in, out)."""

    name, model_types, embedding = "GPT-2", ("gpt2",), "wte.weight"
    prefixes = ("transformer.", "")
    ignore = {r"h\.\d+\.attn\.(masked_)?bias": "the causal-mask buffer of old GPT-2 checkpoints, not a weight"}

    def model_config(self, heads_in_checkpoint):
        self.require(not self.get("scale_attn_by_inverse_layer_idx"), "scale_attn_by_inverse_layer_idx")
        self.require(self.get("scale_attn_weights", True), "scale_attn_weights = false")
        d = self.get("n_embd")
        return ModelConfig(
            arch="decoder", scheme="pre", norm="layernorm", vocab_size=self.get("vocab_size"),
            block_size=self.get("n_positions"), n_layer=self.get("n_layer"), n_head=self.get("n_head"), d_model=d,
            d_ff=self.get("n_inner") or 4 * d, norm_eps=self.get("layer_norm_epsilon", 1e-5), bias=True,
            mlp="gelu", gelu_approximate=_gelu_form(self, self.get("activation_function", "gelu_new")),
            tie_weights=self.get("tie_word_embeddings", True), final_norm=True)

    def tensors(self, cfg, fetch, has):
        out = {"wte.weight": fetch("wte.weight"), "wpe.weight": fetch("wpe.weight"),
               "final_norm.weight": fetch("ln_f.weight"), "final_norm.bias": fetch("ln_f.bias")}
        for i in range(cfg.n_layer):
            h, b = f"h.{i}.", f"blocks.{i}."
            for ours, theirs in (("attn.in_norm", "ln_1"), ("mlp.in_norm", "ln_2")):
                out.update({f"{b}{ours}.{s}": fetch(f"{h}{theirs}.{s}") for s in ("weight", "bias")})
            for ours, theirs in (("attn.sublayer.qkv", "attn.c_attn"), ("attn.sublayer.proj", "attn.c_proj"),
                                 ("mlp.sublayer.fc", "mlp.c_fc"), ("mlp.sublayer.proj", "mlp.c_proj")):
                out[f"{b}{ours}.weight"] = fetch(f"{h}{theirs}.weight").t()  # Conv1D keeps (in, out)
                out[f"{b}{ours}.bias"] = fetch(f"{h}{theirs}.bias")
        return out


@family
class Llama(Family):
    """Llama (Touvron et al. 2023) and the families that share its layout: Pre-LN with RMSNorm, RoPE,
    SwiGLU, grouped-query attention; Mistral (a sliding window), Qwen2 (q/k/v bias), Qwen3 (QK-norm)."""

    name, model_types, embedding = "Llama", ("llama", "mistral"), "embed_tokens.weight"
    prefixes = ("model.", "")
    ignore = {r"layers\.\d+\.self_attn\.rotary_emb\.inv_freq": "RoPE's frequencies, recomputed from rope_theta"}
    qkv_bias: ClassVar[bool] = False
    qk_norm: ClassVar[str] = "none"
    scheme: ClassVar[str] = "pre"
    norm_slots: ClassVar[dict[str, str]] = {"attn.in_norm": "input_layernorm", "mlp.in_norm": "post_attention_layernorm"}

    def model_config(self, heads_in_checkpoint):
        self.require(self.get("hidden_act", "silu") == "silu", f"hidden_act {self.get('hidden_act')!r} (SwiGLU is SiLU-gated)")
        self.require(not self.get("attention_bias") and not self.get("mlp_bias"),
                     "attention_bias or mlp_bias (normlab's Llama layout has bias nowhere but q/k/v)")
        d, n_head = self.get("hidden_size"), self.get("num_attention_heads")
        head_dim = self.get("head_dim") or d // n_head
        return ModelConfig(
            arch="decoder", scheme=self.scheme, norm="rmsnorm", norm_bias=False, vocab_size=self.get("vocab_size"),
            block_size=_context(self), n_layer=self.get("num_hidden_layers"), n_head=n_head, d_model=d,
            n_kv_head=_kv_heads(self, n_head), d_head=None if head_dim * n_head == d else head_dim,
            d_ff=self.get("intermediate_size"), norm_eps=self.get("rms_norm_eps", 1e-6), bias=False,
            qkv_bias=self.qkv_bias or None, qk_norm=self.qk_norm, mlp="swiglu", positions="rope",
            rope_theta=_rope_theta(self), tie_weights=bool(self.get("tie_word_embeddings", False)), final_norm=True)

    def tensors(self, cfg, fetch, has):
        out = {"wte.weight": fetch("embed_tokens.weight"), "final_norm.weight": fetch("norm.weight")}
        for i in range(cfg.n_layer):
            h, b = f"layers.{i}.", f"blocks.{i}."
            out.update({f"{b}{ours}.weight": fetch(f"{h}{theirs}.weight") for ours, theirs in self.norm_slots.items()})
            out.update(_llama_projections(cfg, fetch, h, b))
        return out


@family
class Qwen2(Llama):
    """Qwen2 (arXiv 2407.10671): Llama's layout with a bias on q, k and v."""

    name, model_types = "Qwen2", ("qwen2",)
    qkv_bias = True  # always: its config has no switch for it


@family
class Qwen3(Llama):
    """Qwen3 (arXiv 2505.09388): Llama's layout with QK-norm (RMSNorm of each head's q and k before RoPE)."""

    name, model_types = "Qwen3", ("qwen3",)
    qk_norm = "per_head"


@family
class GPTNeoX(Family):
    """GPT-NeoX (Black et al. 2022, arXiv 2204.06745 §2.1) and Pythia: a parallel block with two LayerNorms,
    x ← x + Attn(LN₁(x)) + MLP(LN₂(x)) (sequential Pre-LN with use_parallel_residual = false), RoPE on a
    share of each head (rotary_pct), biases everywhere, an untied head. Its fused q/k/v rows are grouped by
    head (q, k, v of head 0, then of head 1, ...): they are regrouped as normlab's q of every head, then k, v."""

    name, model_types, embedding = "GPT-NeoX", ("gpt_neox",), "embed_in.weight"
    prefixes = ("gpt_neox.", "")
    ignore = {r"layers\.\d+\.attention\.(bias|masked_bias|rotary_emb\.inv_freq)": "a buffer (mask, RoPE's "
              "frequencies), not a weight"}

    def model_config(self, heads_in_checkpoint):
        params = self.get("rope_parameters") or {}
        d = self.get("hidden_size")
        parallel = self.get("use_parallel_residual", True)
        theta = _rope_theta(self) if params or self.get("rope_scaling") else self.get("rotary_emb_base") or 10000.0
        return ModelConfig(
            arch="decoder", scheme="parallel" if parallel else "pre",
            scheme_options={"shared_norm": 0.0} if parallel else {}, norm="layernorm", vocab_size=self.get("vocab_size"),
            block_size=self.get("max_position_embeddings"), n_layer=self.get("num_hidden_layers"),
            n_head=self.get("num_attention_heads"), d_model=d, d_ff=self.get("intermediate_size"),
            norm_eps=self.get("layer_norm_eps", 1e-5), bias=bool(self.get("attention_bias", True)), mlp="gelu",
            gelu_approximate=_gelu_form(self, self.get("hidden_act", "gelu")), positions="rope",
            rope_theta=float(theta),
            rope_fraction=float(params.get("partial_rotary_factor") or self.get("rotary_pct") or 0.25),
            tie_weights=bool(self.get("tie_word_embeddings", False)), final_norm=True)

    def tensors(self, cfg, fetch, has):
        out = {"wte.weight": fetch("embed_in.weight"), "final_norm.weight": fetch("final_layer_norm.weight"),
               "final_norm.bias": fetch("final_layer_norm.bias")}
        parts = {"attn.in_norm": "input_layernorm", "mlp.in_norm": "post_attention_layernorm",
                 "attn.sublayer.proj": "attention.dense", "mlp.sublayer.fc": "mlp.dense_h_to_4h",
                 "mlp.sublayer.proj": "mlp.dense_4h_to_h"}
        hd = cfg.head_dim
        for i in range(cfg.n_layer):
            h, b = f"layers.{i}.", f"blocks.{i}."
            out.update({f"{b}{ours}.{s}": fetch(f"{h}{theirs}.{s}") for ours, theirs in parts.items()
                        for s in ("weight", "bias") if s == "weight" or cfg.bias or "norm" in ours})
            for s in ("weight", "bias") if cfg.bias else ("weight",):
                t = fetch(f"{h}attention.query_key_value.{s}")  # (heads · 3 · hd, ...) grouped by head
                grouped = t.reshape(cfg.n_head, 3, hd, *t.shape[1:])
                out[f"{b}attn.sublayer.qkv.{s}"] = grouped.transpose(0, 1).reshape(t.shape)
        return out


_HF_HEAD_NAMES = ("lm_head.weight", "cls.predictions.decoder.weight", "embed_out.weight")


@family
class Olmo2(Llama):
    """OLMo 2 (arXiv 2501.00656): Llama's layout with the norms moved to each sub-layer's output (the
    `reordered` placement, x ← x + Norm(F(x))) and QK-norm over the full width of q and k."""

    name, model_types = "OLMo-2", ("olmo2",)
    scheme, qk_norm = "reordered", "full_width"
    norm_slots = {"attn.out_norm": "post_attention_layernorm", "mlp.out_norm": "post_feedforward_layernorm"}


@family
class Gemma2(Family):
    """Gemma 2 (arXiv 2408.00118): Sandwich-LN with RMSNorm (a norm before and after each sub-layer), GeGLU,
    RoPE, grouped-query attention, √d-scaled embeddings, attention and final-logit soft-capping.

    Its norms scale by (1 + w): normlab's RMSNorm scales by its weight, so the weight is read as 1 + w, the
    same fp32 value the model computes. Its sliding-window layers attend exactly as the others up to the
    window, which caps the context as for Mistral.
    """

    name, model_types, embedding = "Gemma-2", ("gemma2",), "embed_tokens.weight"
    prefixes = ("model.", "")
    norms = {"attn.in_norm": "input_layernorm", "attn.out_norm": "post_attention_layernorm",
             "mlp.in_norm": "pre_feedforward_layernorm", "mlp.out_norm": "post_feedforward_layernorm"}

    def model_config(self, heads_in_checkpoint):
        self.require(not self.get("attention_bias"), "attention_bias")
        act = self.get("hidden_activation") or self.get("hidden_act") or "gelu_pytorch_tanh"
        d, n_head = self.get("hidden_size"), self.get("num_attention_heads")
        head_dim = self.get("head_dim") or d // n_head
        return ModelConfig(
            arch="decoder", scheme="sandwich", norm="rmsnorm", norm_bias=False, vocab_size=self.get("vocab_size"),
            block_size=_context(self), n_layer=self.get("num_hidden_layers"), n_head=n_head, d_model=d,
            n_kv_head=_kv_heads(self, n_head), d_head=None if head_dim * n_head == d else head_dim,
            d_ff=self.get("intermediate_size"), norm_eps=self.get("rms_norm_eps", 1e-6), bias=False, mlp="geglu",
            gelu_approximate=_gelu_form(self, act), positions="rope", rope_theta=_rope_theta(self),
            attn_scale=self.get("query_pre_attn_scalar", head_dim) ** -0.5, attn_softcap=self.get("attn_logit_softcapping"),
            logit_softcap=self.get("final_logit_softcapping"), embed_scale=d ** 0.5,
            tie_weights=bool(self.get("tie_word_embeddings", True)), final_norm=True)

    def tensors(self, cfg, fetch, has):
        out = {"wte.weight": fetch("embed_tokens.weight"), "final_norm.weight": 1.0 + fetch("norm.weight")}
        for i in range(cfg.n_layer):
            h, b = f"layers.{i}.", f"blocks.{i}."
            out.update({f"{b}{ours}.weight": 1.0 + fetch(f"{h}{theirs}.weight") for ours, theirs in self.norms.items()})
            out.update(_llama_projections(cfg, fetch, h, b))
        return out


@family
class BERT(Family):
    """BERT (Devlin et al. 2019, arXiv 1810.04805): a Post-LN encoder with an embedding LayerNorm.

    normlab reads one segment, so the segment-0 embedding is added into the position table (the sum the
    model computes is the same); the other segments' rows are left out, said so. The pooler ([CLS] → tanh
    dense, for sentence classification) has no counterpart in a masked LM and is left out too.
    """

    name, model_types, embedding = "BERT", ("bert",), "embeddings.word_embeddings.weight"
    prefixes = ("bert.", "")
    ignore = {r"pooler\.dense\.(weight|bias)": "the pooler ([CLS] classifier input): no counterpart in a masked LM",
              r"embeddings\.position_ids": "a buffer of position indices, not a weight",
              r"(cls\.)?seq_relationship\.(weight|bias)|cls\.seq_relationship\..*":
                  "the next-sentence head: normlab trains no sentence pairs"}

    def model_config(self, heads_in_checkpoint):
        kind = self.get("position_embedding_type", "absolute")
        self.require(kind == "absolute", f"position_embedding_type {kind!r}")
        return ModelConfig(
            arch="encoder", scheme="post", norm="layernorm", vocab_size=self.get("vocab_size"),
            block_size=self.get("max_position_embeddings"), n_layer=self.get("num_hidden_layers"),
            n_head=self.get("num_attention_heads"), d_model=self.get("hidden_size"),
            d_ff=self.get("intermediate_size"), norm_eps=self.get("layer_norm_eps", 1e-12), bias=True, mlp="gelu",
            gelu_approximate=_gelu_form(self, self.get("hidden_act", "gelu")), embed_norm=True, final_norm=False,
            tie_weights=self.get("tie_word_embeddings", True), head_transform=heads_in_checkpoint,
            head_bias=heads_in_checkpoint)

    def tensors(self, cfg, fetch, has):
        types = fetch("embeddings.token_type_embeddings.weight")
        if types.shape[0] > 1:
            rest = "1" if types.shape[0] == 2 else f"1–{types.shape[0] - 1}"
            self.notes.append(f"segment embedding {rest} left out: normlab reads one segment (segment 0's is "
                              "added into the position table)")
        out = {"wte.weight": fetch("embeddings.word_embeddings.weight"),
               "wpe.weight": fetch("embeddings.position_embeddings.weight") + types[0],
               "embed_norm.weight": fetch("embeddings.LayerNorm.weight"),
               "embed_norm.bias": fetch("embeddings.LayerNorm.bias")}
        parts = (("attn.sublayer.proj", "attention.output.dense"), ("attn.post_norm", "attention.output.LayerNorm"),
                 ("mlp.sublayer.fc", "intermediate.dense"), ("mlp.sublayer.proj", "output.dense"),
                 ("mlp.post_norm", "output.LayerNorm"))
        for i in range(cfg.n_layer):
            h, b = f"encoder.layer.{i}.", f"blocks.{i}."
            for s in ("weight", "bias"):
                out[f"{b}attn.sublayer.qkv.{s}"] = torch.cat([fetch(f"{h}attention.self.{p}.{s}")
                                                              for p in ("query", "key", "value")])
                out.update({f"{b}{ours}.{s}": fetch(f"{h}{theirs}.{s}") for ours, theirs in parts})
        if cfg.head_transform:
            out.update({f"head_transform.dense.{s}": fetch(f"cls.predictions.transform.dense.{s}") for s in ("weight", "bias")})
            out.update({f"head_transform.norm.{s}": fetch(f"cls.predictions.transform.LayerNorm.{s}")
                        for s in ("weight", "bias")})
            out["lm_head.bias"] = fetch("cls.predictions.bias")
            if has("cls.predictions.decoder.bias"):  # the same tensor as cls.predictions.bias, saved twice
                fetch("cls.predictions.decoder.bias")
        return out


def import_hf(path: str | Path) -> Imported:
    """Build the normlab model of a local Hugging Face directory, with its weights (see the module's doc)."""
    path = Path(path)
    hf = read_config(path)
    model_type = hf.get("model_type")
    if model_type not in FAMILIES:
        lacks = f": normlab lacks {MISSING[model_type]}" if model_type in MISSING else ""
        raise UnsupportedModel(path / "config.json", f"model_type {model_type!r} cannot be imported{lacks}; "
                               f"importable: {', '.join(sorted(FAMILIES))}")
    fam = FAMILIES[model_type](hf, path)
    weights = read_weights(path)
    base = _base_prefix(fam, weights, path)
    heads = any(k.startswith("cls.predictions.transform") for k in weights)
    try:
        cfg = fam.model_config(heads)
    except (TypeError, ValueError) as e:  # a setting missing (None) or out of range (pydantic's ValidationError)
        if isinstance(e, HFDirError):
            raise
        raise HFDirError(path / "config.json", f"a setting a {fam.name} model needs is missing or invalid: "
                                               f"{_first_line(e)}") from None
    used: list[str] = []

    def fetch(name: str) -> torch.Tensor:
        key = base + name if base + name in weights else name
        if key not in weights:
            raise HFDirError(path, f"the checkpoint has no tensor {base + name!r}, which a {fam.name} model of "
                                   "this config.json needs")
        used.append(key)
        return weights[key].float()

    state = fam.tensors(cfg, fetch, lambda name: base + name in weights or name in weights)
    _head(cfg, weights, base, state, fetch, path)
    ignored = _ignored(fam, weights, base, used, path)
    model = _load(cfg, state, path)
    return Imported(model, cfg, fam.name, hf, used, ignored, fam.notes)


def _first_line(e: Exception) -> str:
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return "; ".join(lines[:3]) if lines else type(e).__name__


def from_hf(path: str | Path) -> nn.Module:
    """The normlab model of a local Hugging Face directory (`import_hf` for what was used and left out)."""
    return import_hf(path).model


def _base_prefix(fam: Family, weights: dict[str, torch.Tensor], path: Path) -> str:
    for prefix in fam.prefixes:
        if prefix + fam.embedding in weights:
            return prefix
    raise HFDirError(path, f"no {fam.embedding!r} in the checkpoint (under the prefixes "
                           f"{', '.join(repr(p) for p in fam.prefixes)}): not a {fam.name} checkpoint")


def _head(cfg: ModelConfig, weights, base: str, state: dict, fetch: Fetch, path: Path) -> None:
    """The output projection: tied to the embedding (a saved copy must equal it), or the checkpoint's own."""
    names = [n for n in _HF_HEAD_NAMES if n in weights or base + n in weights]
    if cfg.tie_weights:
        for n in names:  # a tied head saved anyway: it must be the embedding
            if not torch.equal(fetch(n), state["wte.weight"]):
                raise HFDirError(path, f"{n!r} differs from the token embedding, but config.json ties them")
        return
    if not names:
        raise HFDirError(path, "config.json unties the output head (tie_word_embeddings = false), but the "
                               "checkpoint has no lm_head.weight")
    state["lm_head.weight"] = fetch(names[0])


def _ignored(fam: Family, weights, base: str, used: list[str], path: Path) -> dict[str, str]:
    """Every checkpoint tensor not used must be one the family leaves out on purpose."""
    ignored, unknown = {}, []
    for key in sorted(set(weights) - set(used)):
        name = key[len(base):] if key.startswith(base) else key
        why = next((w for pattern, w in fam.ignore.items() if re.fullmatch(pattern, name)), None)
        if why is None:
            unknown.append(key)
        else:
            ignored[key] = why
    if unknown:
        more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
        raise UnsupportedModel(path, f"{len(unknown)} tensor(s) of the checkpoint have no place in a normlab "
                                     f"{fam.name} model: {', '.join(unknown[:3])}{more}")
    return ignored


def _load(cfg: ModelConfig, state: dict[str, torch.Tensor], path: Path) -> nn.Module:
    model = build_model(cfg)
    ours = model.state_dict()
    for key, tensor in state.items():
        if key not in ours or ours[key].shape != tensor.shape:
            want = tuple(ours[key].shape) if key in ours else "no such parameter"
            raise HFDirError(path, f"a tensor for {key} has shape {tuple(tensor.shape)}; the model of its "
                                   f"config.json needs {want}")
    missing = set(ours) - set(state) - ({"lm_head.weight"} if cfg.tie_weights else set())
    if missing:
        raise HFDirError(path, f"nothing in the checkpoint for {', '.join(sorted(missing)[:3])}")
    model.load_state_dict(state, strict=False)
    return model.eval()
