"""Measurements that are not training runs and not timings (timings and memory are `normlab.bench`'s)."""
from __future__ import annotations

import torch

import normlab
from normlab.nn.config import ModelConfig


@torch.no_grad()
def causality(scheme: str, norm: str = "layernorm") -> dict[str, float]:
    """Largest change of logits at positions < t when every token from t on is replaced, over several t."""
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=31, block_size=16, n_layer=3, n_head=2, d_model=32, scheme=scheme, norm=norm)
    model = normlab.build_model(cfg).eval()
    g = torch.Generator().manual_seed(0)
    x = torch.randint(31, (2, 16), generator=g)
    base, _ = model(x)
    leak, reach = 0.0, float("inf")
    for t in (1, 5, 9, 15):
        y = x.clone()
        y[:, t:] = torch.randint(31, (2, 16 - t), generator=g)
        out, _ = model(y)
        leak = max(leak, (out[:, :t] - base[:, :t]).abs().max().item())
        reach = min(reach, (out[:, t] - base[:, t]).abs().max().item())
    return {"max_change_before_t": leak, "min_change_at_t": reach}
