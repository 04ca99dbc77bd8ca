"""Every preset's runs, pinned: their ids and the configs the ledger stores. A refactor of the study must leave
both as they are: a run id that moves loses its run directory in every stored study, and a stored config that
changes trains another run under the same id. A change made on purpose (a new claim, a preset's new cell, a moved
held-out range) updates `PINNED` and says why in CHANGELOG.md."""
from __future__ import annotations

import hashlib
import json

import pytest

from normlab.study.load import load_study

# (preset, study options) -> [runs, sha256 of the sorted ids, sha256 of the sorted (id, stored config) pairs]
PINNED = {
    ("standard", ""): [270, "4b34652b64fe635e", "4da1dab22ab2718a"],
    ("quick", ""): [150, "51de600108ef3214", "88e73978c5c8b6ab"],
    ("deep", ""): [45, "48e48597aa89c5db", "5908c0c6dafbb1a3"],
    ("full", ""): [500, "f2685c29fe7b65c3", "53537eb2d1db3c51"],
    ("frontier", ""): [230, "d3e229b159f49901", "7d235817e1c87265"],
    ("residual", ""): [60, "8619ab092aca8f23", "25ff637f3635d7ed"],
    ("standard", "vary=init,context,width robustness"): [1560, "4e89a555787de489", "9267aac1a05b84ed"],
}
OPTIONS = {"": {}, "vary=init,context,width robustness": {"vary": ["init", "context", "width"], "robustness": True}}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.mark.parametrize("preset,options", list(PINNED))
def test_every_presets_run_ids_and_stored_configs_are_as_pinned(preset, options):
    runs = sorted(load_study(preset, **OPTIONS[options]).runs, key=lambda r: r.id)
    got = [len(runs), _digest("\n".join(r.id for r in runs)),
           _digest(json.dumps([[r.id, r.data] for r in runs], sort_keys=True))]
    assert got == PINNED[preset, options], (
        f"preset {preset!r} {options}: {got} against {PINNED[preset, options]} (runs, ids, stored configs); if the "
        "change is meant, pin the new figures and say why in CHANGELOG.md")


def test_the_pins_cover_every_preset():
    from normlab.study.presets import PRESETS

    assert {p for p, _ in PINNED} == set(PRESETS)
