"""AdamW with weight decay on matrices only, and the learning-rate schedules."""
from __future__ import annotations

import math

import torch
from torch import nn

from normlab.config import TrainConfig


def exempt_from_decay(model: nn.Module) -> set[int]:
    """ids of the parameters of every module that says `no_weight_decay = True` (nGPT's scaling vectors s_qk,
    s_u, s_v, s_z and eigen learning rates; hyper-connections' static maps), whatever their shape, down to a
    sub-module that says `no_weight_decay = False` again (a dynamic hyper-connection's W, which HC §4 decays)."""
    exempt: set[int] = set()

    def walk(module: nn.Module, inherited: bool) -> None:
        flag = getattr(module, "no_weight_decay", None)
        here = inherited if flag is None else bool(flag)
        if here:
            exempt.update(id(p) for p in module.parameters(recurse=False))
        for child in module.children():
            walk(child, here)

    walk(model, False)
    return exempt


def build_optimizer(model: nn.Module, cfg: TrainConfig, device_type: str) -> torch.optim.AdamW:
    """AdamW; matrices (embeddings, linear weights) decay; vectors and scalars (norm gains, biases) and the
    parameters of modules that opt out (`exempt_from_decay`) do not; `weight_decay_on = "every parameter"`:
    everything decays (DyT's LLaMA trainer)."""
    params = [p for p in model.parameters() if p.requires_grad]  # tied weights appear once
    exempt = exempt_from_decay(model)
    every = cfg.weight_decay_on == "every parameter"
    decays = [every or (p.dim() >= 2 and id(p) not in exempt) for p in params]
    groups = [
        {"params": [p for p, d in zip(params, decays) if d], "weight_decay": cfg.weight_decay},
        {"params": [p for p, d in zip(params, decays) if not d], "weight_decay": 0.0},
    ]
    # the fused CUDA kernel on a GPU; on a CPU the multi-tensor (foreach) path, which torch picks only for CUDA by
    # default: the same updates bit for bit as the one-tensor loop, in 0.69x its time for the standard preset's
    # 4-layer model on one core (benchmarks/cpu_step_costs.py)
    fused = device_type == "cuda"
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), fused=fused, foreach=not fused)


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


def clip_stacked_grads(stacks: list[torch.Tensor], max_norms: list[float]) -> torch.Tensor:
    """Per member k: the global gradient norm over every stack's slice k (returned, before clipping), then
    `clip_grad_norm_`'s rule with member k's own max norm (inf: no clipping, `train.grad_clip = 'off'`)."""
    grads = [s.grad for s in stacks if s.grad is not None]
    K = len(max_norms)
    norms = torch.stack([g.reshape(K, -1).float().norm(dim=1) for g in grads], dim=1).norm(dim=1)  # (K,)
    limit = torch.tensor(max_norms, device=norms.device)
    coef = (limit / (norms + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.view(-1, *([1] * (g.dim() - 1))).to(g.dtype))
    return norms


class StackedAdamW:
    """AdamW over a `StackedGPT`'s stacks, each member with its own lr and weight decay.

    It does what `torch.optim.AdamW` (single-tensor path) does to one member's parameter, with
    the per-member scalars as (K, 1, …) tensors; `exp_avg · (−lr/bc₁)` is formed first and then
    divided, which is the order of torch's `addcdiv` kernel. Member states are read from and
    written to each member's own `torch.optim.AdamW`, so a member's checkpoint is a single run's.
    """

    def __init__(self, pairs: list, beta1: float, beta2: float, eps: float = 1e-8):
        self.pairs = pairs  # (stack (K, …), [member parameter k]) from StackedGPT.pairs()
        self.beta1, self.beta2, self.eps = beta1, beta2, eps
        self.exp_avg = [torch.zeros_like(s) for s, _ in pairs]
        self.exp_avg_sq = [torch.zeros_like(s) for s, _ in pairs]
        self.steps = 0

    def load_members(self, optimizers: list[torch.optim.AdamW]) -> None:
        """Take each member's AdamW moments (those of a resumed checkpoint) into the stacks."""
        for i, (_, params) in enumerate(self.pairs):
            for k, (p, opt) in enumerate(zip(params, optimizers)):
                state = opt.state.get(p)
                if state:
                    self.exp_avg[i][k].copy_(state["exp_avg"])
                    self.exp_avg_sq[i][k].copy_(state["exp_avg_sq"])
                    self.steps = int(state["step"])

    def store_member(self, k: int, optimizer: torch.optim.AdamW) -> None:
        """Write member k's moments into its own AdamW (for its checkpoint)."""
        if self.steps == 0:
            return
        for i, (_, params) in enumerate(self.pairs):
            optimizer.state[params[k]] = {"step": torch.tensor(float(self.steps)),
                                          "exp_avg": self.exp_avg[i][k].clone(),
                                          "exp_avg_sq": self.exp_avg_sq[i][k].clone()}

    def keep(self, index: list[int]) -> None:
        """Keep the moments of the members in `index` (as `StackedGPT.keep`)."""
        ix = torch.tensor(index, device=self.exp_avg[0].device)
        self.exp_avg = [m.index_select(0, ix) for m in self.exp_avg]
        self.exp_avg_sq = [v.index_select(0, ix) for v in self.exp_avg_sq]

    @torch.no_grad()
    def step(self, lrs: list[float], weight_decays: list[float]) -> None:
        self.steps += 1
        bc1, bc2_sqrt = 1 - self.beta1 ** self.steps, (1 - self.beta2 ** self.steps) ** 0.5
        for (stack, _), m, v in zip(self.pairs, self.exp_avg, self.exp_avg_sq):
            if stack.grad is None:
                continue
            shape = (-1,) + (1,) * (stack.dim() - 1)
            decays = weight_decays if stack.dim() >= 3 else [0.0] * len(lrs)  # matrices only, as build_optimizer
            decay = torch.tensor([1 - lr * wd for lr, wd in zip(lrs, decays)], dtype=stack.dtype,
                                 device=stack.device).view(shape)
            step_size = torch.tensor([-lr / bc1 for lr in lrs], dtype=stack.dtype, device=stack.device).view(shape)
            grad = stack.grad
            stack.mul_(decay)
            m.lerp_(grad, 1 - self.beta1)
            v.mul_(self.beta2).addcmul_(grad, grad, value=1 - self.beta2)
            denom = (v.sqrt() / bc2_sqrt).add_(self.eps)
            stack.addcdiv_(m * step_size, denom)
