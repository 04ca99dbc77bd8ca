"""What holds of every seed claim's verdict (C1–C16) on synthetic run records and measurements. Each claim's
scenarios sit beside its claims module's other claims, in tests/study/test_verdicts_<module>.py (built from
tests/study/scenarios.py): at least one situation that must give `holds`, one `does not hold` and one
`inconclusive`, with the verdict's `value` checked against a number computed by hand from the synthetic data.
Nothing here trains a study run.
"""
from __future__ import annotations

import importlib

import pytest

from normlab.study.claims import CLAIMS, FAILS, HOLDS, INCONCLUSIVE, ORDER, SEED_CLAIMS
from tests.study.scenarios import run_claim


def scenarios_of(claim_id: str):
    """The scenarios of a seed claim: the `scenario` table of its claims module's tests,
    tests/study/test_verdicts_<module>.py (C1's of claims/stability.py in test_verdicts_stability.py)."""
    module = CLAIMS.get(claim_id).__module__.rsplit(".", 1)[-1]
    try:
        return importlib.import_module(f"tests.study.test_verdicts_{module}").scenario
    except ModuleNotFoundError:
        pytest.fail(f"{claim_id} is written in claims/{module}.py: its scenarios go in tests/study/"
                    f"test_verdicts_{module}.py")


def test_every_claim_has_holds_fails_and_inconclusive_scenarios():
    assert set(ORDER) == set(CLAIMS.names())
    # the seed claims C1–C16; the frontier claims F1–F8 are covered in test_frontier_verdicts.py
    missing = {c: {HOLDS, FAILS, INCONCLUSIVE} - scenarios_of(c).covered.get(c, set()) for c in SEED_CLAIMS}
    assert {c: m for c, m in missing.items() if m} == {}


def test_every_claim_names_its_paper_and_every_verdict_carries_it():
    """Claim.paper is set on every claim class, `make` puts it in the verdict's settings (unless the claim's
    settings name a more specific source), and so does every scenario's verdict, early returns included."""
    no_paper = [c for c in ORDER if not (isinstance(CLAIMS.get(c).paper, str) and CLAIMS.get(c).paper.strip())]
    assert no_paper == []
    for c in ORDER:
        claim = CLAIMS.get(c)()
        # a family may add its own settings beside them (the frontier claims: the scale their paper measured at)
        assert {"k": 1, "paper": claim.paper}.items() <= claim.make(INCONCLUSIVE, "x", None, 0, {"k": 1},
                                                                    "s").settings.items()
    tables = {id(t): t for t in map(scenarios_of, SEED_CLAIMS)}.values()
    for param in (p for table in tables for p in table.good):
        claim, make, _, _ = param.values
        v = run_claim(claim, make())
        assert isinstance(v.settings.get("paper"), str) and v.settings["paper"].strip(), (claim, make.__name__)
