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


def test_every_module_is_in_the_fingerprint_or_says_why_it_cannot_change_a_verdict():
    """The freeze a reader can check: each module of the package is either a rule module (fingerprinted) or listed
    in VERDICT_NEUTRAL with its reason, never both, and every entry names a module that exists."""
    from fnmatch import fnmatch
    from pathlib import Path

    import normlab
    from normlab.study.rules import RULE_MODULES, VERDICT_NEUTRAL

    root = Path(normlab.__file__).parent
    modules = sorted(str(p.relative_to(root)) for p in root.rglob("*.py"))

    def ruled(m: str) -> bool:
        return any(fnmatch(m, pattern) and "/" not in m[len(pattern.rpartition("/")[0]) + 1:]
                   for pattern in RULE_MODULES)

    def neutral(m: str) -> list[str]:
        return [p for p in VERDICT_NEUTRAL if fnmatch(m, p) and "/" not in m[len(p.rpartition("/")[0]) + 1:]]

    unplaced = [m for m in modules if not ruled(m) and not neutral(m)]
    assert not unplaced, f"modules neither fingerprinted nor said verdict-neutral: {unplaced}"
    both = [m for m in modules if ruled(m) and neutral(m) and not neutral(m)[0].endswith("*.py")]
    assert not both, f"named both as a rule module and as verdict-neutral: {both}"
    assert all(VERDICT_NEUTRAL.values()) and all(any(fnmatch(m, p) for m in modules) for p in VERDICT_NEUTRAL)
    assert all(any(fnmatch(m, p) for m in modules) for p in RULE_MODULES)
    # the code that decides what a verdict sees is in: the looks and seeds, censoring, the trained line's
    # estimates, the init recipes, the timing harness
    for m in ("study/spec.py", "study/runner.py", "study/records.py", "study/validation.py", "data/corpus.py",
              "nn/init.py", "bench/norms.py", "study/claims/residual.py"):
        assert ruled(m), m


def test_every_data_file_the_package_ships_says_why_it_is_outside_the_fingerprint():
    """The package's files that are not Python (corpora, the kernel source, the packaged records) are each listed
    in DATA_FILES with why their content cannot change a decision, and every entry names a file that exists."""
    from fnmatch import fnmatch
    from pathlib import Path

    import normlab
    from normlab.study.rules import DATA_FILES

    root = Path(normlab.__file__).parent
    shipped = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.suffix != ".py"
                     and "__pycache__" not in p.parts and p.suffix not in (".so", ".pyc"))
    unlisted = [f for f in shipped if not any(fnmatch(f, pattern) for pattern in DATA_FILES)]
    assert not unlisted, f"data files with no reason to be outside the fingerprint: {unlisted}"
    assert all(DATA_FILES.values()) and all(any(fnmatch(f, p) for f in shipped) for p in DATA_FILES)
