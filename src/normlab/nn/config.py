"""The model's spec sheet: one typed, validated config builds a whole model."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from normlab.nn.norms import NORMS
from normlab.nn.schemes import ARCHITECTURES, SCHEMES, Scheme, Stack, build_scheme
from normlab.registry import check_options


class ModelConfig(BaseModel):
    """A Transformer: decoder-only (GPT-style, the default), encoder-only (BERT-style) or encoder–decoder."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_assignment=True)

    vocab_size: int | None = Field(default=None, ge=1)
    """Tokens in the vocabulary; left unset, the run takes it from the tokenizer."""
    block_size: int = Field(default=256, ge=1)
    """Context length T (learned absolute positions up to this)."""
    arch: Literal["decoder", "encoder", "encoder-decoder"] = "decoder"
    """decoder: causal LM; encoder: bidirectional, masked-LM objective (BERT); encoder-decoder: an encoder and a
    decoder with cross-attention, trained to reconstruct span-masked text (BART-style denoising)."""
    n_layer: int = Field(default=6, ge=1)
    """Number of Transformer blocks L (an encoder–decoder's encoder)."""
    n_dec_layer: int | None = Field(default=None, ge=1)
    """Decoder blocks of an encoder–decoder; unset: n_layer."""
    n_head: int = Field(default=6, ge=1)
    """Attention heads per block; d_model must be divisible by it."""
    d_model: int = Field(default=384, ge=1)
    """Width of the residual stream."""
    n_kv_head: int | None = Field(default=None, ge=1)
    """Key/value heads: fewer than n_head is grouped-query attention (Ainslie et al. 2023, arXiv 2305.13245;
    Llama 2/3, Mistral, Qwen); unset: n_head."""
    d_head: int | None = Field(default=None, ge=1)
    """Width of one attention head; unset: d_model / n_head (Qwen3 sets it apart from the stream's width)."""
    positions: Literal["learned", "rope"] = "learned"
    """learned: absolute position embeddings up to block_size (GPT-2, BERT); rope: rotary embeddings of q and
    k (Su et al. 2021, arXiv 2104.09864; LLaMA), no position embedding."""
    rope_theta: float = Field(default=10000.0, gt=0)
    """RoPE's base θ: pair i turns at θ^(-2i/d_head) radians per position."""
    rope_fraction: float = Field(default=1.0, gt=0, le=1)
    """The share of each head's channels RoPE turns; the rest pass unrotated (GPT-NeoX: 0.25)."""
    attn_scale: float | None = Field(default=None, gt=0)
    """The attention scores' factor; unset: 1/√d_head (Gemma 2 sets query_pre_attn_scalar^-½)."""
    attn_softcap: float | None = Field(default=None, gt=0)
    """Attention-logit soft-capping c: scores → c·tanh(scores/c) before the softmax (Gemma 2, arXiv 2408.00118)."""
    logit_softcap: float | None = Field(default=None, gt=0)
    """Final-logit soft-capping c: logits → c·tanh(logits/c) (Gemma 2)."""
    embed_scale: float | None = Field(default=None, gt=0)
    """The token embedding's factor in the forward pass; unset: the init recipe's (√d under xiong, else 1).
    Gemma multiplies by √d whatever the init."""
    learned_embed_scale: bool = False
    """The token embedding's factor is one learnable scalar, init √d_model, in place of the fixed one: DyT's and
    Derf's language-model code (jiachenzhu/DyT other_tasks/LLaMA/fms_fsdp/models/llama.py and
    zlab-princeton/Derf "language model/model_derf.patch", both `shared_scale`); DyT's paper says LLaMA training
    "struggles to progress" without it. Refused with `embed_scale` set, which fixes the factor."""
    embed_scale_positions: bool = False
    """The embedding factor multiplies token and position embeddings together, (wte + wpe)·s, as Derf's patch
    does (zlab-princeton/Derf "language model/model_derf.patch" L127); off: the token embedding alone (DyT's code,
    Gemma). Needs learned positions."""
    qk_norm: Literal["none", "per_head", "full_width"] = "none"
    """QK-norm (Dehghani et al. 2023, arXiv 2302.05442) with the model's normalizer: q and k normalized per
    head (Qwen3, Gemma-3) or over their full width (OLMo-2), before the rotation."""

    scheme: str = "pre"
    """Normalization placement: see `normlab schemes` (post, pre, sandwich, peri, deepnorm, mix, lns, subln)."""
    scheme_options: dict[str, float] = {}
    """Options of the chosen scheme, e.g. {mix_ratio = 0.25} for `mix`, {shared_norm = false} for `parallel`;
    unknown keys are errors. Kept as numbers, a switch's true and false as 1 and 0, as run ids have always hashed
    them; the scheme reads each as its type (`Scheme.OPTIONS`) and refuses a switch that is neither."""
    norm: str = "layernorm"
    """Normalizer, by its name in `NORMS`, e.g. rmsnorm or dyt (`normlab schemes` lists them all)."""
    norm_options: dict[str, float] = {}
    """Options of the chosen normalizer, e.g. {alpha_init = 0.5} for `dyt`."""
    norm_eps: float = Field(default=1e-5, gt=0)
    """ε added to the variance / mean square."""
    norm_affine: bool = True
    """Learnable elementwise gain (and bias, see norm_bias)."""
    norm_bias: bool | None = None
    """Learnable bias in the normalizers; unset: same as `bias` where the normalizer has one."""
    final_norm: bool | None = None
    """Norm before the output head (GPT-2's ln_f); unset: the scheme's default."""

    mlp: Literal["gelu", "swiglu", "geglu"] = "gelu"
    """Feed-forward: GELU MLP (d → 4d → d), SwiGLU (LLaMA) or GeGLU (Gemma)."""
    d_ff: int | None = Field(default=None, ge=1)
    """Hidden width of the MLP; unset: 4·d_model for gelu, 8/3·d_model (rounded up to 8) for swiglu."""
    bias: bool = False
    """Bias in every linear layer."""
    qkv_bias: bool | None = None
    """Bias in the q, k, v projections; unset: same as `bias` (Qwen2 has it there and nowhere else)."""
    gelu_approximate: Literal["none", "tanh"] = "none"
    """GELU's form: the exact erf (BERT, nanoGPT) or the tanh approximation GPT-2 was trained with."""
    embed_norm: bool | None = None
    """A norm on the embeddings before the first block; unset: the scheme's default (Peri-LN's). BERT is
    Post-LN with one."""
    head_transform: bool = False
    """BERT's masked-LM head (Devlin et al. 2019): dense → GELU → norm before the output projection."""
    head_bias: bool = False
    """A bias on the output projection (BERT's decoder bias)."""
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    """Dropout on attention weights, sub-layer outputs and embeddings."""
    tie_weights: bool = True
    """Share the token embedding with the output head."""

    init: Literal["normal", "xavier", "gpt2", "gpt2-fixed-std", "llama", "xiong"] = "normal"
    """Init of the weights. Base inits: `normal` (linears N(0, init_std)) and `xavier` (Xavier-normal linears,
    gain 1); both keep embeddings and an untied head N(0, init_std), token embeddings unscaled, and residual
    scaling per `init_residual_scaling`. Named recipes, each as its paper set it and each keeping its paper's
    regime when the width changes (`normlab.nn.init.INIT_RECIPES`, `benchmarks/init_regime.py`): `gpt2` (Radford
    et al. 2019 §2.3: every linear and embedding N(0, σ), residual outputs ÷ √(2L), σ = init_std at GPT-2's width
    768 scaled as σ·√d, so 0.069 at width 64), `gpt2-fixed-std` (the same with σ = init_std at every width: the
    constant carried as a number), `llama` (N(0, σ) everywhere, no residual scaling, σ = init_std at LLaMA-7B's
    width 4096 scaled as σ·√d: DyT's and OLMo 2's codes) and `xiong` (Xiong et al. 2020, the fairseq
    Transformer: Xavier-normal linears, no residual scaling, token and position embeddings and an untied head
    N(0, σ = d^-½), the token embedding multiplied by √d in the forward pass). A scheme may still replace the
    block projections' init (DeepNorm's β, Sub-LN's γ). run.json's "init" names what was used and what it keeps."""
    init_std: float = Field(default=0.02, gt=0)
    """σ of the normal init: linears under `normal`/`gpt2*`/`llama`, embeddings and an untied head under all but
    `xiong`. Under `gpt2` and `llama` it is the σ at the recipe's paper width, scaled as σ·√d to the model's."""
    init_residual_scaling: bool = True
    """GPT-2: scale each residual output projection's init by 1/sqrt(2·n_layer) (`normal` only; Xavier ignores
    it). Read by the base inits only: a recipe fixes it (gpt2: always on, xiong: off), and the init record
    says the flag did not apply."""

    @model_validator(mode="before")
    @classmethod
    def _scheme_requires(cls, data):
        """The settings the scheme's paper fixes (`Facts.requires`: nGPT's rope, swiglu, l2), where the config
        leaves them unset; a config that sets another value is refused in `_check`."""
        if isinstance(data, dict) and data.get("scheme", "pre") in SCHEMES:
            for key, (value, _) in SCHEMES.get(data.get("scheme", "pre")).facts.requires.items():
                data = {key: value, **data}
        return data

    @model_validator(mode="after")
    def _check(self) -> "ModelConfig":
        if self.d_head is None and self.d_model % self.n_head:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_head ({self.n_head}), or set d_head")
        if self.n_kv_head is not None and self.n_head % self.n_kv_head:
            raise ValueError(f"n_head ({self.n_head}) must be divisible by n_kv_head ({self.n_kv_head})")
        if self.positions == "rope" and int(self.head_dim * self.rope_fraction) % 2:
            raise ValueError(f"rotary positions turn pairs of channels: the rotated width ⌊{self.rope_fraction} × "
                             f"{self.head_dim}⌋ must be even")
        scheme_cls = self.scheme_type
        for part in self.stacks().values():  # a scheme's paper that defines no such model: one line, first; each
            build_scheme(self.scheme, part.depth, self.scheme_options, part)  # stack at its own depth, as built
        if self.arch == "encoder-decoder":
            self._check_encoder_decoder()
        if scheme_cls.inner_norms and self.head_dim * self.n_head != self.d_model:
            raise ValueError(f"scheme {self.scheme!r} normalizes the heads' output at d_model; d_head × n_head "
                             f"({self.head_dim} × {self.n_head}) must equal d_model ({self.d_model})")
        norm_cls = NORMS.get(self.norm)
        if self.n_dec_layer is not None and self.arch != "encoder-decoder":
            raise ValueError(f"n_dec_layer ({self.n_dec_layer}) is for arch = 'encoder-decoder'; this model is "
                             f"arch = {self.arch!r}")
        check_options("normalizer", self.norm, self.norm_options, norm_cls.OPTIONS)
        if self.final_norm is False and scheme_cls.facts.final_norm_required:
            raise ValueError(f"scheme {self.scheme!r} needs its final module (final_norm = false is refused): "
                             f"{scheme_cls.facts.final_norm_required}")
        reason = scheme_cls.norm_refusal(self.norm)
        if reason:
            raise ValueError(f"scheme {self.scheme!r} cannot be used with normalizer {self.norm!r}: {reason}")
        for key, (value, why) in scheme_cls.facts.requires.items():
            if getattr(self, key) != value:
                raise ValueError(f"scheme {self.scheme!r} needs {key} = {value!r} (got {getattr(self, key)!r}): "
                                 f"{why}; leave {key} unset and the scheme sets it")
        if self.norm_bias and not norm_cls.has_bias:
            raise ValueError(f"normalizer {self.norm!r} has no bias; set norm_bias = false")
        if self.norm_bias and not self.norm_affine:
            raise ValueError("norm_bias = true needs norm_affine = true")
        if self.embed_scale_positions and self.positions != "learned":
            raise ValueError(f"embed_scale_positions = true scales the learned position table with the tokens; "
                             f"positions = {self.positions!r} has none: set positions = 'learned' or turn it off")
        if self.learned_embed_scale and self.embed_scale is not None:
            raise ValueError(f"learned_embed_scale = true learns the token embedding's factor (init √d_model); "
                             f"embed_scale = {self.embed_scale:g} fixes it: set one of them")
        return self

    def _check_encoder_decoder(self) -> None:
        """The encoder–decoder keeps the classic parts: the options the Hugging Face families brought are wired
        into the single-stack model only (its cross-attention and head know none of them)."""
        plain = {"positions": "learned", "head_transform": False, "head_bias": False, "logit_softcap": None,
                 "attn_softcap": None, "attn_scale": None, "qk_norm": "none", "n_kv_head": None, "d_head": None,
                 "embed_scale": None, "learned_embed_scale": False, "embed_scale_positions": False}
        for key, value in plain.items():
            if getattr(self, key) != value:
                raise ValueError(f"{key} = {getattr(self, key)!r} is for decoder and encoder models; an "
                                 f"encoder-decoder takes {key} = {value!r}")

    @property
    def scheme_type(self) -> type[Scheme]:
        """The scheme class this config names: its maths and its facts. Every reader of a config's scheme asks
        here, never the registry by the name again."""
        return SCHEMES.get(self.scheme)

    @property
    def head_dim(self) -> int:
        return self.d_head or self.d_model // self.n_head

    def resolved_embed_norm(self) -> bool:
        return self.scheme_type.embed_norm if self.embed_norm is None else self.embed_norm

    @property
    def stackable(self) -> bool:
        """Whether normlab.nn.stacked can train many of these models as one: its embedding carries learned or
        rotary positions (rotary has no parameters: each row of the stacked batch turns alike) and any embedding
        scale (a number, or DyT's and Derf's learned scalar, stacked), its head a plain projection."""
        return (self.positions in ("learned", "rope") and not self.head_transform and not self.head_bias
                and self.logit_softcap is None and self.scheme_type.facts.stackable)

    def stacks(self) -> dict[str, "Stack"]:
        """The model's stacks ("encoder", "decoder") and what each scheme instance needs to know of them."""
        arch = ARCHITECTURES[self.arch]
        if self.arch == "decoder":
            return {"decoder": Stack(arch, "decoder", 0, self.n_layer)}
        if self.arch == "encoder":
            return {"encoder": Stack(arch, "encoder", self.n_layer, 0)}
        n_dec = self.resolved_n_dec_layer()
        return {"encoder": Stack(arch, "encoder", self.n_layer, n_dec), "decoder": Stack(arch, "decoder", self.n_layer, n_dec)}

    def resolved_n_dec_layer(self) -> int:
        return self.n_dec_layer if self.n_dec_layer is not None else self.n_layer

    def resolved_norm_bias(self) -> bool:
        if self.norm_bias is not None:
            return self.norm_bias
        return self.bias and self.norm_affine and NORMS.get(self.norm).has_bias

    def resolved_d_ff(self) -> int:
        if self.d_ff is not None:
            return self.d_ff
        if self.mlp in ("swiglu", "geglu"):  # same parameter count as a 4d GELU MLP (LLaMA)
            return 8 * -(-(8 * self.d_model // 3) // 8)
        return 4 * self.d_model

    def resolved_final_norm(self) -> bool:
        if self.final_norm is not None:
            return self.final_norm
        return self.scheme_type.final_norm

