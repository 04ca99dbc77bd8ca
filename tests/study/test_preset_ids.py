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
    ("standard", ""): [270, "5650bb7bc5808a43", "f052846f52f9ca5b"],
    ("quick", ""): [150, "27b8c5c44dba934c", "fba6e885f590d0cc"],
    ("deep", ""): [45, "691798fef271b21e", "18b8995129f56f97"],
    ("full", ""): [500, "2e83ed31811fb60e", "773bc925206b2204"],
    ("frontier", ""): [230, "049aa03ebf6debd1", "3d54d753664b726e"],
    ("residual", ""): [60, "5db54947b6169ff7", "16909077cb643e17"],
    ("standard", "vary=init,context,width robustness"): [1560, "9e5fa6c95cfc9bb7", "7efc11eea42ead03"],
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
