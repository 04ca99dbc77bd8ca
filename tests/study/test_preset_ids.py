"""Every preset's runs, pinned: their ids and the configs the ledger stores. A refactor of the study must leave
both as they are: a run id that moves loses its run directory in every stored study, and a stored config that
changes trains another run under the same id. A change made on purpose (a new claim, a preset's new cell, a moved
held-out range) updates `PINNED` and says why in CHANGELOG.md."""
from __future__ import annotations

import hashlib
import json

import pytest

from normlab.study.claims import CLAIMS
from normlab.study.plan import load_study

# (preset, study options) -> [runs, sha256 of the sorted ids, sha256 of the sorted (id, stored config) pairs]
PINNED = {
    ("standard", ""): [270, "f5393d7a1c95ffdb", "6163d6bc04b0336d"],
    ("quick", ""): [150, "c4acc3cc42fa627b", "0d64d6ec2ee4573c"],
    ("deep", ""): [45, "fece40265c44e825", "35471413cfd5153c"],
    ("full", ""): [500, "0c3bc7d9fbb9b90a", "787e5be379ff8f81"],
    ("frontier", ""): [230, "8453b8c7f08dce53", "1f27b9164a7f2fe6"],
    ("residual", ""): [60, "8f08e7ad169c8246", "9524678156156a4e"],
    ("standard", "vary=init,context,width robustness"): [1560, "b77c06cb8b76e69c", "15fa2ef887872a49"],
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
