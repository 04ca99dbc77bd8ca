"""Checkpoints that are never half-trusted: kept two deep, verified on load, loaded without pickle code.

    DIR/checkpoint.pt        the newest checkpoint
    DIR/checkpoint.prev.pt   the one before it (kept, so a damaged newest one costs one interval)
    DIR/checkpoints.json     the SHA-256 and step of each checkpoint written (the last few)

A checkpoint holds only tensors and plain numbers/strings, so it loads with
`torch.load(weights_only=True)`: a pickle planted in a run directory cannot run code.
Its digest is recorded before the file takes its name, so any checkpoint in place is
either listed or damaged: torch's zip reader does not notice a flipped byte in a tensor.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

NEWEST, PREVIOUS, MANIFEST = "checkpoint.pt", "checkpoint.prev.pt", "checkpoints.json"
KEPT_DIGESTS = 4  # the two in place, plus one being written, plus slack
REQUIRED_KEYS = ("model", "step")


class CheckpointError(ValueError):
    """No checkpoint in the directory can be used; the message says why for each."""


@dataclass
class Checkpoint:
    state: dict[str, Any]
    path: Path
    skipped: list[str] = field(default_factory=list)  # "checkpoint.pt: why" for each newer one not used

    @property
    def step(self) -> int:
        return self.state["step"]

    def note(self) -> str | None:
        """What a user should be told when an older checkpoint was used."""
        if not self.skipped:
            return None
        return f"{'; '.join(self.skipped)}; resuming from {self.path.name} (step {self.step}) instead"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def save(directory: Path, state: dict[str, Any], write_json) -> None:
    """Write the new checkpoint beside the old one, record its digest, then rotate: newest → previous."""
    tmp = directory / (NEWEST + ".tmp")
    with open(tmp, "wb") as f:  # through a Python file, a full disk is an OSError (ENOSPC), not a miniz assert
        torch.save(state, f)
    digests = _manifest(directory)
    digests[sha256(tmp)] = state["step"]
    write_json(MANIFEST, dict(list(digests.items())[-KEPT_DIGESTS:]))
    newest = directory / NEWEST
    if newest.exists():
        os.replace(newest, directory / PREVIOUS)
    os.replace(tmp, newest)


def find(directory: Path, map_location: Any = "cpu") -> Checkpoint | None:
    """The newest checkpoint that verifies; None if there is none at all; `CheckpointError` if none verifies."""
    candidates = [directory / name for name in (NEWEST, PREVIOUS) if (directory / name).exists()]
    if not candidates:
        return None
    digests = _manifest(directory)
    skipped = []
    for path in candidates:
        state, why = _load_verified(path, digests, map_location)
        if state is not None:
            return Checkpoint(state, path, skipped)
        skipped.append(f"{path.name} is unusable ({why})")
    raise CheckpointError(f"no usable checkpoint in {directory}: {'; '.join(skipped)}")


def load_file(path: Path, map_location: Any = "cpu") -> dict[str, Any]:
    """One named checkpoint file, verified against its directory's manifest."""
    state, why = _load_verified(path, _manifest(path.parent), map_location)
    if state is None:
        raise CheckpointError(f"{path} is unusable ({why})")
    return state


def _load_verified(path: Path, digests: dict[str, int], map_location: Any) -> tuple[dict | None, str]:
    if path.stat().st_size == 0:
        return None, "empty file"
    if digests and sha256(path) not in digests:  # directories from before the manifest have none
        return None, "its SHA-256 matches no checkpoint normlab wrote: truncated or altered"
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:  # torch's message goes on to advise weights_only=False: never ours to give
        found = re.search(r"GLOBAL ([\w.]+)", str(e))
        asks = f", it asks to call {found.group(1)}" if found else ""
        return None, f"refused: not a plain pickle of tensors{asks} (nothing of it was run)"
    except Exception as e:  # truncated zip, EOF
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else 'cannot be read'}"
    if not isinstance(state, dict) or any(k not in state for k in REQUIRED_KEYS):
        return None, f"not a normlab checkpoint (needs keys {', '.join(REQUIRED_KEYS)})"
    return state, ""


def _manifest(directory: Path) -> dict[str, int]:
    try:
        data = json.loads((directory / MANIFEST).read_text("utf-8"))
        return {str(k): int(v) for k, v in data.items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}
