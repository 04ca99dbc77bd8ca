"""Every preset's runs, pinned: their ids and the configs the ledger stores. A refactor of the study must leave
both as they are: a run id that moves loses its run directory in every stored study, and a stored config that
changes trains another run under the same id. A change made on purpose (a new claim, a preset's new cell, a moved
held-out range) updates `PINNED` and says why in CHANGELOG.md."""
from __future__ import annotations

import hashlib
import json

import pytest

from normlab.study.plan import load_study

# (preset, study options) -> [runs, sha256 of the sorted ids, sha256 of the sorted (id, stored config) pairs]
PINNED = {
    ("standard", ""): [270, "b9d34f9a7d4b8572", "a15f8a1e0902022c"],
    ("quick", ""): [150, "66cc50f631be6d30", "571464500f97ca29"],
    ("deep", ""): [45, "12cc4cc1ebf76e2c", "d29c452ecfd2f2b7"],
    ("full", ""): [500, "de3cf605e5e7a705", "a28a04ed038cc741"],
    ("frontier", ""): [230, "33e9c3fb0532d1b6", "a51a1dde0255428c"],
    ("residual", ""): [60, "95b3accd67636141", "2fec8d116e1adf1e"],
    ("standard", "vary=init,context,width robustness"): [1560, "7511adc655b7e8d2", "bde6d28b4d89ce15"],
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
