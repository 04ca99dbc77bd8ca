"""Measurements that are not training runs and not timings (timings and memory are `normlab.bench`'s)."""
from __future__ import annotations

import torch

import normlab
from normlab.nn.config import ModelConfig

CAUSAL_POSITIONS = (1, 5, 9, 15)
TRAIN_STEPS, TRAIN_LR = 20, 1e-2  # C16's "after training": enough AdamW steps to move every weight far from init


def causality(scheme: str, norm: str = "layernorm", train_steps: int = 0, **settings) -> dict[str, float]:
    """Largest change of logits at positions < t when every token from t on is replaced, over several t.

    With `train_steps`, the model is first trained that many AdamW steps on a fixed random token stream
    (causally: each position predicts the next), so the check also covers weights that are not at init.
    `settings`: other model settings (what the scheme fixes, `Scheme.fit`).
    """
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=31, block_size=16, n_layer=3, n_head=2, d_model=32, scheme=scheme, norm=norm,
                      **settings)
    model = normlab.build_model(cfg)
    g = torch.Generator().manual_seed(0)
    if train_steps:
        opt = torch.optim.AdamW(model.parameters(), lr=TRAIN_LR)
        data = torch.randint(31, (8, 17), generator=g)
        for _ in range(train_steps):
            _, loss = model(data[:, :-1], data[:, 1:])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    model.eval()
    x = torch.randint(31, (2, 16), generator=g)
    leak, reach = 0.0, float("inf")
    with torch.no_grad():
        base, _ = model(x)
        for t in CAUSAL_POSITIONS:
            y = x.clone()
            y[:, t:] = torch.randint(31, (2, 16 - t), generator=g)
            out, _ = model(y)
            leak = max(leak, (out[:, :t] - base[:, :t]).abs().max().item())
            reach = min(reach, (out[:, t] - base[:, t]).abs().max().item())
    return {"max_change_before_t": leak, "min_change_at_t": reach}
