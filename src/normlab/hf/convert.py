"""A Hugging Face checkpoint as a normlab model: `from_hf(path)`.

The family's adapter (`normlab.hf.families`, one module each) says how its config.json reads as a normlab
`ModelConfig` (its `facts`, and `settings` for the rest), which checkpoint tensors become which normlab
parameter (its tensor map, read forward here), and which tensors it leaves out on purpose, with why.
Nothing else is read: every tensor of the checkpoint is either used or listed as ignored, or the import
fails, so a weight can never be skipped in silence. Weights are read by `normlab.hf.files` (safetensors, or
a `.bin` through torch's weights-only unpickler); no code from the directory runs, nothing is downloaded.
`normlab import-hf --help` lists the families.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from normlab.hf.adapter import Adapter, Checkpoint, ConfigJson, UnsupportedModel
from normlab.hf.families import by_model_type
from normlab.hf.files import HFDirError, read_config, read_weights
from normlab.nn.config import ModelConfig
from normlab.nn.model import build_model

# model types normlab knows it cannot read yet, and what each lacks (a test keeps every one unregistered)
MISSING = {
    "gemma": "an adapter: Gemma 1 is Pre-LN, and normlab reads its (1 + w) norms and √d embeddings only in "
             "Gemma 2's sandwich layout",
    "gemma3": "Gemma-3's local and global layers with their dual RoPE bases",
    "gemma3_text": "Gemma-3's local and global layers with their dual RoPE bases",
    "gptj": "interleaved (rotate-every-two) rotary embeddings, and a bias on the MLP but not on attention",
    "falcon": "an adapter (its fused query/key/value rows are grouped by key/value head; some Falcons use ALiBi)",
    "phi": "an adapter (its parts, a parallel block with one shared LayerNorm and partial rotary embeddings, exist)",
    "cohere": "interleaved rotary embeddings and a logit scale",
    "t5": "an encoder-decoder with relative position buckets",
    "bart": "an encoder-decoder with offset learned positions",
    "opt": "OPT's offset learned positions",
    "bloom": "ALiBi position biases",
    "roberta": "RoBERTa's padding-offset positions",
}


@dataclass
class Imported:
    """A normlab model built from a checkpoint, and what the import did with every tensor."""

    model: nn.Module
    config: ModelConfig
    family: str
    hf_config: dict[str, Any]
    used: list[str]
    ignored: dict[str, str]  # checkpoint tensor -> why it has no normlab counterpart
    notes: list[str] = field(default_factory=list)  # settings normlab reads differently, in words

    def record(self) -> dict[str, Any]:
        return {"family": self.family, "model_type": self.hf_config.get("model_type"), "used": len(self.used),
                "ignored": self.ignored, "notes": self.notes}


def import_hf(path: str | Path) -> Imported:
    """Build the normlab model of a local Hugging Face directory, with its weights (see the module's doc)."""
    path = Path(path)
    hf = read_config(path)
    adapter = _adapter(hf.get("model_type"), path)
    reader = ConfigJson(hf, path, adapter.family)
    weights = read_weights(path)
    checkpoint = Checkpoint(weights, _base_prefix(adapter, weights, path), path, adapter.family)
    cfg = _model_config(adapter, reader, any(k.startswith("cls.predictions.transform") for k in weights))
    state = {m.ours: m.codec.read([checkpoint.fetch(n) for n in m.theirs], cfg) for m in adapter.maps(cfg)}
    adapter.read_extra(cfg, checkpoint, reader)
    _head(cfg, checkpoint, state, adapter.head)
    ignored = _ignored(adapter, checkpoint)
    model = _load(cfg, state, path)
    return Imported(model, cfg, adapter.family, hf, checkpoint.used, ignored, reader.notes)


def _adapter(model_type: str, path: Path) -> Adapter:
    adapters = by_model_type()
    if model_type not in adapters:
        lacks = f": normlab lacks {MISSING[model_type]}" if model_type in MISSING else ""
        raise UnsupportedModel(path / "config.json", f"model_type {model_type!r} cannot be imported{lacks}; "
                               f"importable: {', '.join(sorted(adapters))}")
    return adapters[model_type]


def _model_config(adapter: Adapter, reader: ConfigJson, heads: bool) -> ModelConfig:
    try:
        return adapter.model_config(reader, heads)
    except (TypeError, ValueError) as e:  # a setting missing (None) or out of range (pydantic's ValidationError)
        if isinstance(e, HFDirError):
            raise
        raise HFDirError(reader.path / "config.json", f"a setting a {adapter.family} model needs is missing or "
                                                      f"invalid: {_first_line(e)}") from None


def _first_line(e: Exception) -> str:
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return "; ".join(lines[:3]) if lines else type(e).__name__


def from_hf(path: str | Path) -> nn.Module:
    """The normlab model of a local Hugging Face directory (`import_hf` for what was used and left out)."""
    return import_hf(path).model


def _base_prefix(adapter: Adapter, weights: dict[str, torch.Tensor], path: Path) -> str:
    for prefix in adapter.prefixes:
        if prefix + adapter.embedding in weights:
            return prefix
    raise HFDirError(path, f"no {adapter.embedding!r} in the checkpoint (under the prefixes "
                           f"{', '.join(repr(p) for p in adapter.prefixes)}): not a {adapter.family} checkpoint")


def _head(cfg: ModelConfig, checkpoint: Checkpoint, state: dict, head: str) -> None:
    """The output projection (the family's `head`): tied to the embedding (a saved copy must equal it), or the
    checkpoint's own."""
    if cfg.tie_weights:
        if checkpoint.has(head) and not torch.equal(checkpoint.fetch(head), state["wte.weight"]):
            # a tied head saved anyway must be the embedding
            raise HFDirError(checkpoint.path, f"{head!r} differs from the token embedding, but config.json ties them")
        return
    if not checkpoint.has(head):
        raise HFDirError(checkpoint.path, "config.json unties the output head (tie_word_embeddings = false), but "
                                          f"the checkpoint has no {head}")
    state["lm_head.weight"] = checkpoint.fetch(head)


def _ignored(adapter: Adapter, checkpoint: Checkpoint) -> dict[str, str]:
    """Every checkpoint tensor not used must be one the family leaves out on purpose."""
    ignored, unknown, base = {}, [], checkpoint.base
    for key in sorted(set(checkpoint.weights) - set(checkpoint.used)):
        name = key[len(base):] if key.startswith(base) else key
        why = next((w for pattern, w in adapter.ignore.items() if re.fullmatch(pattern, name)), None)
        if why is None:
            unknown.append(key)
        else:
            ignored[key] = why
    if unknown:
        more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
        raise UnsupportedModel(checkpoint.path, f"{len(unknown)} tensor(s) of the checkpoint have no place in a "
                                                f"normlab {adapter.family} model: {', '.join(unknown[:3])}{more}")
    return ignored


def _load(cfg: ModelConfig, state: dict[str, torch.Tensor], path: Path) -> nn.Module:
    model = build_model(cfg)
    ours = model.state_dict()
    for key, tensor in state.items():
        if key not in ours or ours[key].shape != tensor.shape:
            want = tuple(ours[key].shape) if key in ours else "no such parameter"
            raise HFDirError(path, f"a tensor for {key} has shape {tuple(tensor.shape)}; the model of its "
                                   f"config.json needs {want}")
    missing = set(ours) - set(state) - ({"lm_head.weight"} if cfg.tie_weights else set())
    if missing:
        raise HFDirError(path, f"nothing in the checkpoint for {', '.join(sorted(missing)[:3])}")
    model.load_state_dict(state, strict=False)
    return model.eval()
