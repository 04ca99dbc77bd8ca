"""Starting a run from another run's weights (`train.init_from`): a fine-tune of the same model, or a swap of its
placement or normalizer (`train.init_from_match` = by_name / by_stream).

The source is read by `load_model`, as every run directory is: its checkpoint verified against the digest its run
recorded and loaded with `torch.load(weights_only=True)`, so a pickle planted there cannot run code.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn

from normlab.config import RunConfig
from normlab.rundir import load_model

# what a swap (init_from_match by_name / by_stream) may change of the source's model: where the norms go, which
# normalizer, and the init of what the source does not hold; anything else is another model, refused
SWAPPABLE = {"scheme", "scheme_options", "norm", "norm_options", "norm_eps", "norm_affine", "norm_bias", "final_norm",
             "embed_norm", "qk_norm", "init", "init_std", "init_residual_scaling", "dropout"}


def init_from(model: nn.Module, cfg: RunConfig, device: torch.device,
              note: Callable[[str], None]) -> dict[str, Any] | None:
    """Load the trained weights of `cfg.train.init_from` into `model` (this run's, at init). A swap tells `note`
    what it took and returns its record (run.json's "swap"); a fine-tune of the same model returns None."""
    source, match = cfg.train.init_from, cfg.train.init_from_match
    try:
        loaded = load_model(source, device)
    except (ValueError, OSError) as e:
        raise ValueError(f"train.init_from {source!r} cannot be loaded: {e}") from None
    theirs, ours = loaded.cfg.model.model_dump(mode="json"), cfg.model.model_dump(mode="json")
    differ = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
    if match != "exact":  # a swap: only the placement and the normalizer may differ
        differ = [k for k in differ if k not in SWAPPABLE]
    if differ:
        raise ValueError(f"train.init_from {source!r} is another model: "
                         + ", ".join(f"model.{k} = {theirs.get(k)!r} there, {ours.get(k)!r} here" for k in differ))
    if match == "exact":
        model.load_state_dict(loaded.model.state_dict())
        return None
    weights, swap = swapped_weights(loaded.model, model, by_stream=match == "by_stream", source=source)
    model.load_state_dict(weights)
    note(f"swap: {len(weights) - len(swap['new'])} of {len(weights)} tensors from {source} ({len(swap['moved'])} "
         f"norm tensors moved to their point of the stream); new at init: {len(swap['new'])}, left behind: "
         f"{len(swap['left_behind'])}")
    return swap


def swapped_weights(source_model: nn.Module, model: nn.Module, by_stream: bool, source: str
                    ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The source's tensors where `model` has the same name and shape, its own init elsewhere (a swap of placement
    or normalizer); with `by_stream`, a norm the placement moved takes the gains of the source's norm that read the
    same point of the stream (`stream_norms`: Post-LN's norm after sub-layer k becomes Pre-LN's norm before
    sub-layer k + 1, its last the final norm). Also what went where: kept, moved, new, left behind."""
    theirs, ours = source_model.state_dict(), model.state_dict()
    kept = {k: k for k, v in ours.items() if k in theirs and theirs[k].shape == v.shape}
    moved = _moved_norms(source_model, model, theirs, ours, kept) if by_stream else {}
    kept.update(moved)
    if not kept:
        raise ValueError(f"train.init_from {source!r} shares no tensor (name and shape) with this model")
    taken = set(kept.values())
    swap = {"kept": sum(k == v for k, v in kept.items()), "moved": moved,
            "new": sorted(set(ours) - set(kept)), "left_behind": sorted(set(theirs) - taken)}
    return {**ours, **{k: theirs[v] for k, v in kept.items()}}, swap


def _moved_norms(source_model: nn.Module, model: nn.Module, source: dict, ours: dict, kept: dict[str, str]
                ) -> dict[str, str]:
    """{our norm tensor: the source's} for our stream norms that found no namesake, from the source's unused
    stream norm at the same point (models without `stream_norms`, an encoder–decoder: none)."""
    if not (hasattr(source_model, "stream_norms") and hasattr(model, "stream_norms")):
        return {}
    used = set(kept.values())
    theirs_at = {point: name for name, point in source_model.stream_norms().items()
                 if not any(k.startswith(name + ".") for k in used)}
    moved = {}
    for name, point in model.stream_norms().items():
        if any(k.startswith(name + ".") for k in kept) or point not in theirs_at:
            continue
        for suffix in ("weight", "bias"):
            mine, theirs = f"{name}.{suffix}", f"{theirs_at[point]}.{suffix}"
            if mine in ours and theirs in source and source[theirs].shape == ours[mine].shape:
                moved[mine] = theirs
    return moved
