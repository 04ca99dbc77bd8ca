"""Every preset's runs, pinned: their ids and the configs the ledger stores. A refactor of the study must leave
both as they are: a run id that moves loses its run directory in every stored study, and a stored config that
changes trains another run under the same id. A change made on purpose (a new claim, a preset's new cell, a moved
held-out range) updates `PINNED` and says why in CHANGELOG.md."""
from __future__ import annotations

import hashlib
import json

import pytest

from normlab.study.claims import CLAIMS
from normlab.study.spec import load_study

# (preset, study options) -> [runs, sha256 of the sorted ids, sha256 of the sorted (id, stored config) pairs]
PINNED = {
    ("standard", ""): [270, "86e199dcf3198e83", "6982287b1ff62170"],
    ("quick", ""): [150, "11b5e9e26bb55892", "1dfcc7c570b00eb4"],
    ("deep", ""): [45, "796d946c76e3e08e", "7ae6f2c19ec3d302"],
    ("full", ""): [500, "304e45ddb7b9b4c7", "564e8df2ef231112"],
    ("frontier", ""): [230, "8625a5d337bcf7ca", "074adcbe5de902f9"],
    ("standard", "vary=init,context,width robustness"): [1560, "b9e443a1d5e7e630", "72ce0aaa3deea5a7"],
}
OPTIONS = {"": {}, "vary=init,context,width robustness": {"vary": ["init", "context", "width"], "robustness": True}}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.mark.parametrize("preset,options", list(PINNED))
def test_every_presets_run_ids_and_stored_configs_are_as_pinned(preset, options):
    runs = sorted(load_study(preset, **OPTIONS[options]).expand(CLAIMS), key=lambda r: r.id)
    got = [len(runs), _digest("\n".join(r.id for r in runs)),
           _digest(json.dumps([[r.id, r.data] for r in runs], sort_keys=True))]
    assert got == PINNED[preset, options], (
        f"preset {preset!r} {options}: {got} against {PINNED[preset, options]} (runs, ids, stored configs); if the "
        "change is meant, pin the new figures and say why in CHANGELOG.md")


def test_the_pins_cover_every_preset():
    from normlab.study.presets import PRESETS

    assert {p for p, _ in PINNED} == set(PRESETS)
