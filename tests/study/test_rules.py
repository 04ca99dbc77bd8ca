"""The rules' fingerprint (study/rules.py): a changed rule moves it, a reworded comment or docstring does not, and
a study's verdicts.json records it."""
from __future__ import annotations

from normlab.study.rules import fingerprint, fingerprint_of, rules_record

RULE = '''
"""A module of rules."""
LOSS_MARGIN = 0.02  # nats


def decide(x):
    """Holds above the margin."""
    return x > LOSS_MARGIN
'''


def test_a_changed_rule_moves_the_fingerprint_and_a_reworded_comment_does_not():
    base = fingerprint_of([("rules.py", RULE)])
    assert fingerprint_of([("rules.py", RULE.replace("# nats", "# nats, under 1 % of the loss"))]) == base
    assert fingerprint_of([("rules.py", RULE.replace("Holds above the margin.", "Above it."))]) == base
    assert fingerprint_of([("rules.py", RULE.replace("0.02", "0.03"))]) != base
    assert fingerprint_of([("rules.py", RULE.replace("x > LOSS", "x >= LOSS"))]) != base
    assert fingerprint_of([("other.py", RULE)]) != base  # a module's name is part of it


def test_the_code_has_one_fingerprint_and_records_it():
    assert len(fingerprint()) == 16 and int(fingerprint(), 16) >= 0
    record = rules_record()
    assert record["fingerprint"] == fingerprint() and "study/claims/*.py" in record["modules"]


def test_a_presets_measured_time_is_not_a_rule():
    """A preset's prose (its summary and description quote its measured wall time) is left out of the
    fingerprint: recording a new time moves no rule; a setting that decides a verdict does."""
    import dataclasses

    from normlab.study import presets, rules

    before = rules.presets_data()
    standard = presets.PRESETS["standard"]
    try:
        presets.PRESETS["standard"] = dataclasses.replace(standard, description="took 1 minute", summary="fast")
        assert rules.presets_data() == before
        presets.PRESETS["standard"] = dataclasses.replace(standard, lr_fixed=1e-2)
        assert rules.presets_data() != before
    finally:
        presets.PRESETS["standard"] = standard
