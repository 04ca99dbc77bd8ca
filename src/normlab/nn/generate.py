"""A decoder's continuation of a prompt, token by token: `generate(model, ids, n)`.

The loop of nanoGPT's `GPT.generate` (model.py): run the last `block_size` tokens, read the logits of the
last position, pick the next token, append. Greedy picks the argmax; otherwise the logits are divided by the
temperature, cut to the `top_k` largest, and a token is drawn from their softmax with the caller's
generator (one seed, one text). Every step recomputes the whole window (no key/value cache): slower than
transformers' `generate()`, and the same tokens, which `tests/hf/test_client.py` holds for every layout.
"""
from __future__ import annotations

import torch
from torch import nn


@torch.no_grad()
def generate(model: nn.Module, ids: torch.Tensor, max_new_tokens: int, temperature: float | None = None,
             top_k: int | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """`ids` (B, T) followed by `max_new_tokens` more; temperature None: greedy (the argmax at every step)."""
    if temperature is not None and temperature <= 0:
        raise ValueError(f"temperature must be > 0 (got {temperature}); greedy decoding takes the most likely token")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be at least 1 (got {top_k})")
    block_size = model.cfg.block_size
    for _ in range(max_new_tokens):
        logits, _ = model(ids[:, -block_size:])  # (B, T, vocab)
        ids = torch.cat([ids, _pick(logits[:, -1, :].float(), temperature, top_k, generator)], dim=1)
    return ids


def _pick(logits: torch.Tensor, temperature: float | None, top_k: int | None,
          generator: torch.Generator | None) -> torch.Tensor:
    """The next token (B, 1) from the last position's logits (B, vocab)."""
    if temperature is None:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits / temperature
    if top_k is not None and top_k < logits.size(-1):
        kth = torch.topk(logits, top_k).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
