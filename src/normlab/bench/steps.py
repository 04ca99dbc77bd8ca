"""Training-step throughput: normlab models against a plain nanoGPT-style reference.

Each variant is one model + AdamW doing the trainer's step (bf16 autocast around the
forward when precision = bf16, loss.item(), gradient clipping at 1.0, AdamW with weight
decay on matrices only). All variants of a config train on the same random token batch
and are timed interleaved (see timing.py); tokens/s is batch·context / median step time.

    reference         ReferenceGPT (reference_gpt.py): eager, fp32
    normlab           normlab.build_model, eager, norms as NORMLAB_NORM_IMPL=auto picks them
    normlab-refnorm   the same with NORMLAB_NORM_IMPL=reference (the fused kernels' share)
    normlab-compile   the same through torch.compile (the norms then are inductor's)

Peak memory: see timing.peak_step_memory_mb.
"""
from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass
from typing import Callable

import torch

from normlab.bench.reference_gpt import ReferenceGPT
from normlab.bench.timing import interleaved_samples, peak_step_memory_mb, spread_of, tensor_bytes
from normlab.nn import kernels
from normlab.nn.config import ModelConfig
from normlab.nn.model import build_model
from normlab.nn.schemes import SCHEMES


@dataclass(frozen=True)
class StepConfig:
    name: str
    n_layer: int
    n_head: int
    d_model: int
    block_size: int
    batch_size: int
    vocab_size: int = 65  # tiny Shakespeare, char level


CONFIGS = [
    # configs/nanogpt_cpu.toml: nanoGPT's documented CPU recipe
    StepConfig("nanogpt-cpu", n_layer=4, n_head=4, d_model=128, block_size=64, batch_size=12),
    # nanoGPT's "baby GPT" (config/train_shakespeare_char.py) at batch 16, dropout off
    StepConfig("baby-gpt", n_layer=6, n_head=6, d_model=384, block_size=256, batch_size=16),
]
QUICK_CONFIGS = [StepConfig("tiny", n_layer=2, n_head=2, d_model=32, block_size=16, batch_size=4)]


@dataclass
class Variant:
    impl: str
    scheme: str
    norm: str
    precision: str
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    step: Callable[[], None]


def adamw(model: torch.nn.Module, device: torch.device) -> torch.optim.AdamW:
    """The trainer's optimizer: decay on matrices only, fused on CUDA."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.99), fused=device.type == "cuda")


def make_step(model, forward, optimizer, batch, precision: str, device: torch.device, norm_impl: str | None):
    """One training step as the trainer does it."""
    x, y = batch

    def step():
        if norm_impl is not None:
            kernels.set_norm_impl(norm_impl)  # a global switch: set on every step, as variants interleave
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            _, loss = forward(x, y)
        loss.item()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def build_variants(cfg: StepConfig, schemes, norms, precisions, compile: bool, device,
                   impls: tuple[str, ...] | None = None) -> list[Variant]:
    """The reference, then every (scheme, norm, precision, impl) normlab variant, on one shared batch."""
    if compile:
        torch.compiler.reset()  # fresh compile caches for this config
        # every compiled variant recompiles GPT.forward: past dynamo's limit (8 per function)
        # the rest would silently run eager
        limit = 2 * len(schemes) * len(norms) * len(precisions)
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, limit)
    gen = torch.Generator().manual_seed(0)
    batch = tuple(torch.randint(0, cfg.vocab_size, (cfg.batch_size, cfg.block_size), generator=gen).to(device)
                  for _ in range(2))
    torch.manual_seed(0)
    ref = ReferenceGPT(cfg.vocab_size, cfg.block_size, cfg.n_layer, cfg.n_head, cfg.d_model).to(device)
    opt = adamw(ref, device)
    variants = [Variant("reference", "pre", "layernorm", "fp32", ref, opt,
                        make_step(ref, ref, opt, batch, "fp32", device, None))]
    impls = impls or ("normlab", "normlab-refnorm", *(("normlab-compile",) if compile else ()))
    unknown = set(impls) - set(NORM_IMPL_OF)
    if unknown:
        raise ValueError(f"unknown step variant(s) {sorted(unknown)}; valid: {', '.join(NORM_IMPL_OF)}")
    pairs, _ = combinations(schemes, norms)
    for (scheme, settings), precision, impl in itertools.product(pairs, precisions, impls):
        variants.append(normlab_variant(cfg, scheme, settings, precision, impl, batch, device))
    return variants


STEP_SCHEMES, STEP_NORMS = ("pre",), ("layernorm", "rmsnorm")  # bench_steps' defaults
STEP_SETTINGS = {"bias": False, "dropout": 0.0}  # every normlab variant's, as the reference's (no bias, no dropout)


def combinations(schemes, norms) -> tuple[list[tuple[str, dict]], list[dict]]:
    """The (scheme, model settings) of every scheme × normalizer the step bench times, with what a scheme fixes
    filled in (`Scheme.fit`), and {scheme, norm, skipped, why} for each pair it skips (a normalizer the scheme
    refuses) or fills (a setting of STEP_SETTINGS its paper fixes otherwise): the command prints them."""
    pairs, notes = [], []
    for scheme, norm in itertools.product(schemes, norms):
        settings, why = SCHEMES.get(scheme).fit({"norm": norm, **STEP_SETTINGS}, axes=("norm",))
        if settings is not None:
            pairs.append((scheme, settings))
        if why:
            notes.append({"scheme": scheme, "norm": norm, "skipped": settings is None, "why": why})
    return pairs, notes


# each normlab step variant and the NORMLAB_NORM_IMPL its norms run
NORM_IMPL_OF = {"normlab": "auto", "normlab-refnorm": "reference", "normlab-fastnorm": "fast", "normlab-compile": "auto"}


def normlab_variant(cfg: StepConfig, scheme, settings: dict, precision, impl, batch, device) -> Variant:
    """`settings`: the model's norm and what `combinations` fitted to the scheme."""
    torch.manual_seed(0)
    model = build_model(ModelConfig(
        vocab_size=cfg.vocab_size, block_size=cfg.block_size, n_layer=cfg.n_layer, n_head=cfg.n_head,
        d_model=cfg.d_model, scheme=scheme, **settings)).to(device)
    forward = torch.compile(model) if impl == "normlab-compile" else model
    opt = adamw(model, device)
    norm_impl = NORM_IMPL_OF[impl]
    return Variant(impl, scheme, settings["norm"], precision, model, opt,
                   make_step(model, forward, opt, batch, precision, device, norm_impl))


def bench_steps(quick: bool = False, rounds: int = 5, steps_per_sample: int = 2, compile: bool = False,
                schemes=STEP_SCHEMES, norms=STEP_NORMS, precisions=("fp32", "bf16"),
                configs: tuple[str, ...] | None = None, device: str = "cpu", clock: str = "wall",
                impls: tuple[str, ...] | None = None) -> list[dict]:
    """Rows {config, impl, scheme, norm, precision, tokens_per_s, peak_mem_mb, speedup, mem_ratio}.

    `impls` picks normlab's variants (default: normlab, normlab-refnorm, and normlab-compile with `compile`):
    normlab runs NORMLAB_NORM_IMPL=auto, -refnorm the eager reference norms, -fastnorm the fused kernels."""
    dev = torch.device(device)
    chosen = QUICK_CONFIGS if quick else CONFIGS
    if configs:
        unknown = set(configs) - {c.name for c in chosen}
        if unknown:
            raise ValueError(f"unknown step config(s) {sorted(unknown)}; valid: {', '.join(c.name for c in chosen)}")
        chosen = [c for c in chosen if c.name in configs]
    rows = []
    before = kernels.get_norm_impl()
    try:
        for cfg in chosen:
            rows += _bench_config(cfg, build_variants(cfg, schemes, norms, precisions, compile, dev, impls),
                                  rounds, steps_per_sample, dev, clock)
    finally:
        kernels.set_norm_impl(before)
    return rows


def _bench_config(cfg: StepConfig, variants: list[Variant], rounds: int, steps_per_sample: int, device,
                  clock: str) -> list[dict]:
    def repeat(step):
        def run():
            for _ in range(steps_per_sample):
                step()
        return run

    samples = interleaved_samples({i: repeat(v.step) for i, v in enumerate(variants)}, rounds,
                                  warmup=2, min_sample_s=0.0, clock=clock)
    medians = {i: statistics.median(v) for i, v in samples.items()}
    tokens = cfg.batch_size * cfg.block_size * steps_per_sample
    rows = []
    for i, v in enumerate(variants):
        state = [t for s in v.optimizer.state.values() for t in s.values()]
        persistent = tensor_bytes(v.model.parameters(), v.model.buffers(), state)
        rows.append({"config": cfg.name, "impl": v.impl, "scheme": v.scheme, "norm": v.norm,
                     "precision": v.precision, "tokens_per_s": tokens / medians[i],
                     **spread_of([tokens / t for t in samples[i]], "tokens_per_s"),
                     "samples_s": samples[i],  # per round, paired with every variant's by round
                     "peak_mem_mb": peak_step_memory_mb(v.step, device, persistent)})
    ref = rows[0]
    for row in rows:
        row["speedup"] = row["tokens_per_s"] / ref["tokens_per_s"]
        mem, ref_mem = row["peak_mem_mb"], ref["peak_mem_mb"]
        row["mem_ratio"] = mem / ref_mem if mem is not None and ref_mem else None
    return rows
