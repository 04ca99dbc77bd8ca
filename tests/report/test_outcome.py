"""A verdict's outcome as a value (report/outcome.py): the four outcomes, "where judged" counted apart from "under
every level measured", an inconclusive verdict's kind, the one definition of "replicated", and verdicts.json rows
written before outcomes were typed, read from their data and never from their words."""
from __future__ import annotations

import pytest

from normlab.report.outcome import (DEPENDS, EQUIVALENT, FAILS, HOLDS, INCONCLUSIVE, TOO_FEW_TRAINED, UNDERPOWERED,
                                    Outcome, Totals, outcome_counts, outcome_of, replicated, split_and_open,
                                    totals_text)


def test_an_outcome_is_its_word_its_factors_and_its_open_levels():
    assert Outcome(HOLDS).text == HOLDS and Outcome(HOLDS).complete and Outcome(HOLDS).total_key == HOLDS
    split = Outcome(HOLDS, ("init", "width"))
    assert (split.kind, split.text, split.total_key) == (DEPENDS, "depends on init, width", DEPENDS)
    assert not split.complete  # a dependence is never counted as holds
    partial = Outcome(FAILS, (), ("gpt2", "d 128"))
    assert (partial.kind, partial.total_key, partial.complete) == (FAILS, "does not hold where judged", False)
    assert partial.scope_text == "where judged (inconclusive under gpt2, d 128)"
    assert Outcome(FAILS).scope_text == "under every level measured"


def test_an_inconclusive_outcome_says_which_kind_it_is():
    assert Outcome(INCONCLUSIVE, why=TOO_FEW_TRAINED).why_text == "too few runs trained to compare"
    assert Outcome(INCONCLUSIVE, why=EQUIVALENT).why_text == "no effect larger than the margin"
    assert Outcome(INCONCLUSIVE, why=UNDERPOWERED, needed=14, seeds=10).why_text == (
        "effect seen, not past the family-wise level at 10 seeds: about 14 needed")
    assert Outcome(INCONCLUSIVE, why=UNDERPOWERED, seeds=10).why_text.endswith(": more seeds would decide")
    with pytest.raises(ValueError, match="an inconclusive verdict's kind is one of"):
        Outcome(INCONCLUSIVE, why="bad luck")
    with pytest.raises(ValueError, match="a rule's verdict is one of"):
        Outcome("depends on init")  # a dependence is data, never a word to parse


def test_the_scope_splits_or_leaves_levels_open():
    scope = {"init": {"xiong": HOLDS, "gpt2": FAILS}, "width": {"d 64": HOLDS, "d 128": INCONCLUSIVE}}
    assert split_and_open(scope) == (("init",), ("d 128",))


def test_a_row_from_before_typed_outcomes_is_read_from_its_data():
    old = {"verdict": "depends on init", "primary": HOLDS, "scope": {"init": {"gpt2": HOLDS, "xiong": FAILS}}}
    assert outcome_of(old).text == "depends on init"
    old = {"verdict": HOLDS, "primary": HOLDS, "scope": {"width": {"d 64": HOLDS, "d 128": INCONCLUSIVE}}}
    assert outcome_of(old).total_key == "holds where judged"
    typed = {"verdict": "x", "outcome": Outcome(FAILS, ("lr",)).to_dict()}
    assert outcome_of(typed).text == "depends on lr"  # the typed outcome wins over any words


def test_totals_count_where_judged_apart():
    rows = [{"outcome": o.to_dict()} for o in (Outcome(HOLDS), Outcome(HOLDS, (), ("gpt2",)), Outcome(FAILS),
                                              Outcome(HOLDS, ("init",)), Outcome(INCONCLUSIVE))]
    counts = outcome_counts(rows)
    assert counts == {"holds": 1, "holds where judged": 1, "does not hold": 1, "does not hold where judged": 0,
                      "depends on": 1, "inconclusive": 1}
    assert totals_text(counts) == ("2 holds (1 of them only where judged), 1 does not hold, 1 depends on, "
                                   "1 inconclusive")
    # a word never reads as none when its only verdicts are decisive where judged
    assert totals_text({**counts, "holds": 0}).startswith("1 holds (1 of them only where judged)")
    totals = Totals.of(rows)
    assert (totals.decisive, totals.claims) == (4, 5) and "; 4 of 5 decisive" in totals.text()


def test_decisive_has_one_definition():
    """Holds, does not hold and depends on are decisive (each decided by its tests); inconclusive is not."""
    assert [Outcome(v).decisive for v in (HOLDS, FAILS, INCONCLUSIVE)] == [True, True, False]
    assert Outcome(HOLDS, ("init",)).decisive and Outcome(HOLDS, (), ("gpt2",)).decisive


def test_replicated_has_one_definition():
    held = {"outcome": Outcome(HOLDS).to_dict()}
    assert replicated(held, {"verdict": HOLDS}) and replicated(held, {"outcome": Outcome(HOLDS).to_dict()})
    assert not replicated(held, {"verdict": FAILS}) and not replicated(held, {})
    # decisive only where judged: not replicated, whatever the design seeds said
    partial = {"outcome": Outcome(HOLDS, (), ("gpt2",)).to_dict()}
    assert not replicated(partial, {"verdict": HOLDS})
    depends = {"outcome": Outcome(HOLDS, ("init",)).to_dict()}
    assert not replicated(depends, {"verdict": "depends on init"})  # a dependence is no decisive verdict
    assert Totals.of([{**held, "design": {"verdict": HOLDS}}, partial]).replicated == 1
