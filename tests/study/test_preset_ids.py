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
    ("standard", ""): [270, "2e88ea5cea3bb569", "56a6bc73cf589ac4"],
    ("quick", ""): [150, "56ee7b6f3a5a10e3", "f97b0bcab133d77a"],
    ("deep", ""): [45, "753dd197e6556b51", "745765d757a93114"],
    ("full", ""): [500, "4237d6ad02400190", "12ebe3e209a28c48"],
    ("frontier", ""): [230, "edad9b24c72df477", "25d252232acd6c56"],
    ("residual", ""): [60, "9a0cc17f5e1b48cb", "710d249d32fec448"],
    ("standard", "vary=init,context,width robustness"): [1560, "8c1d9b4181ff71f8", "648159aa7ba71f0b"],
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
