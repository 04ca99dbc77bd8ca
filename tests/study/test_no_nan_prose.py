"""No verdict's prose prints `nan`: where too few runs trained to give a number, it says so in words."""
from __future__ import annotations

import re

import pytest

from normlab.study.claims import CLAIMS
from normlab.study.presets import PRESETS


@pytest.mark.parametrize("cid", CLAIMS.names())
def test_a_claim_with_no_trained_run_says_so_in_words(cid):
    preset = PRESETS["frontier" if cid.startswith("F") else "standard"]
    v = CLAIMS.get(cid)().verdict([], None, preset)
    texts = [v.summary, v.reading or ""] + [p["summary"] for p in v.parts]
    assert not any(re.search(r"\bnan\b", t, re.I) for t in texts), texts
    if cid in ("C13", "C15"):  # their summaries used to read "ends +nan nats"
        assert "too few runs trained" in v.summary
