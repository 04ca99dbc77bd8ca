"""The design seeds' verdicts beside a study's: does each verdict replicate on seeds no rule was designed on?

Rules, grids and presets are built on the design seeds (0–999, `presets.DESIGN_SEEDS`); the presets users run start
at `presets.HELD_OUT`. `design_verdicts.json` (beside this module, written by `benchmarks/design_verdicts.py` from a
design-seed study whose verdicts.json is committed under `benchmarks/results/`) holds each preset's design-seed
verdicts, so a held-out study's report shows both without training the design seeds again.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from normlab.report.outcome import replicated as same_everywhere
from normlab.study.presets import DESIGN_SEEDS

DESIGN_FILE = Path(__file__).with_name("design_verdicts.json")


def design_record(preset: str) -> dict[str, Any] | None:
    """{"seeds": [...], "verdicts": {claim: {"verdict", "reading"}}} of the preset's design-seed study, or None."""
    try:
        return json.loads(DESIGN_FILE.read_text("utf-8")).get(preset)
    except (OSError, ValueError):
        return None


def design_beside(record: dict[str, Any] | None, seeds: list[int], verdicts: list) -> list:
    """The verdicts, each with its `design` from the preset's design record (`record`: `design_record`'s, which
    the plan read): the design seeds' verdict and whether this study replicates it (`report.outcome.replicated`:
    decisive under every level measured, and the same outcome on both seed sets). As they are where the study
    itself runs on design seeds (`seeds`: the preset's; it would be compared with itself) or the preset has no
    record."""
    if not record or all(s in DESIGN_SEEDS for s in seeds):
        return list(verdicts)
    out = []
    for v in verdicts:
        seen = record["verdicts"].get(v.id)
        out.append(dataclasses.replace(v, design={**seen, "seeds": record["seeds"],
                                                  "replicated": same_everywhere(v.to_dict(), seen)}) if seen else v)
    return out
