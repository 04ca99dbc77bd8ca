"""The models: a single-stack language model (decoder-only GPT, or a BERT-style encoder) and an
encoder–decoder, whose normalization placement and normalizer come from the config.

    GPT / encoder:    tokens ─► wte + wpe ─► dropout ─► [embed Norm] ─► Block × L ─► [final Norm] ─► head
    encoder–decoder:  source ─► (as above, bidirectional, no head) ─► m
                      target ─► wte + dec_wpe ─► [embed Norm] ─► DecoderBlock(m) × M ─► [final Norm] ─► head
"""
from __future__ import annotations

from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from normlab.nn.block import Block, norm_factory
from normlab.nn.config import ModelConfig
from normlab.nn.init import embed_scale, init_weights
from normlab.nn.schemes import Branch, build_scheme

IGNORE = -100  # a target that is not scored (a masked LM scores only the masked positions)


def _check_vocab(cfg: ModelConfig) -> None:
    if cfg.vocab_size is None:
        raise ValueError("ModelConfig.vocab_size is unset; take it from the tokenizer (tokenizer.vocab_size)")


def run_block(model: nn.Module, block: nn.Module, *args: torch.Tensor) -> torch.Tensor:
    """block(*args), recomputed in the backward pass when the model checkpoints activations (training only)."""
    if getattr(model, "checkpoint_blocks", False) and model.training and torch.is_grad_enabled():
        return checkpoint(block, *args, use_reentrant=False)  # dropout's RNG state is saved and replayed
    return block(*args)


def learnable(value: float) -> nn.Parameter:
    """A learnable scalar (DyT's and Derf's embedding factor, `shared_scale`): 0-dimensional, so AdamW does not
    decay it (normlab.train.optim), as nanoGPT's optimizer groups in Derf's code do not."""
    return nn.Parameter(torch.tensor(float(value)))


def embed(model: nn.Module, tokens: torch.Tensor, wpe: nn.Embedding | None, embed_norm: nn.Module,
          what: str = "sequence") -> torch.Tensor:
    """Token + learned position embeddings (none with rotary positions), dropout, and the embedding norm
    (if any): (B, T, C)."""
    T = tokens.size(1)
    if T > model.cfg.block_size:
        raise ValueError(f"{what} length {T} exceeds block_size {model.cfg.block_size}")
    x = model.wte(tokens)
    if wpe is None:  # rotary positions: no table
        x = x * model.embed_scale
    elif model.cfg.embed_scale_positions:  # Derf's (wte + wpe)·s
        x = (x + wpe(torch.arange(T, device=tokens.device))) * model.embed_scale
    else:
        x = x * model.embed_scale + wpe(torch.arange(T, device=tokens.device))
    return embed_norm(model.drop(x))


class HeadTransform(nn.Module):
    """BERT's masked-LM head before its output projection (Devlin et al. 2019, arXiv 1810.04805, and its
    released code): dense d → d, GELU, norm."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.gelu_approximate = cfg.gelu_approximate
        self.norm = norm_factory(cfg, cfg.d_model)()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(F.gelu(self.dense(x), approximate=self.gelu_approximate))


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the scored targets (those ≠ IGNORE), in fp32."""
    return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.reshape(-1), ignore_index=IGNORE)


class GPT(nn.Module):
    """One stack with token + learned absolute position embeddings: a causal LM (arch = decoder, GPT) or,
    with arch = encoder, a bidirectional masked LM (BERT-style; targets IGNORE where not masked)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        _check_vocab(cfg)
        self.cfg = cfg
        part = "encoder" if cfg.arch == "encoder" else "decoder"
        self.scheme = build_scheme(cfg.scheme, cfg.n_layer, cfg.scheme_options, cfg.stacks()[part])
        make = norm_factory(cfg, cfg.d_model)
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        # the token embedding's factor: √d under the xiong recipe (fairseq), a learned scalar from √d (DyT, Derf), else 1
        self.embed_scale = learnable(embed_scale(cfg)) if cfg.learned_embed_scale else embed_scale(cfg)
        self.wpe = nn.Embedding(cfg.block_size, cfg.d_model) if cfg.positions == "learned" else None
        self.drop = nn.Dropout(cfg.dropout)
        self.embed_norm = make() if cfg.resolved_embed_norm() else nn.Identity()
        self.blocks = nn.ModuleList(Block(cfg, layer, self.scheme, causal=cfg.arch == "decoder")
                                    for layer in range(cfg.n_layer))
        self.residual_state = self.scheme.residual_state(cfg.d_model)  # the residual state's entry and exit (nn/residual.py)
        self.final_norm = self.scheme.final(make) if cfg.resolved_final_norm() else nn.Identity()
        self.head_transform = HeadTransform(cfg) if cfg.head_transform else nn.Identity()
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=cfg.head_bias)
        self.logit_scale = self.scheme.logit_scale(cfg.vocab_size, cfg.d_model)  # nGPT's s_z; else nothing
        if cfg.tie_weights:
            self.lm_head.weight = self.wte.weight  # Press & Wolf 2017, arXiv 1608.05859
        self.init_record = init_weights(self, cfg, self.scheme)
        self.project_weights()
        if self.scheme.on_sphere:
            self.init_record["sphere"] = ("then every embedding-dimension vector of the embeddings and projections "
                                          "normalized to unit length (nGPT), again after every optimizer step")

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        """Logits (B, T, vocab) and, given targets, the mean cross-entropy."""
        logits = self.logit_scale(self.lm_head(self.head_transform(self.hidden(idx))))  # (B, T, vocab)
        if self.cfg.logit_softcap is not None:  # Gemma 2: c·tanh(logits / c)
            logits = torch.tanh(logits / self.cfg.logit_softcap) * self.cfg.logit_softcap
        return logits, (None if targets is None else cross_entropy(logits, targets))

    def project_weights(self) -> None:
        """Put the weights where the scheme keeps them (nGPT: on the unit sphere); the trainer calls it after
        every optimizer step. Nothing for every other scheme."""
        self.scheme.project(self)

    def hidden(self, idx: torch.Tensor) -> torch.Tensor:
        """The last hidden states (B, T, C): the stream after the last block and the final norm, if any."""
        x = self.residual_state.enter(embed(self, idx, self.wpe, self.embed_norm))  # (B, T, C), or n streams / sources
        for block in self.blocks:
            x = run_block(self, block, x)
        return self.final_norm(self.residual_state(x))  # the state left: streams summed, sources attended

    def projections(self) -> Iterator[tuple[str, torch.Tensor]]:
        """(role, weight) of every block projection: q, k, v, out, ffn_in, ffn_out."""
        for block in self.blocks:
            for residual in block.sublayers():
                yield from residual.sublayer.projections()

    def stream_norms(self) -> dict[str, int]:
        """{module name: the point of the residual stream it reads} for every norm on the stream: 0 is the
        embedding, k the stream between sub-layers k − 1 and k (attention and MLP of each block in turn), the
        last the input of the head. A sub-layer's input norm reads point k, a post-norm after sub-layer k
        writes point k + 1; branch norms (a sandwich's output norm) read no point of the stream and are not
        listed. A swap of placement gives a new norm the gains of the old one at its point."""
        points = {} if isinstance(self.embed_norm, nn.Identity) else {"embed_norm": 0}
        for i, block in enumerate(self.blocks):
            for j, (name, residual) in enumerate((("attn", block.attn), ("mlp", block.mlp))):
                k = 2 * i if isinstance(residual, Branch) else 2 * i + j  # a parallel block's branches read its input
                if not isinstance(residual.in_norm, nn.Identity):
                    points[f"blocks.{i}.{name}.in_norm"] = k
                if not isinstance(residual.post_norm, nn.Identity):
                    points[f"blocks.{i}.{name}.post_norm"] = k + 1
        if not isinstance(self.final_norm, nn.Identity):
            points["final_norm"] = 2 * len(self.blocks)
        return points

    def stack_of(self, layer: int) -> str:
        """Which stack block `layer` of `blocks` belongs to (diagnostics label layers with it)."""
        return "encoder" if self.cfg.arch == "encoder" else "decoder"

    def num_params(self, non_embedding: bool = True) -> int:
        """Parameter count; by default without the position embedding (as nanoGPT)."""
        n = sum(p.numel() for p in self.parameters())
        return n - self.wpe.weight.numel() if non_embedding and self.wpe is not None else n


class EncoderDecoder(nn.Module):
    """An encoder (bidirectional, N = n_layer blocks) and a decoder (causal self-attention, cross-attention to
    the encoder's output, M = n_dec_layer blocks), sharing the token embedding with the head (as T5 and BART).

    `forward(source, targets)` trains with teacher forcing: the decoder reads BOS + targets[:-1] and predicts
    targets. The scheme is built once per stack: DeepNorm's α and β differ between the two (DeepNet Table 1).
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        _check_vocab(cfg)
        self.cfg = cfg
        stacks = cfg.stacks()
        self.enc_scheme = build_scheme(cfg.scheme, stacks["encoder"].depth, cfg.scheme_options, stacks["encoder"])
        self.scheme = build_scheme(cfg.scheme, stacks["decoder"].depth, cfg.scheme_options, stacks["decoder"])
        make = norm_factory(cfg, cfg.d_model)
        self.bos = cfg.vocab_size - 1  # the objective's last special token starts every decoder input
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.embed_scale = embed_scale(cfg)
        self.wpe = nn.Embedding(cfg.block_size, cfg.d_model)  # encoder positions
        self.dec_wpe = nn.Embedding(cfg.block_size, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.enc_embed_norm = make() if cfg.resolved_embed_norm() else nn.Identity()
        self.embed_norm = make() if cfg.resolved_embed_norm() else nn.Identity()
        self.encoder = nn.ModuleList(Block(cfg, layer, self.enc_scheme, causal=False) for layer in range(cfg.n_layer))
        self.enc_final_norm = self.enc_scheme.final(make) if cfg.resolved_final_norm() else nn.Identity()
        self.decoder = nn.ModuleList(Block(cfg, layer, self.scheme, causal=True, cross=True)
                                     for layer in range(cfg.resolved_n_dec_layer()))
        self.final_norm = self.scheme.final(make) if cfg.resolved_final_norm() else nn.Identity()
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_weights:
            self.lm_head.weight = self.wte.weight
        self.init_record = init_weights(self, cfg, self.scheme, self.enc_scheme)

    def project_weights(self) -> None:
        """As GPT's (no scheme that moves weights is defined for an encoder–decoder: nothing)."""
        self.scheme.project(self)

    @property
    def blocks(self) -> list[Block]:
        """Encoder blocks, then decoder blocks (diagnostics and the layer-skip ablation walk them in order)."""
        return [*self.encoder, *self.decoder]

    def stack_of(self, layer: int) -> str:
        return "encoder" if layer < len(self.encoder) else "decoder"

    def encode(self, source: torch.Tensor) -> torch.Tensor:
        m = embed(self, source, self.wpe, self.enc_embed_norm, "source")  # (B, S, C)
        for block in self.encoder:
            m = run_block(self, block, m)
        return self.enc_final_norm(m)

    def decode(self, inputs: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        x = embed(self, inputs, self.dec_wpe, self.embed_norm, "target")  # (B, T, C)
        for block in self.decoder:
            x = run_block(self, block, x, memory)
        return self.lm_head(self.final_norm(x))  # (B, T, vocab)

    def forward(self, source: torch.Tensor, targets: torch.Tensor | None = None):
        """Logits of every target position and, given targets, the mean cross-entropy. Without targets the
        decoder reads BOS + source[:-1] (the reconstruction of an uncorrupted source: a shape check)."""
        given = source if targets is None else targets
        inputs = torch.cat([torch.full_like(given[:, :1], self.bos), given[:, :-1]], dim=1)  # shift right
        logits = self.decode(inputs, self.encode(source))
        return logits, (None if targets is None else cross_entropy(logits, targets))

    def projections(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Decoder projections (the scheme's init gains are the decoder's)."""
        for block in self.decoder:
            for residual in block.sublayers():
                yield from residual.sublayer.projections()

    def encoder_projections(self) -> Iterator[tuple[str, torch.Tensor]]:
        for block in self.encoder:
            for residual in block.sublayers():
                yield from residual.sublayer.projections()

    def num_params(self, non_embedding: bool = True) -> int:
        n = sum(p.numel() for p in self.parameters())
        return n - self.wpe.weight.numel() - self.dec_wpe.weight.numel() if non_embedding else n


def build_model(cfg: ModelConfig | dict) -> nn.Module:
    """Build a model from a `ModelConfig` (or a dict of its fields): GPT for decoder and encoder,
    EncoderDecoder for encoder-decoder."""
    if isinstance(cfg, dict):
        cfg = ModelConfig(**cfg)
    return EncoderDecoder(cfg) if cfg.arch == "encoder-decoder" else GPT(cfg)
