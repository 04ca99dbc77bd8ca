"""The per-layer statistics, as pure functions of tensors (each is tested on hand-computed values).

Conventions: activations are (B, T, C); an optional `mask` (B, T) of 0/1 selects the
real tokens (padding excluded). Norms over a whole activation are Frobenius norms.
"""
from __future__ import annotations

import math

import torch


def _tokens(x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The selected token vectors as (N, C), in fp32 (or fp64 if given)."""
    x = x.detach()
    x = x.to(torch.promote_types(x.dtype, torch.float32))
    flat = x.reshape(-1, x.shape[-1])
    if mask is None:
        return flat
    return flat[mask.reshape(-1).bool()]


def rms(x: torch.Tensor, mask: torch.Tensor | None = None) -> float:
    """Root mean square over every element: sqrt(mean(x²))."""
    return _tokens(x, mask).pow(2).mean().sqrt().item()


def norm_ratio(f: torch.Tensor, x: torch.Tensor, mask: torch.Tensor | None = None) -> float:
    """‖f‖ / ‖x‖ (Frobenius): how large a sub-layer's contribution is next to the stream it adds to."""
    return (_tokens(f, mask).norm() / _tokens(x, mask).norm()).item()


def token_cosines(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """cos(a_t, b_t) for every selected token t, shape (N,)."""
    return torch.nn.functional.cosine_similarity(_tokens(a, mask), _tokens(b, mask), dim=-1, eps=1e-12)


def mean_cosine(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor | None = None) -> float:
    return token_cosines(a, b, mask).mean().item()


def angular_distance(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor | None = None) -> float:
    """Mean over tokens of arccos(cos(a_t, b_t))/π, in [0, 1] (Gromov et al. 2024, arXiv 2403.17887)."""
    cos = token_cosines(a, b, mask).clamp(-1.0, 1.0)
    return (torch.arccos(cos) / math.pi).mean().item()


def block_influence(block_in: torch.Tensor, block_out: torch.Tensor, mask: torch.Tensor | None = None) -> float:
    """BI = 1 − mean over tokens of cos(block input, block output) (ShortGPT, arXiv 2403.03853)."""
    return 1.0 - mean_cosine(block_in, block_out, mask)


def attention_stats(q: torch.Tensor, k: torch.Tensor, causal_mask: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-head mean entropy (nats) of the attention rows, and per-head max pre-softmax logit.

    q, k: (B, nh, T, hs). The logits are q·k/√hs, with the causal mask unless `causal_mask` is False
    (an encoder's bidirectional attention); entropy is averaged over batch and query positions.
    """
    q, k = q.detach().float(), k.detach().float()
    T, hs = q.shape[-2], q.shape[-1]
    logits = q @ k.transpose(-2, -1) / math.sqrt(hs)  # (B, nh, T, T)
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device)
    if causal_mask:
        causal = causal.tril()
    max_logit = logits.masked_fill(~causal, float("-inf")).amax(dim=(0, 2, 3))  # (nh,)
    logp = torch.log_softmax(logits.masked_fill(~causal, float("-inf")), dim=-1)
    p_logp = torch.where(causal, logp.exp() * logp, torch.zeros((), device=q.device))
    entropy = -p_logp.sum(-1).mean(dim=(0, 2))  # (nh,)
    return entropy, max_logit


def logit_stats(logits: torch.Tensor) -> dict[str, float]:
    """Output logits: RMS, max, and the mean log-partition z = log Σ exp(logits)."""
    flat = logits.detach().float().reshape(-1, logits.shape[-1])
    return {
        "logits_rms": flat.pow(2).mean().sqrt().item(),
        "logits_max": flat.max().item(),
        "log_partition": torch.logsumexp(flat, dim=-1).mean().item(),
    }
