"""The residual stream of 2026: hyper-connections (n streams, HC and DeepSeek's mHC), Attention Residuals (a
softmax over the earlier layers' outputs) and SpanNorm (one clean residual across the block). Their maths is in
`normlab.nn.residual`; each class here says which wrapper a sub-layer gets and how the state enters and leaves."""
from __future__ import annotations

import math
from dataclasses import replace

from normlab.nn.residual import (DepthResidual, DepthSources, DynamicMixing, HyperResidual, HyperStreams,
                                  ManifoldMixing, Residual, SpanResidual, StaticMixing)
from normlab.nn.schemes.base import SCHEMES, Facts, Role, Scheme, Stack

NO_ENCODER_DECODER = ("{paper} defines a stack of self-attention blocks (its state does not depend on the attention "
                      "mask, so an encoder is built as a decoder is); how an encoder-decoder's cross-attention would "
                      "read and write its residual state is not in the paper")

def _decoder_encoder_only(paper: str) -> dict[str, str]:
    return {"encoder-decoder": NO_ENCODER_DECODER.format(paper=paper)}


@SCHEMES.register("hc")
class HyperConnections(Scheme):
    """Hyper-connections (Zhu et al. 2024, arXiv 2409.19606): the residual stream widens to n streams; each
    sub-layer reads a learned mix of them, writes back through learned weights, and the streams mix:

        x ← H_res·x + H_postᵀ ⊗ F(Norm(H_pre·x))          x: (B, T, n, C)

             x ──► H_pre· ──► Norm ── F ──┐
             │                            ⊗ H_post
             └──► H_res· ────────────────(+)──► x'

    Static (HC §2.1) by default; option `dynamic` adds the input-dependent part (DHC, §2.2). Initialised as
    Pre-LN (§2.3, Eq. 14: sub-layer k reads stream k mod n, H_post = 1, H_res = I). The embedding enters as n copies
    and the streams leave summed, then the final norm. Option `expansion` n (default 4, the paper's best).
    """

    label = "Hyper-connections"
    name, formula, paper = ("hc", "x ← H_res·x + H_postᵀ⊗F(Norm(H_pre·x)), n streams; final Norm", "arXiv 2409.19606")
    source = ("no official code; lucidrains/hyper-connections@4775103 hyper_connections.py:61 (streams summed), "
              "215 (k mod n), 229-247 (static init, dynamic W = 0, scales 0.01)")
    OPTIONS = {"expansion": 4.0, "dynamic": False}
    facts = Facts(color="#9edae5", undefined_architectures=_decoder_encoder_only("Hyper-connections (arXiv 2409.19606)"),
                  stackable=False)

    def __init__(self, n_layer: int, stack: Stack | None = None, **options: float | bool):
        super().__init__(n_layer, stack, **options)
        self.n = _streams(self.name, self.options["expansion"])

    def residual(self, sublayer, layer, make_norm, role):
        norm = make_norm()
        k = 2 * layer + (role != "attention")  # the paper counts sub-layers: attention and FFN each one "layer"
        mixing = DynamicMixing(self.n, k, norm.d) if self.options["dynamic"] else StaticMixing(self.n, k)
        return HyperResidual(sublayer, norm, mixing)

    def residual_state(self, d_model):
        return HyperStreams(self.n)

    def record(self):
        return {**super().record(), "streams": self.n}


@SCHEMES.register("mhc")
class ManifoldHyperConnections(HyperConnections):
    """mHC, manifold-constrained hyper-connections (Xie et al. 2025, DeepSeek, arXiv 2512.24880): HC whose
    stream mixing H_res is projected onto the doubly stochastic matrices by Sinkhorn–Knopp, and whose H_pre and
    H_post are kept non-negative, all three computed from the RMS-normalized flattened streams (§4.2):

        x ← H_res·x + H_postᵀ ⊗ F(Norm(H_pre·x)),   H_res = Sinkhorn(·), H_pre = σ(·), H_post = 2σ(·)

    A doubly stochastic H_res keeps the composite mapping across layers a mean of the streams (its row and column
    sums stay 1), where HC's may grow with depth (the paper's Amax gain, Fig. 3). Options `expansion` n (4, §5.1)
    and `sinkhorn_iters` (20, §4.2; DeepSeek-V4's hc_sinkhorn_iters). φ is drawn with σ = 0.02·√(4096/C), which
    keeps its logits' RMS at init as at DeepSeek-V4's width (4096, σ 0.02); the gates α start at 0.01.
    """

    label = "mHC"
    name, formula, paper = ("mhc", "HC with H_res = Sinkhorn(·) doubly stochastic, H_pre = σ(·), H_post = 2σ(·); "
                                   "final Norm", "arXiv 2512.24880")
    source = ("transformers 5.24 models/deepseek_v4/modeling_deepseek_v4.py:885-996 (DeepseekV4HyperConnection: "
              "σ, 2σ, Sinkhorn at 982-991, init at 1287-1290); configuration_deepseek_v4.py:149-151 (n 4, 20 "
              "iterations, ε 1e-6)")
    OPTIONS = {"expansion": 4.0, "sinkhorn_iters": 20.0}
    facts = replace(HyperConnections.facts, color="#dbdb8d",
                    undefined_architectures=_decoder_encoder_only("mHC (arXiv 2512.24880)"))
    REFERENCE_WIDTH, REFERENCE_STD, GATE_INIT = 4096, 0.02, 0.01

    def __init__(self, n_layer: int, stack: Stack | None = None, **options: float | bool):
        super().__init__(n_layer, stack, **options)
        iters = self.options["sinkhorn_iters"]
        if iters != int(iters) or iters < 1:  # refused where the config is validated, not where the model is built
            raise ValueError(f"scheme 'mhc' option 'sinkhorn_iters' is a number of Sinkhorn rounds, an integer >= 1; "
                             f"got {iters:g}")
        self.iters = int(iters)

    def residual(self, sublayer, layer, make_norm, role):
        norm = make_norm()
        iters = self.iters
        std = self.REFERENCE_STD * math.sqrt(self.REFERENCE_WIDTH / norm.d)
        k = 2 * layer + (role != "attention")
        return HyperResidual(sublayer, norm, ManifoldMixing(self.n, k, norm.d, iters, std, self.GATE_INIT))


def _streams(scheme: str, expansion: float) -> int:
    if expansion != int(expansion) or expansion < 1:
        raise ValueError(f"scheme {scheme!r} option 'expansion' is a number of streams, an integer >= 1; "
                         f"got {expansion:g}")
    return int(expansion)


@SCHEMES.register("attnres")
class AttentionResiduals(Scheme):
    """Attention Residuals (Kimi Team 2026, arXiv 2603.15031): each sub-layer reads a softmax-weighted sum of
    the preceding layers' outputs instead of their unit-weight sum,

        h_l = Σ_{i<l} α_{i→l} v_i,   α_{i→l} = softmax_i(w_l · RMSNorm(v_i)),   v_0 = embedding, v_i = F_i(Norm(h_i))

          v_0 … v_{l−1} ──► softmax over depth (query w_l) ──► Norm ── F_l ──► v_l

    Full AttnRes by default (every sub-layer's output its own source); option `block_layers` S > 0 is Block
    AttnRes: the outputs within S blocks are summed into one source, and a new source starts at the attention
    of every S-th block (Inkling-2's `n_layers_per_attn_res_block`). w_l starts at zero (a uniform average over
    depth). The stream leaves through one more depth attention, then the final norm.
    """

    label = "Attention Residuals"
    name, formula, paper = ("attnres", "h_l = Σ_i softmax_i(w_l·RMSNorm(v_i))·v_i over earlier outputs v_i; final Norm",
                            "arXiv 2603.15031")
    source = ("MoonshotAI/Attention-Residuals (README pseudocode only, seen through a copy); transformers 5.24 "
              "models/inkling2/modeling_inkling2.py:833-858 (Inkling2BlockAttentionResidual), 866 (boundary), "
              "1421-1438 (sources, final aggregation)")
    OPTIONS = {"block_layers": 0.0}
    facts = Facts(color="#f7b6d2", undefined_architectures=_decoder_encoder_only("Attention Residuals (arXiv 2603.15031)"),
                  stackable=False)

    def __init__(self, n_layer: int, stack: Stack | None = None, **options: float | bool):
        super().__init__(n_layer, stack, **options)
        size = self.options["block_layers"]
        if size != int(size) or size < 0:
            raise ValueError(f"scheme 'attnres' option 'block_layers' is a number of blocks per AttnRes block, an "
                             f"integer >= 0 (0: Full AttnRes); got {size:g}")
        self.block_layers = int(size)

    def boundary(self, layer: int, role: Role) -> bool:
        """Whether this sub-layer's output starts a new source."""
        return self.block_layers == 0 or (role == "attention" and layer % self.block_layers == 0)

    def residual(self, sublayer, layer, make_norm, role):
        norm = make_norm()
        return DepthResidual(sublayer, norm, norm.d, self.boundary(layer, role))

    def residual_state(self, d_model):
        return DepthSources(d_model)

    def record(self):
        return {**super().record(), "variant": "block" if self.block_layers else "full"}


@SCHEMES.register("spannorm")
class SpanNorm(Scheme):
    """SpanNorm (Wang, Li et al. 2026, arXiv 2601.22580): a clean residual spans the whole block and a
    PostNorm-style norm normalizes the aggregated output,

        y = Norm(x + Attn(x));   x' = Norm′(x + FFN(y))          block 0: Attn(Norm₀(x))

        x ──┬── Attn ──(+)── Norm ── y ── FFN ──(+)── Norm′ ──► x'
            ├─────────┘                          │
            └────────────────────────────────────┘

    No primary source for the block's equations was found (only the abstract; no official code): normlab
    follows the paper's Eq. 5–8 as a third-party adaptation quotes them (docs/schemes.md says which). The
    paper's "principled scaling strategy" is not built: its constant is in neither source. No final norm: the
    stream leaves the last block normalized, as in Post-LN. Decoder and encoder.
    """

    label = "SpanNorm"
    name, formula, paper = ("spannorm", "y = Norm(x + Attn(x)); x' = Norm(x + FFN(y)); Norm on block 0's attention "
                                        "input", "arXiv 2601.22580")
    source = "none found: no official code; the block as a third-party adaptation quotes the paper's Eq. 5-8"
    final_norm = False
    facts = Facts(color="#aec7e8",  # no layout: its norms sit where Post-LN's do; its span skip is not a norm
                  stackable=False,  # normlab.nn.stacked runs the sub-layers one after another, each on its own input
                  incompatible_norms={"none": "SpanNorm is defined by its two norms on the sums; with no normalizer "
                                              "the stream grows with every block"},
                  undefined_architectures=_decoder_encoder_only("SpanNorm (arXiv 2601.22580)"))

    def residual(self, sublayer, layer, make_norm, role):
        if role == "attention":
            return Residual(sublayer, in_norm=make_norm() if layer == 0 else None, post_norm=make_norm())
        return SpanResidual(sublayer, post_norm=make_norm())

    @staticmethod
    def combine(x, attn, cross, mlp, memory):
        return mlp(attn(x), x)  # (B, T, C): the FFN's residual is the block's input
