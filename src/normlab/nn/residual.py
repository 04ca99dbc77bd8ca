"""The residual stream as a state the blocks pass on, and the wrappers that read and write it.

The common case is one vector per token, (B, T, C), and one formula (`Residual`):

    x ← PostNorm( α·x + OutNorm( F( s·InNorm(x) ) ) )

The residual designs of 2026 generalize the state, not the block:

- hyper-connections (HC, arXiv 2409.19606; mHC, arXiv 2512.24880) widen it to n streams, (B, T, n, C): a
  sub-layer reads a mix of the streams (H_pre), writes back through H_post, and the streams mix through H_res,

      x ← H_res·x + H_postᵀ ⊗ F(Norm(H_pre·x))                     (`HyperResidual`)

- Attention Residuals (AttnRes, arXiv 2603.15031) keep the layers' outputs as sources, (B, T, m, C), and each
  sub-layer attends over them (softmax over depth) instead of adding them with unit weights:

      h = Σᵢ softmax(w·RMSNorm(vᵢ))ᵢ · vᵢ;   sources ← sources ∪ {F(Norm(h))}   (`DepthResidual`)

A model enters the state after the embedding (`enter`) and leaves it before the final norm (the module's
forward, so a hook sees the exit): `OneStream`, `HyperStreams`, `DepthSources`; with one stream both are the identity, so every placement of 2017–2025 is unchanged.
Diagnostics read any state through the same two views: its slots, (B, T, m, C), and their sum, (B, T, C),
the stream a one-stream model would carry (embedding + every sub-layer's output, up to the mixing).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Residual(nn.Module):
    """One sub-layer F around the residual stream: x ← PostNorm(α·x + OutNorm(F(s·InNorm(x)))).

              ┌─ InNorm ─ ×s ─ F ─ OutNorm ─┐
        x ──┬─┘                             ▼
            └──────────── ×α ──────────────(+)── PostNorm ──► x'
    """

    def __init__(self, sublayer: nn.Module, in_norm: nn.Module | None = None,
                 out_norm: nn.Module | None = None, post_norm: nn.Module | None = None,
                 alpha: float = 1.0, in_scale: float = 1.0):
        super().__init__()
        self.in_norm = in_norm if in_norm is not None else nn.Identity()
        self.sublayer = sublayer
        self.out_norm = out_norm if out_norm is not None else nn.Identity()
        self.post_norm = post_norm if post_norm is not None else nn.Identity()
        self.alpha, self.in_scale = float(alpha), float(in_scale)

    def forward(self, x: torch.Tensor, *context: torch.Tensor) -> torch.Tensor:
        """`context`: what the sub-layer reads besides the stream (cross-attention: the encoder's output)."""
        h = self.in_norm(x)
        if self.in_scale != 1.0:
            h = h * self.in_scale
        h = self.out_norm(self.sublayer(h, *context))  # the branch F's contribution, (B, T, C)
        if self.alpha != 1.0:
            x = self.alpha * x
        return self.post_norm(x + h)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha:g}, in_scale={self.in_scale:g}"


class SpanResidual(Residual):
    """The second sub-layer of a SpanNorm block: its residual is the block's input x, not its own input y,
    x' = PostNorm(x + F(y)): one clean residual spans the whole block."""

    def forward(self, y: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return self.post_norm(skip + self.out_norm(self.sublayer(self.in_norm(y))))  # (B, T, C)


# -- the state's entry and exit ------------------------------------------------------------------------------------


class OneStream(nn.Module):
    """The residual stream of every placement before 2026: one vector per token. Entering and leaving it change
    nothing, and it has no parameters, so a model's state dict is as it was."""

    def enter(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        """Leave the state: the one stream as it is."""
        return state


class HyperStreams(nn.Module):
    """n residual streams, (B, T, n, C). The embedding enters as n copies (HC §2.1; DeepSeek-V4's
    `inputs_embeds.unsqueeze(2).expand(...)`), and the streams leave summed (HC: "the final hidden vectors are
    summed"; before the final norm a sum and GLM-5-Next's mean differ only by the factor n, which the norm
    removes)."""

    def __init__(self, n: int):
        super().__init__()
        self.n = n

    def enter(self, x: torch.Tensor) -> torch.Tensor:
        return x.unsqueeze(-2).expand(*x.shape[:-1], self.n, x.shape[-1]).contiguous()  # (B, T, n, C)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        """Leave the state: the streams summed, (B, T, C)."""
        return state.sum(-2)

    def extra_repr(self) -> str:
        return f"n={self.n}"


class DepthAttention(nn.Module):
    """Softmax attention over depth with one learned pseudo-query w (zero at init: a uniform average over the
    sources, AttnRes §5), keys the RMS-normalized sources, values the sources themselves, no temperature
    (AttnRes §3.1, Eq. 2–4). The key norm's gain is left out: w·(g ⊙ k̂) is (w ⊙ g)·k̂, so it adds nothing.
    Inkling-2 (transformers 5.24, models/inkling2/modeling_inkling2.py:833-857) differs: normalized values and
    a C^-½ scaling.

    `weights` keeps the last forward's depth weights, (B, T, m), for diagnostics only (detached)."""

    def __init__(self, d: int):
        super().__init__()
        self.query = nn.Parameter(torch.zeros(d))
        self.weights: torch.Tensor | None = None

    no_weight_decay = True  # a zero-init query decayed back to zero would pin the average (normlab.train.optim)

    def forward(self, sources: torch.Tensor) -> torch.Tensor:
        """sources (B, T, m, C) → their attention-weighted sum (B, T, C)."""
        with torch.autocast(sources.device.type, enabled=False):  # the depth softmax in fp32 under bf16 autocast
            keys = F.rms_norm(sources.float(), (sources.shape[-1],))
            logits = keys @ self.query.float()  # (B, T, m)
        weights = logits.softmax(-1).to(sources.dtype)
        self.weights = weights.detach()
        return (weights.unsqueeze(-1) * sources).sum(-2)


class DepthSources(nn.Module):
    """Attention Residuals' state: the sources so far, (B, T, m, C): the embedding, then each completed block's
    sum, then the current block's partial sum (the last slot). It enters as the embedding alone and leaves
    through one more depth attention with its own query ("the final output layer aggregates all block
    representations", AttnRes §3.2; Inkling-2's `final_input`, modeling_inkling2.py:1369 and :1437)."""

    def __init__(self, d: int):
        super().__init__()
        self.depth = DepthAttention(d)

    def enter(self, x: torch.Tensor) -> torch.Tensor:
        return x.unsqueeze(-2)  # (B, T, 1, C)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        """Leave the state: one more depth attention over every source, (B, T, C)."""
        return self.depth(state)


def slots(state: torch.Tensor) -> torch.Tensor:
    """A block's residual state as (B, T, m, C): one stream as m = 1; n streams or m sources as they are."""
    return state if state.dim() == 4 else state.unsqueeze(-2)


def collapsed(state: torch.Tensor) -> torch.Tensor:
    """A block's residual state as the one stream it stands for, (B, T, C): the sum of its slots."""
    return state.sum(-2) if state.dim() == 4 else state


# -- hyper-connections ---------------------------------------------------------------------------------------------


def reads_stream(n: int, k: int) -> torch.Tensor:
    """H_pre at init for sub-layer k: the one-hot e_{k mod n}, sub-layer k reads stream k mod n (HC §2.3, Eq. 14)."""
    return torch.nn.functional.one_hot(torch.tensor(k % n), n).float()


def sinkhorn(logits: torch.Tensor, iters: int, eps: float = 1e-6) -> torch.Tensor:
    """Sinkhorn–Knopp (mHC §4.2): exp of the logits, rows and columns normalized in turn, `iters` times, so the
    result is (close to) doubly stochastic. Written as DeepSeek-V4's (transformers 5.24,
    models/deepseek_v4/modeling_deepseek_v4.py:982-991): a row softmax + ε, then columns, then iters − 1 rounds
    of rows and columns, each sum + ε."""
    m = logits.softmax(-1) + eps
    m = m / (m.sum(-2, keepdim=True) + eps)
    for _ in range(iters - 1):
        m = m / (m.sum(-1, keepdim=True) + eps)
        m = m / (m.sum(-2, keepdim=True) + eps)
    return m


class StaticMixing(nn.Module):
    """Static hyper-connections (HC §2.1, Eq. 1–5): H_pre (the paper's A_m), H_post (B) and H_res (A_r) learned
    per sub-layer, the same for every token. Initialised so the model starts as Pre-LN (HC §2.3, Eq. 14):
    sub-layer k reads stream k mod n (H_pre = e_{k mod n}), writes to every stream (H_post = 1), and the streams
    pass on unmixed (H_res = I). Not decayed (HC §4: the static parts take no weight decay)."""

    no_weight_decay = True

    def __init__(self, n: int, k: int):
        super().__init__()
        self.pre, self.post = nn.Parameter(reads_stream(n, k)), nn.Parameter(torch.ones(n))
        self.res = nn.Parameter(torch.eye(n))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (B, T, n, C) → H_pre (n,), H_post (n,), H_res (n, n), out_i = Σ_j H_res[i, j]·x_j."""
        return self.pre, self.post, self.res


class DynamicMixing(StaticMixing):
    """Dynamic hyper-connections (HC §2.2, Eq. 10–13): the static maps plus an input-dependent part from each
    stream normalized on its own (LayerNorm, as the paper's Algorithm 2),
    H_pre = A_m + s_α·tanh(x̄W_m), H_res = A_r + s_α·tanh(x̄W_r), H_post = B + s_β·tanh(x̄W_β).
    W starts at 0 and s_α = s_β = 0.01 (Eq. 14, Algorithm 2), so it starts as its static form. The dynamic
    part (`DynamicPart`) is decayed as the model's matrices are (HC §4); the static maps are not."""

    def __init__(self, n: int, k: int, d: int):
        super().__init__(n, k)
        self.dynamic = DynamicPart(n, d)

    def forward(self, x):
        pre, post, res = super().forward(x)
        d_pre, d_post, d_res = self.dynamic(x)
        return pre + d_pre, post + d_post, res + d_res


class DynamicPart(nn.Module):
    """The input-dependent part of a dynamic hyper-connection: W_m, W_β (C × 1) and W_r (C × n), the scales
    s_α, s_β, and the per-stream LayerNorm."""

    no_weight_decay = False  # under a StaticMixing, which is exempt: exempt_from_decay reads this flag first

    def __init__(self, n: int, d: int):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.w_pre, self.w_post, self.w_res = (nn.Parameter(torch.zeros(d, 1)), nn.Parameter(torch.zeros(d, 1)),
                                               nn.Parameter(torch.zeros(d, n)))
        self.s_alpha, self.s_beta = nn.Parameter(torch.tensor(0.01)), nn.Parameter(torch.tensor(0.01))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h = self.norm(x)  # (B, T, n, C)
        pre = self.s_alpha * torch.tanh(h @ self.w_pre).squeeze(-1)  # (B, T, n)
        # the paper's A_r row j comes from stream j and says where stream j goes (Ĥ = A_rᵀ·H, Eq. 1 and 12); in
        # H_res's convention (out_i = Σ_j H_res[i, j]·x_j) that is column j
        res = (self.s_alpha * torch.tanh(h @ self.w_res)).transpose(-1, -2)  # (B, T, n, n)
        post = self.s_beta * torch.tanh(h @ self.w_post).squeeze(-1)
        return pre, post, res


class ManifoldMixing(nn.Module):
    """mHC's mixing (arXiv 2512.24880 §4.2, Eq. 7–9): from the RMS-normalized flattened streams x̃ (…, nC),
    H_pre = σ(α_pre·x̃φ_pre + b_pre), H_post = 2σ(α_post·x̃φ_post + b_post) (non-negative) and
    H_res = Sinkhorn(α_res·x̃φ_res + b_res) (doubly stochastic), the gates α starting at 0.01 (Table 5).
    The paper does not say how b and φ start; normlab starts b as HC's init (b_pre = e_{k mod n},
    b_res = I, b_post = 0: lucidrains' reference, manifold_constrained_hyper_connections.py:270-273), so the
    streams do not start identical under a uniform H_res, and φ as DeepSeek-V4's module in transformers
    (N(0, σ), carried to the width by the caller)."""

    no_weight_decay = True  # φ, b and α are not decayed: mHC's Table 5 decays the model (0.1) and names no exception; normlab keeps them as HC's static maps (HC §4), said in docs/schemes.md

    def __init__(self, n: int, k: int, d: int, iters: int, phi_std: float, gate: float):
        super().__init__()
        self.n, self.iters = n, iters
        self.phi = nn.Parameter(torch.randn(n * d, (2 + n) * n) * phi_std)
        self.bias = nn.Parameter(torch.cat([reads_stream(n, k), torch.zeros(n), torch.eye(n).flatten()]))
        self.gate = nn.Parameter(torch.full((3,), float(gate)))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n = self.n
        with torch.autocast(x.device.type, enabled=False):  # the mixing's logits in fp32 under bf16 autocast
            flat = F.rms_norm(x.flatten(-2).float(), (x.shape[-2] * x.shape[-1],))  # (B, T, nC)
            logits = flat @ self.phi.float()  # (B, T, (2 + n)·n)
        pre_l, post_l, res_l = logits.split([n, n, n * n], -1)
        pre_b, post_b, res_b = self.bias.float().split([n, n, n * n])
        pre = torch.sigmoid(self.gate[0] * pre_l + pre_b)
        post = 2 * torch.sigmoid(self.gate[1] * post_l + post_b)
        res = sinkhorn((self.gate[2] * res_l + res_b).unflatten(-1, (n, n)), self.iters)
        return pre.to(x.dtype), post.to(x.dtype), res.to(x.dtype)


class HyperResidual(Residual):
    """One sub-layer on n streams: x ← H_res·x + H_postᵀ ⊗ F(Norm(H_pre·x)).

             x (n streams) ──► H_pre· ──► Norm ── F ──┐
               │                                     ⊗ H_post
               └──────────► H_res· ─────────────────(+)──► x' (n streams)

    `mixing` gives the three maps (static, dynamic or mHC's); `mix` keeps the last forward's H_res, (…, n, n)
    detached, for diagnostics."""

    def __init__(self, sublayer: nn.Module, in_norm: nn.Module, mixing: nn.Module):
        super().__init__(sublayer, in_norm=in_norm)
        self.mixing = mixing
        self.mix: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, *context: torch.Tensor) -> torch.Tensor:
        pre, post, res = self.mixing(x)
        self.mix = res.detach()
        h = (pre.unsqueeze(-1) * x).sum(-2)  # H_pre·x: (B, T, C)
        y = self.out_norm(self.sublayer(self.in_norm(h), *context))  # (B, T, C); no OutNorm: the identity
        return res @ x + post.unsqueeze(-1) * y.unsqueeze(-2)  # (B, T, n, C)

    def extra_repr(self) -> str:
        return "hyper-connection"


class DepthResidual(Residual):
    """One sub-layer over depth: it reads the attention-weighted sum of the sources, and its output either starts
    a new source (a block boundary; every sub-layer in Full AttnRes) or joins the current block's partial sum.

        sources (m) ──► DepthAttention ──► Norm ── F ──┬─► new source        (boundary)
                                                       └─► partial + F(…)    (inside a block)
    """

    def __init__(self, sublayer: nn.Module, in_norm: nn.Module, d: int, boundary: bool):
        super().__init__(sublayer, in_norm=in_norm)
        self.depth, self.boundary = DepthAttention(d), boundary

    def forward(self, sources: torch.Tensor, *context: torch.Tensor) -> torch.Tensor:
        y = self.out_norm(self.sublayer(self.in_norm(self.depth(sources)), *context)).unsqueeze(-2)  # (B, T, 1, C)
        if self.boundary:
            return torch.cat([sources, y], -2)  # the partial sum so far becomes a completed source
        return torch.cat([sources[..., :-1, :], sources[..., -1:, :] + y], -2)

    def extra_repr(self) -> str:
        return f"boundary={self.boundary}"
