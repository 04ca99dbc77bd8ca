"""`normlab sample RUN --prompt TEXT`: a trained decoder's continuation of a prompt, as text.

The run's own model (`load_model`) and its own tokenizer (the characters or bytes it trained with, kept in its
corpus.json, or an imported model's tokenizer.json) with `normlab.nn.generate`'s loop: the text a user of transformers gets from the
exported directory, which `tests/hf/test_client.py` compares token for token.
"""
from __future__ import annotations

from pathlib import Path

import torch

from normlab.device import resolve_device
from normlab.nn.generate import generate
from normlab.rundir.load import load_model


def sample_run(target: str | Path, prompt: str, max_new_tokens: int = 200, temperature: float | None = None,
               top_k: int | None = None, seed: int = 0, device: str = "cpu") -> str:
    """The prompt and its continuation; temperature None: greedy (then top_k and seed change nothing)."""
    if max_new_tokens < 0:
        raise ValueError(f"--max-new-tokens must be 0 or more (got {max_new_tokens})")
    dev = resolve_device(device)
    loaded = load_model(target, dev)
    if loaded.cfg.model.arch != "decoder":
        raise ValueError(f"{str(target)!r} is an {loaded.cfg.model.arch} run: sample continues text with a "
                         "decoder (a masked LM fills in [MASK]s; its export does, with pipeline('fill-mask'))")
    tokenizer = loaded.tokenizer()  # the ids as trained, whatever the corpus file holds now
    ids = tokenizer.encode(prompt)  # a character the run never saw: its ValueError names it
    if not ids:
        raise ValueError("--prompt is empty: the run has no start-of-text token to continue from; give some text")
    generator = torch.Generator(dev).manual_seed(seed)
    out = generate(loaded.model.eval(), torch.tensor([ids], device=dev), max_new_tokens, temperature, top_k, generator)
    return tokenizer.decode(out[0].tolist())
