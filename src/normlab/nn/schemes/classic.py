"""The placements of 2017–2024: where the norm goes around one residual stream (Post-LN, Pre-LN, Sandwich-LN,
Peri-LN, Mix-LN), and the schemes that scale a placement (DeepNorm's α and β, LayerNorm Scaling's 1/√ℓ, Sub-LN's
inner norms and γ)."""
from __future__ import annotations

import math
from dataclasses import replace

from normlab.nn.residual import Residual
from normlab.nn.schemes.base import NO_NORM_COLLAPSES, SCHEMES, BlockLayout, Facts, InitGains, Layout, Scheme, Stack

@SCHEMES.register("post")
class PostLN(Scheme):
    """Post-LN (Vaswani et al. 2017, arXiv 1706.03762): x ← Norm(x + F(x)). No final norm.

        x ──┬── F ──(+)── Norm ──► x'
            └───────┘
    """

    label = "Post-LN"
    name, formula, paper = "post", "x ← Norm(x + F(x))", "arXiv 1706.03762"
    final_norm = False
    facts = Facts(
        color="#d62728",
        layout=Layout(BlockLayout(sum_norm=True, input_norm=False, branch_norm=False)))

    def residual(self, sublayer, layer, make_norm, role):
        return Residual(sublayer, post_norm=make_norm())


@SCHEMES.register("pre")
class PreLN(Scheme):
    """Pre-LN (Xiong et al. 2020, arXiv 2002.04745; GPT-2): x ← x + F(Norm(x)), final norm.

        x ──┬── Norm ── F ──(+)──► x'        … last block ── Norm ── head
            └───────────────┘
    """

    label = "Pre-LN"
    name, formula, paper = "pre", "x ← x + F(Norm(x)); final Norm", "arXiv 2002.04745"
    facts = Facts(
        color="#1f77b4",
        layout=Layout(BlockLayout(sum_norm=False, input_norm=True)),  # sandwich, Sub-LN, parallel blocks fit it too
        degenerate_norms={})  # pre + none is *the* no-norm control

    def residual(self, sublayer, layer, make_norm, role):
        return Residual(sublayer, in_norm=make_norm())


@SCHEMES.register("sandwich")
class SandwichLN(Scheme):
    """Sandwich-LN (CogView, Ding et al. 2021, arXiv 2105.13290): x ← x + Norm(F(Norm(x))), final norm.

        x ──┬── Norm ── F ── Norm ──(+)──► x'
            └───────────────────────┘

    Same block as Peri-LN; CogView leaves the embedding un-normalized.
    """

    label = "Sandwich-LN"
    name, formula, paper = "sandwich", "x ← x + Norm(F(Norm(x))); final Norm", "arXiv 2105.13290"
    facts = Facts(
        color="#9467bd",
        layout=Layout(BlockLayout(sum_norm=False, input_norm=True, inner_norm=False, side_by_side=False, min_norms=4)))

    def residual(self, sublayer, layer, make_norm, role):
        return Residual(sublayer, in_norm=make_norm(), out_norm=make_norm())


@SCHEMES.register("peri")
class PeriLN(SandwichLN):
    """Peri-LN (Kim et al. 2025, arXiv 2502.02732): x ← x + Norm(F(Norm(x))), final norm.

        emb ── Norm ──► x;   x ──┬── Norm ── F ── Norm ──(+)──► x'
                                 └───────────────────────┘

    The block is Sandwich-LN's; Peri-LN also normalizes the embedding output
    before the first block, which CogView's Sandwich-LN does not.
    """

    label = "Peri-LN"
    name, formula, paper = "peri", "x ← x + Norm(F(Norm(x))); Norm on embeddings; final Norm", "arXiv 2502.02732"
    embed_norm = True
    facts = replace(
        SandwichLN.facts,
        color="#2ca02c",
        layout=Layout(SandwichLN.facts.layout.block, embed_norm=True))


def deepnorm_constants(architecture: str, n_encoder: int = 0, n_decoder: int = 0) -> dict[str, dict[str, float]]:
    """DeepNet's α (residual multiplier) and β (init gain), Wang et al. 2022, arXiv 2203.00555, Table/Fig. 2.

    N = encoder layers, M = decoder layers. Returns {"encoder": {...}, "decoder": {...}}
    with the parts the architecture has.
    """
    N, M = n_encoder, n_decoder
    if architecture == "encoder-only":
        _require(N, "n_encoder", architecture)
        return {"encoder": {"alpha": (2 * N) ** 0.25, "beta": (8 * N) ** -0.25}}
    if architecture == "decoder-only":
        _require(M, "n_decoder", architecture)
        return {"decoder": {"alpha": (2 * M) ** 0.25, "beta": (8 * M) ** -0.25}}
    if architecture == "encoder-decoder":
        _require(N, "n_encoder", architecture)
        _require(M, "n_decoder", architecture)
        return {
            "encoder": {"alpha": 0.81 * (N**4 * M) ** (1 / 16), "beta": 0.87 * (N**4 * M) ** (-1 / 16)},
            "decoder": {"alpha": (3 * M) ** 0.25, "beta": (12 * M) ** -0.25},
        }
    raise ValueError(f"unknown architecture {architecture!r}; valid: encoder-only, decoder-only, encoder-decoder")


def _require(n: int, what: str, architecture: str) -> None:
    if n < 1:
        raise ValueError(f"{architecture} DeepNorm needs {what} >= 1, got {n}")


@SCHEMES.register("deepnorm")
class DeepNorm(Scheme):
    """DeepNorm (DeepNet, Wang et al. 2022, arXiv 2203.00555): x ← Norm(α·x + F(x)).

        x ──┬────── F ─────(+)── Norm ──► x'
            └──── ×α ───────┘

    α and β depend on the architecture and the stack (DeepNet Table 1; N encoder, M decoder layers):
    decoder-only α = (2M)^¼, β = (8M)^−¼; encoder-only α = (2N)^¼, β = (8N)^−¼; encoder–decoder:
    encoder α = 0.81(N⁴M)^1/16, β = 0.87(N⁴M)^−1/16, decoder α = (3M)^¼, β = (12M)^−¼.
    β is the Xavier-normal gain of the value, output and FFN weights (cross-attention's too);
    query and key keep gain 1. No final norm (it is Post-LN with an up-weighted residual).
    """

    label = "DeepNorm"
    name, formula, paper = ("deepnorm", "x ← Norm(α·x + F(x)); α, β per architecture (decoder-only: α=(2L)^¼, "
                                        "init gain β=(8L)^−¼)", "arXiv 2203.00555")
    final_norm = False
    facts = Facts(
        color="#ff7f0e",
        layout=PostLN.facts.layout,  # α is not visible in the structure
        incompatible_norms={"none": "α > 1 multiplies the residual every sub-layer; without a norm it grows as "
                                    "α^(2L)"})

    @property
    def constants(self) -> dict[str, float]:
        """α and β of the paper's Table 1 for this stack of this architecture (N, M: encoder, decoder depth)."""
        st = self.stack
        return deepnorm_constants(st.architecture, n_encoder=st.n_encoder, n_decoder=st.n_decoder)[st.part]

    def residual(self, sublayer, layer, make_norm, role):
        return Residual(sublayer, post_norm=make_norm(), alpha=self.constants["alpha"])

    def init_gains(self):
        st = self.stack
        article = "an" if st.architecture.startswith("e") else "a"
        return InitGains(qk=1.0, v_out_ffn=self.constants["beta"],
                         why=f"DeepNorm β for the {st.part} of {article} {st.architecture} model "
                             f"(N = {st.n_encoder}, M = {st.n_decoder}), DeepNet Table 1")

    def record(self):
        return {**super().record(), **self.constants, **self.stack.record()}


@SCHEMES.register("mix")
class MixLN(Scheme):
    """Mix-LN (Li et al. 2024, arXiv 2412.13795): Post-LN in the first ⌊ρ·L⌋ blocks, Pre-LN after.

        blocks 0 … ⌊ρL⌋−1:  x ← Norm(x + F(x))
        blocks ⌊ρL⌋ … L−1:  x ← x + F(Norm(x));  final Norm

    Option `mix_ratio` ρ (default 0.25).
    """

    label = "Mix-LN"
    name, formula, paper = "mix", "Post-LN in blocks < ⌊ρL⌋, Pre-LN after; final Norm", "arXiv 2412.13795"
    OPTIONS = {"mix_ratio": 0.25}
    facts = Facts(
        color="#8c564b",
        layout=Layout(PreLN.facts.layout.block, lower_blocks=PostLN.facts.layout.block))

    def __init__(self, n_layer: int, stack: Stack | None = None, **options: float | bool):
        super().__init__(n_layer, stack, **options)
        ratio = self.options["mix_ratio"]
        if not 0.0 <= ratio <= 1.0:
            raise ValueError(f"mix_ratio must be in [0, 1], got {ratio}")
        self.n_post = math.floor(ratio * n_layer)

    def residual(self, sublayer, layer, make_norm, role):
        if layer < self.n_post:
            return Residual(sublayer, post_norm=make_norm())
        return Residual(sublayer, in_norm=make_norm())

    def record(self):
        return {**super().record(), "n_post_layers": self.n_post}


@SCHEMES.register("lns")
class LayerNormScaling(PreLN):
    """LayerNorm Scaling (Sun et al. 2025, "The Curse of Depth", arXiv 2502.05795).

    Pre-LN with each norm's output scaled by 1/√ℓ, ℓ the 1-based layer index:

        x ──┬── Norm ── ×1/√ℓ ── F ──(+)──► x'      final Norm unscaled
            └────────────────────────┘
    """

    label = "LayerNorm Scaling"
    name, formula, paper = "lns", "x ← x + F(Norm(x)/√ℓ), ℓ = layer + 1; final Norm", "arXiv 2502.05795"
    facts = replace(
        PreLN.facts,  # its layout too: the 1/√ℓ is not visible in the structure, `normlab diagnose` reads Pre-LN
        color="#e377c2",
        incompatible_norms={"none": "LayerNorm Scaling scales a normalizer's output; with no normalizer there is "
                                    "none to scale"})

    def residual(self, sublayer, layer, make_norm, role):
        return Residual(sublayer, in_norm=make_norm(), in_scale=1.0 / math.sqrt(layer + 1))


@SCHEMES.register("subln")
class SubLN(PreLN):
    """Sub-LN (Magneto, Wang et al. 2022, arXiv 2210.06423; torchscale's default).

    Pre-LN plus a norm before attention's output projection and one after the
    FFN activation; Xavier-normal init with gain γ = sqrt(log 2L) for the
    value, output and FFN weights, gain 1 for query and key:

        x ──┬── Norm ── F[ … Norm … ] ──(+)──► x'     final Norm
            └────────────────────────────┘
    """

    label = "Sub-LN"
    name, formula, paper = "subln", "x ← x + F(Norm(x)), F with an inner Norm; init γ=√(log 2L)", "arXiv 2210.06423"
    inner_norms = True
    facts = replace(
        PreLN.facts,
        color="#17becf",
        layout=Layout(BlockLayout(sum_norm=False, input_norm=True, inner_norm=True)),
        degenerate_norms=dict(NO_NORM_COLLAPSES))

    @property
    def gamma(self) -> float:
        return math.sqrt(math.log(2 * self.n_layer))

    def init_gains(self):
        return InitGains(qk=1.0, v_out_ffn=self.gamma, why="Sub-LN γ = sqrt(log(2·n_layer))")

    def record(self):
        return {**super().record(), "gamma": self.gamma}
