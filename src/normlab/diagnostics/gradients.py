"""Step-0 gradients without training: what the probe records at a run's first step, for many seeds at once.

A claim about gradients at initialization (C2) needs no trained model, only the model at init and one batch,
so it can be measured over a hundred seeds for the price of a hundred forward and backward passes.
"""
from __future__ import annotations

import torch

from normlab.config import RunConfig
from normlab.data import Corpus, corpus_of
from normlab.data.vocab import Vocabulary, with_vocab
from normlab.rundir.load import build_model


def step0_block_gradients(cfg: RunConfig, corpus: Corpus | None = None) -> list[float]:
    """Each block's gradient norm (the root-sum-square over its parameters' gradients, before clipping) at step 0:
    the model of `cfg` at init (seeded by `train.seed`) on the first training batch of its data order, as the
    trainer's probe records `grad_norm/block` at step 0. On the CPU, in float32."""
    corpus = corpus or corpus_of(cfg)
    vocab = Vocabulary.of(corpus.tokenizer)
    cfg = with_vocab(cfg, vocab)
    objective = vocab.objective(cfg.model.arch)
    model = build_model(cfg)
    rng = torch.Generator().manual_seed(cfg.train.seed)  # the trainer's data order starts from this generator
    x, y = objective.batch(corpus, "train", cfg.train.batch_size, cfg.model.block_size, rng)
    _, loss = model(x, y)
    loss.backward()
    norms = []
    for block in model.blocks:
        total = sum(p.grad.detach().float().pow(2).sum().item() for p in block.parameters() if p.grad is not None)
        norms.append(total ** 0.5)
    return norms
