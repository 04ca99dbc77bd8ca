"""What a model is trained to predict from a corpus, per architecture; each draws its batches from the
run's data generator, so a run's masks are as deterministic and resumable as its windows.

    decoder          next-token LM: x = a window, y = the window shifted by one
    encoder          BERT's masked LM (Devlin et al. 2019, arXiv 1810.04805, §3.1): 15 % of positions are
                     chosen; 80 % of those become MASK, 10 % a random token, 10 % stay; only they are scored
    encoder-decoder  BART-style denoising (Lewis et al. 2020, arXiv 1910.13461, §2.2): spans of 3 tokens
                     starting at 5 % of positions (≈ 15 % of tokens) become MASK in the source, one MASK per
                     token, so source and target keep the window's length and batches need no padding; the
                     decoder reconstructs the whole window. Why not T5's sentinels: variable-length targets
                     would need padding and a sentinel vocabulary for no difference to what normlab measures

Special tokens sit after the text's own: MASK = text vocab, BOS = text vocab + 1 (encoder–decoder only).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from normlab.data.corpus import Corpus

IGNORE = -100  # a target position that is not scored (as torch's cross_entropy ignore_index)


@dataclass
class Objective:
    name: ClassVar[str] = ""
    n_special: ClassVar[int] = 0
    plateau_what: ClassVar[str] = "corpus's unigram cross-entropy"
    text_vocab: int = 0
    own_mask: int | None = None  # a tokenizer's own mask token (an imported BERT's [MASK]): no special added

    @property
    def mask_id(self) -> int:
        return self.text_vocab if self.own_mask is None else self.own_mask

    @property
    def specials(self) -> int:
        """Tokens this objective adds after the text's own."""
        return 0 if self.own_mask is not None and self.n_special == 1 else self.n_special

    def batch(self, corpus: Corpus, split: str, batch_size: int, block_size: int, generator: torch.Generator):
        raise NotImplementedError

    def plateau(self, corpus: Corpus) -> float:
        """The loss of a model that learned token frequencies and nothing else, under this objective."""
        return corpus.unigram_cross_entropy()

    def record(self) -> dict[str, object]:
        return {"name": self.name, "special_tokens": self.n_special}


class NextToken(Objective):
    name = "next-token"

    def batch(self, corpus, split, batch_size, block_size, generator):
        return corpus.batch(split, batch_size, block_size, generator)


class MaskedLM(Objective):
    name, n_special = "masked-lm (BERT 15 %, 80/10/10)", 1
    RATE, AS_MASK, AS_RANDOM = 0.15, 0.8, 0.1

    def batch(self, corpus, split, batch_size, block_size, generator):
        window, _ = corpus.batch(split, batch_size, block_size, generator)  # (B, T)
        return self.corrupt(window, generator)

    def corrupt(self, window: torch.Tensor, generator: torch.Generator):
        """(input with the chosen positions masked, targets: the original there, IGNORE elsewhere)."""
        chosen = torch.rand(window.shape, generator=generator) < self.RATE
        chosen[:, 0] |= ~chosen.any(dim=1)  # every row scores at least one position
        roll = torch.rand(window.shape, generator=generator)
        random_tokens = torch.randint(self.text_vocab, window.shape, generator=generator)
        x = torch.where(chosen & (roll < self.AS_MASK), self.mask_id, window)
        x = torch.where(chosen & (roll >= self.AS_MASK) & (roll < self.AS_MASK + self.AS_RANDOM), random_tokens, x)
        y = torch.where(chosen, window, IGNORE)
        return x, y

    def record(self):
        return {**super().record(), "rate": self.RATE, "mask/random/keep": [0.8, 0.1, 0.1]}


class Denoising(Objective):
    name, n_special = "denoising (BART-style span masking)", 2
    SPAN, START_RATE = 3, 0.05

    def masked(self, shape, generator: torch.Generator) -> torch.Tensor:
        starts = torch.rand(shape, generator=generator) < self.START_RATE
        starts[:, 0] |= ~starts.any(dim=1)  # every row has something to reconstruct
        covered = starts.clone()
        for shift in range(1, self.SPAN):
            covered[:, shift:] |= starts[:, :-shift]
        return covered

    def batch(self, corpus, split, batch_size, block_size, generator):
        window, _ = corpus.batch(split, batch_size, block_size, generator)  # (B, T)
        return self.corrupt(window, generator)

    def corrupt(self, window: torch.Tensor, generator: torch.Generator):
        """(the window with its spans masked: the source, the window: the target)."""
        source = torch.where(self.masked(window.shape, generator), self.mask_id, window)
        return source, window

    def record(self):
        return {**super().record(), "span": self.SPAN, "start_rate": self.START_RATE}


OBJECTIVES: dict[str, type[Objective]] = {"decoder": NextToken, "encoder": MaskedLM, "encoder-decoder": Denoising}


def objective_for(arch: str, text_vocab: int, own_mask: int | None = None) -> Objective:
    """The objective of `arch` over a vocabulary of `text_vocab` tokens; `own_mask`: the tokenizer's own mask
    token, used by a masked LM instead of one added after the vocabulary."""
    if arch not in OBJECTIVES:
        raise ValueError(f"unknown arch {arch!r}; valid: {', '.join(OBJECTIVES)}")
    return OBJECTIVES[arch](text_vocab, own_mask if arch == "encoder" else None)
