"""A new claim is one module: registered from where it is written, it is a valid study claim with its own typed
knob, judged, listed in order and rendered in the report with no edit anywhere else (CONTRIBUTING.md shows the
module)."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

import pytest

from normlab.config import ConfigError
from normlab.study.claims import CLAIMS, HOLDS, Claim, Figure, Series, claim_number
from normlab.study.claims.base import Part, claim
from normlab.study.plan import plan_from_meta
from normlab.study.presets import PRESETS
from tests.conftest import judged_study


# A claim as a contributor writes it (CONTRIBUTING.md), less the `@`: each test applies it on a copy of the
# registry that it restores, so that C99 joins no other test's list of claims
as_c99 = claim("C99", "A claim added in its own module", sources="none (a test)",
               paper="none: the developer section's example")


class CausalMaskSizeC99(Claim):
    """Adding a claim needs one module: the study, the CLI and the report find it in the registry."""

    @dataclass(frozen=True)
    class Knobs(Claim.Knobs):
        value: float = 1.0  # what it measures; a preset changes it in `Preset.knobs["C99"]`

    def measure(self, preset):
        value = self.knobs(preset).value
        return {"value": value, "interval": [value - 0.5, value + 0.5]}

    def verdict(self, records, measurement, preset):
        part = Part("the measurement is positive", HOLDS, "measured value", measurement["value"],
                    measurement["interval"], "fixed", [])
        return self.make(HOLDS, "measured value", measurement["value"], 0, {"rule": "holds when positive"},
                         f"measured {measurement['value']}", parts=[part], interval=measurement["interval"])

    def figures(self, records, measurement, preset):
        return [Figure("C99's measurement", "x", "value", [Series("measured", [0, 1], [0.5, 1.0])])]


def test_a_claim_registered_in_its_own_module_runs_in_a_study_and_its_report(tmp_path, monkeypatch):
    from normlab.study.load import load_study
    from normlab.study.runner import run_study

    monkeypatch.setattr(CLAIMS, "_entries", {**CLAIMS._entries})  # the registry as it was, after the test
    as_c99(CausalMaskSizeC99)
    spec = load_study("quick", claims=["C99"], seeds=[0])
    status, verdicts = judged_study(spec, tmp_path / "s", run_study(spec, tmp_path / "s", workers=1, stack_runs=False))
    assert status.final and [v.id for v in verdicts] == ["C99"]
    assert sorted(["C99", "C16", "C9"], key=claim_number) == ["C9", "C16", "C99"]  # listed by number
    from normlab.study.publish import publish

    publish(tmp_path / "s")
    doc = json.loads((tmp_path / "s" / "verdicts.json").read_text())
    c99 = next(v for v in doc["verdicts"] if v["id"] == "C99")
    assert c99["verdict"] == HOLDS and c99["parts"][0]["name"] == "the measurement is positive"
    html = (tmp_path / "s" / "report.html").read_text()
    assert "A claim added in its own module" in html and "measured 1.0" in html
    assert CausalMaskSizeC99.statement in html  # its docstring, on one line


def test_normlab_study_judges_each_claim_once_and_the_cli_shows_those_verdicts(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from normlab.cli import app

    monkeypatch.setattr(CLAIMS, "_entries", {**CLAIMS._entries})
    as_c99(CausalMaskSizeC99)
    judged = []
    verdict = CausalMaskSizeC99.verdict
    monkeypatch.setattr(CausalMaskSizeC99, "verdict", lambda self, *a: judged.append(1) or verdict(self, *a))
    result = CliRunner().invoke(app, ["study", "--claims", "C99", "--seeds", "0", "--out", str(tmp_path / "s"),
                                      "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert judged == [1]  # the study's verdict, shown and rendered as it is (not judged again for the report)
    assert "C99" in result.output and json.loads((tmp_path / "s" / "verdicts.json").read_text())["final"]
    report = CliRunner().invoke(app, ["report", str(tmp_path / "s")])  # judges from the ledger alone
    assert report.exit_code == 0 and judged == [1, 1]


def test_a_claim_states_itself_through_its_decorator_and_docstring(monkeypatch):
    """The texts the report shows: title, sources and paper from `@claim`, the statement its docstring on one
    line; a claim with no docstring states nothing and is refused where it is written."""
    monkeypatch.setattr(CLAIMS, "_entries", {**CLAIMS._entries})
    as_c99(CausalMaskSizeC99)
    assert (CausalMaskSizeC99.id, CausalMaskSizeC99.title, CausalMaskSizeC99.sources) == \
        ("C99", "A claim added in its own module", "none (a test)")
    assert CausalMaskSizeC99.statement == ("Adding a claim needs one module: the study, the CLI and the report find "
                                           "it in the registry.")

    class Silent(Claim):
        pass

    with pytest.raises(ValueError, match="C98 states nothing"):
        claim("C98", "no statement", sources="none", paper="none")(Silent)
    assert "C98" not in CLAIMS


def test_a_claims_own_knob_has_its_default_a_presets_value_and_a_stored_studys(monkeypatch):
    """The claim's knob is typed where the claim is written: a preset changes it by claim id, a study stores it
    and reads it back, and a name the claim has no knob of is refused with the names it has."""
    monkeypatch.setattr(CLAIMS, "_entries", {**CLAIMS._entries})
    as_c99(CausalMaskSizeC99)
    assert CausalMaskSizeC99().measure(PRESETS["quick"]) == {"value": 1.0, "interval": [0.5, 1.5]}
    preset = dataclasses.replace(PRESETS["quick"], knobs={"C99": {"value": 2.0}})
    assert CausalMaskSizeC99().measure(preset)["value"] == 2.0
    stored = {"preset": "quick", "preset_settings": json.loads(json.dumps(dataclasses.asdict(preset))),
              "base": preset.base, "seeds": preset.seeds, "claims": ["C99"]}
    assert CausalMaskSizeC99.knobs(plan_from_meta({"study": stored}).preset).value == 2.0
    with pytest.raises(ConfigError, match="claim C99 has no knob 'valu'; its knobs: rounds, init_pass, value"):
        dataclasses.replace(PRESETS["quick"], knobs={"C99": {"valu": 2.0}})

    class Undeclared(Claim):
        """Knobs without @dataclass: its fields would not be knobs."""

        class Knobs(Claim.Knobs):
            value: float = 1.0

    with pytest.raises(ValueError, match="C98's Knobs is not a dataclass"):
        claim("C98", "no knobs", sources="none", paper="none")(Undeclared)
