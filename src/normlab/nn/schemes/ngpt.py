"""nGPT: every vector of the embedding dimension on the unit sphere, each sub-layer a step along it."""
from __future__ import annotations

import torch
from torch import nn

from normlab.nn.residual import Residual
from normlab.nn.schemes.base import SCHEMES, BlockLayout, Facts, Layout, Scheme
from normlab.nn.sphere import Scale, project

class SphereResidual(Residual):
    """nGPT's step on the unit sphere (arXiv 2410.01131 §2.2.2, Eq. 10–11): the branch's output is normalized,
    the stream moves toward it by the learned eigen learning rates α (one per channel) and is normalized again,

        h ← Norm(h + α ⊙ (Norm(F(h)) − h))

              ┌── F ── Norm ──(−)── ×α ──┐
        h ──┬─┘               ▲           ▼
            └─────────────────┴──────────(+)── Norm ──► h'

    α is stored as its scale (1/√d) and read as stored · (alpha_init / scale), the paper's α_init = 0.05
    ("of the order of 1/n_layers") and α_scale = 1/√d_model (§2.5). The reference code (NVIDIA/ngpt model.py)
    also takes |α|; the paper's Eq. 10–11 do not, and neither does normlab (α starts and, in our runs, stays
    positive)."""

    def __init__(self, sublayer: nn.Module, out_norm: nn.Module, post_norm: nn.Module, d: int, alpha_init: float):
        super().__init__(sublayer, out_norm=out_norm, post_norm=post_norm)
        self.eigen_lr = Scale(d, alpha_init, d ** -0.5)

    def forward(self, x: torch.Tensor, *context: torch.Tensor) -> torch.Tensor:
        h = self.out_norm(self.sublayer(x, *context))  # the branch's output, on the sphere (B, T, C)
        return self.post_norm(x + self.eigen_lr(h - x))

    def extra_repr(self) -> str:
        return f"alpha_init={self.eigen_lr.init:g}"


@SCHEMES.register("ngpt")
class NGPT(Scheme):
    """nGPT (Loshchilov et al. 2024, arXiv 2410.01131): every vector of the embedding dimension lives on the unit
    sphere. Embedding rows, the rows of every stream-reading projection and the columns of every stream-writing
    one are unit vectors, put back after each optimizer step (`project`); each sub-layer moves the hidden state
    along the sphere by learned eigen learning rates α (`SphereResidual`):

        h ← Norm(h + α_A ⊙ (Norm(Attn(h)) − h));   h ← Norm(h + α_M ⊙ (Norm(MLP(h)) − h))

    Norm is x/‖x‖ (the `l2` normalizer), the attention normalizes q and k per head and scales them by s_qk
    with scores × √d_head, the SwiGLU MLP scales u and v by s_u and s_v·√d, and the logits are scaled by s_z
    (`normlab.nn.sphere`). No final norm: the last hidden state is already a unit vector. Option `alpha_init`
    (0.05, the paper's α_A,init = α_M,init). The paper trains with RoPE, SwiGLU and no biases; a config that
    leaves those unset gets them, and separate input and output embeddings. Its recipe also drops weight decay
    and warmup (its code: weight_decay 0, warmup 0, lr 3e-3): training settings, set by whoever trains it (the
    frontier claim F1 does). Decoder only: the paper defines a decoder-only LM.
    """

    label = "nGPT"
    name, formula, paper = ("ngpt", "h ← Norm(h + α ⊙ (Norm(F(h)) − h)), Norm = x/‖x‖; unit-norm weights and "
                                    "embeddings", "arXiv 2410.01131")
    final_norm = False
    OPTIONS = {"alpha_init": 0.05}
    on_sphere = True
    facts = Facts(
        color="#8c6d31",
        layout=Layout(BlockLayout(sum_norm=True, input_norm=False, branch_norm=True)),  # α is not visible
        requires={
            "norm": ("l2", "nGPT's Norm is x/‖x‖ (arXiv 2410.01131 §2.1): its update interpolates between unit "
                           "vectors"),
            "positions": ("rope", "nGPT's models use rotary positions (§2.3.2); a learned position table added to "
                                  "unit embeddings would take them off the sphere"),
            "mlp": ("swiglu", "nGPT's MLP is SwiGLU with its scaling vectors s_u, s_v (§2.4.2)"),
            "bias": (False, "nGPT's projections are matrices of unit vectors, with no biases (§2.6)"),
            "qk_norm": ("none", "nGPT normalizes q and k itself, after the rotation, scaled by s_qk (§2.3.2)"),
            "embed_scale": (1.0, "nGPT's input embeddings are unit vectors, read as they are (§2.2.1)"),
            "learned_embed_scale": (False, "nGPT's input embeddings are unit vectors, read as they are (§2.2.1)"),
            "tie_weights": (False, "nGPT has an input and an output embedding, each of unit rows (§2.2.1; its code: "
                                   "\"in the nGPT paper there was no weight tying\")"),
        },
        undefined_architectures={
            "encoder-only": "nGPT (arXiv 2410.01131) defines a decoder-only language model",
            "encoder-decoder": "nGPT (arXiv 2410.01131) defines a decoder-only language model; where cross-attention "
                               "would meet the sphere is not in the paper"},
        stackable=False)  # its scaling vectors and the projection after each step: normlab.nn.stacked has neither

    def residual(self, sublayer, layer, make_norm, role):
        out_norm = make_norm()
        return SphereResidual(sublayer, out_norm, make_norm(), out_norm.d, self.options["alpha_init"])

    def project(self, model):
        tables = [model.wte.weight] + ([] if model.lm_head.weight is model.wte.weight else [model.lm_head.weight])
        project(tables, model.projections())

    def logit_scale(self, vocab_size, d_model):
        return Scale(vocab_size, 1.0, d_model ** -0.5)  # s_z: init 1, scale 1/√d_model (§2.5, Eq. 23)
