"""One way to turn a config or a run directory into a model: fill the vocabulary (`data.vocab`), build, load
weights.

Training, `normlab check` and `normlab diagnose` all call `load_model`, so they can never
disagree on how a run's model is rebuilt.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from normlab.config import RunConfig
from normlab.data.corpus import corpus_tokenizer
from normlab.data.provenance import FILE as CORPUS_FILE, Provenance
from normlab.data.vocab import with_vocab
from normlab.nn.model import build_model as build_nn_model
from normlab.rundir import checkpoint
from normlab.rundir.layout import RunDir


@dataclass
class LoadedModel:
    cfg: RunConfig  # with model.vocab_size filled in
    model: nn.Module  # GPT (decoder, encoder) or EncoderDecoder
    checkpoint: checkpoint.Checkpoint | None  # None: the model is at init (seeded by train.seed)
    run: RunDir | None = None  # the run directory it was read from

    @property
    def step(self) -> int:
        return self.checkpoint.step if self.checkpoint else 0

    def provenance(self) -> Provenance | None:
        """What the run trained on (corpus.json), None for a run from before the record or an imported one."""
        if self.run is None or not (self.run.path / CORPUS_FILE).is_file():
            return None
        return Provenance.from_record(self.run.read_json(CORPUS_FILE))

    def tokenizer(self):
        """The tokenizer whose ids the run trained with: the one its record keeps (a corpus edited since changes
        nothing); a run without a record rebuilds it from its corpus, as before. An imported run's tokenizer is
        read from its own tokenizer/ where the absolute path in its config no longer exists (the run moved)."""
        data = self.cfg.data
        tokenizer_dir = data.tokenizer_dir
        if tokenizer_dir and not Path(tokenizer_dir).is_dir() and self.run and (self.run.path / "tokenizer").is_dir():
            tokenizer_dir = str(self.run.path / "tokenizer")
        kept = self.provenance()
        if kept is not None:
            return kept.read_tokenizer(tokenizer_dir)
        return corpus_tokenizer(data.path, data.tokenizer, data.vocab_from, tokenizer_dir)


def build_model(cfg: RunConfig, device: torch.device | str = "cpu") -> nn.Module:
    """The model of `cfg` at init, seeded by train.seed; a vocabulary left unset is its corpus's (`with_vocab`)."""
    cfg = with_vocab(cfg)
    torch.manual_seed(cfg.train.seed)
    return build_nn_model(cfg.model).to(device)


def load_model(target: str | Path | RunDir, device: torch.device | str = "cpu", *, cfg: RunConfig | None = None,
               require_checkpoint: bool = True) -> LoadedModel:
    """The model of a run directory (or of one named checkpoint file in it), with its trained weights.

    `cfg` (already holding the vocabulary) skips reading the run's config, as the trainer does.
    With `require_checkpoint`, a run without a usable checkpoint is an error; otherwise the
    model is returned at init and `LoadedModel.checkpoint` is None.
    """
    path = Path(target.path if isinstance(target, RunDir) else target)
    named_file = path if path.is_file() else None
    run = RunDir(path.parent if named_file else path)
    if not run.exists():
        raise ValueError(f"{str(path)!r} is not a normlab run directory or checkpoint: no config.toml in "
                         f"{str(run.path)!r}")
    cfg = cfg or with_vocab(run.read_config())
    model = build_model(cfg, device)
    found = _checkpoint(run, named_file, device)
    if found is None and require_checkpoint:
        raise ValueError(f"{str(run.path)!r} has no checkpoint (the run never reached its first one); "
                         "pass --init to measure the untrained model on purpose")
    if found is not None:
        model.load_state_dict(found.state["model"])
    return LoadedModel(cfg, model, found, run)


def _checkpoint(run: RunDir, named_file: Path | None, device: Any) -> checkpoint.Checkpoint | None:
    if named_file is None:
        return run.find_checkpoint(device)
    return checkpoint.Checkpoint(checkpoint.load_file(named_file, device), named_file)
