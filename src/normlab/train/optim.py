"""AdamW with weight decay on matrices only, and the learning-rate schedules."""
from __future__ import annotations

import math

import torch
from torch import nn

from normlab.config import TrainConfig


def build_optimizer(model: nn.Module, cfg: TrainConfig, device_type: str) -> torch.optim.AdamW:
    """AdamW; matrices (embeddings, linear weights) decay, vectors and scalars (norm gains, biases) do not."""
    params = [p for p in model.parameters() if p.requires_grad]  # tied weights appear once
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    fused = device_type == "cuda"  # the fused CUDA kernel; on CPU torch picks its default path (fused CPU AdamW is unmeasured here)
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), fused=fused)


def learning_rate(step: int, cfg: TrainConfig) -> float:
    """The learning rate at 0-based `step`: linear warmup, then the schedule.

    Warmup ramps as lr·(step+1)/(warmup+1) (as nanoGPT). After it:
    constant: lr;  cosine: min_lr + ½(lr−min_lr)(1+cos(π·progress)), min_lr after decay_steps;
    inverse_sqrt: lr·sqrt(max(warmup,1)/max(step,1)) (Vaswani et al. 2017, peak at the end of warmup).
    """
    w = cfg.warmup_steps
    if step < w:
        return cfg.lr * (step + 1) / (w + 1)
    if cfg.schedule == "constant":
        return cfg.lr
    if cfg.schedule == "inverse_sqrt":
        return cfg.lr * math.sqrt(max(w, 1) / max(step, 1))
    decay_steps = cfg.decay_steps or cfg.steps
    if step >= decay_steps:
        return cfg.min_lr
    progress = (step - w) / max(decay_steps - w, 1)
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1.0 + math.cos(math.pi * progress))
