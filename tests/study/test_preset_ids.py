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
    ("standard", ""): [270, "988b1faa4a9cd6cb", "f61f4ec57a697350"],
    ("quick", ""): [150, "5bc82caacfe61e6f", "50bdff2a720d1614"],
    ("deep", ""): [45, "3ec11dec77328d11", "e9f6d43113937f3f"],
    ("full", ""): [500, "dc0ec947a37662d4", "0b5211b38b0e4923"],
    ("frontier", ""): [230, "8f2a82d7d0ca3e09", "05bfb81d80129948"],
    ("residual", ""): [60, "3f16ce01230c6643", "16ce61b70f7d33bc"],
    ("standard", "vary=init,context,width robustness"): [1560, "540bbdf6e3f81b69", "37556ca5f51982d1"],
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
