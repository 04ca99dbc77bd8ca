"""A decoder-only GPT whose normalization placement and normalizer come from its config.

    tokens ─► wte + wpe ─► dropout ─► [embed Norm] ─► Block × L ─► [final Norm] ─► head ─► logits
"""
from __future__ import annotations

from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from normlab.nn.block import Block, norm_factory
from normlab.nn.config import ModelConfig
from normlab.nn.init import init_weights
from normlab.nn.schemes import build_scheme


class GPT(nn.Module):
    """GPT-style causal language model (token + learned absolute position embeddings)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if cfg.vocab_size is None:
            raise ValueError("ModelConfig.vocab_size is unset; take it from the tokenizer (tokenizer.vocab_size)")
        self.cfg = cfg
        self.scheme = build_scheme(cfg.scheme, cfg.n_layer, cfg.scheme_options)
        make = norm_factory(cfg, cfg.d_model)
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.block_size, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.embed_norm = make() if self.scheme.embed_norm else nn.Identity()
        self.blocks = nn.ModuleList(Block(cfg, layer, self.scheme) for layer in range(cfg.n_layer))
        self.final_norm = make() if cfg.resolved_final_norm() else nn.Identity()
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_weights:
            self.lm_head.weight = self.wte.weight  # Press & Wolf 2017, arXiv 1608.05859
        self.init_record = init_weights(self, cfg, self.scheme)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        """Logits (B, T, vocab) and, given targets, the mean cross-entropy."""
        B, T = idx.shape
        if T > self.cfg.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size {self.cfg.block_size}")
        pos = torch.arange(T, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))  # (B, T, C)
        x = self.embed_norm(x)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.final_norm(x))  # (B, T, vocab)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.reshape(-1))
        return logits, loss

    def projections(self) -> Iterator[tuple[str, torch.Tensor]]:
        """(role, weight) of every block projection: q, k, v, out, ffn_in, ffn_out."""
        for block in self.blocks:
            yield from block.attn.sublayer.projections()
            yield from block.mlp.sublayer.projections()

    def num_params(self, non_embedding: bool = True) -> int:
        """Parameter count; by default without the position embedding (as nanoGPT)."""
        n = sum(p.numel() for p in self.parameters())
        return n - self.wpe.weight.numel() if non_embedding else n


def build_model(cfg: ModelConfig | dict) -> GPT:
    """Build a GPT from a `ModelConfig` (or a dict of its fields)."""
    if isinstance(cfg, dict):
        cfg = ModelConfig(**cfg)
    return GPT(cfg)
