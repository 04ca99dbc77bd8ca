"""The rules a verdict is judged by, as a report states them (`thresholds`), and their fingerprint: the claims, the
presets, the statistics and decisions, the family-wise control, the power plan, what "trained" means, how a verdict
is judged at each level, and what an outcome is.

Seeds below `presets.HELD_OUT` (every earlier held-out range among them) are for designing rules; presets run on
held-out seeds
(`presets.HELD_OUT`). A held-out verdict is only held out if its rules were frozen before it ran, so verdicts.json
records this fingerprint, and tests/test_results.py fails when a committed held-out result's fingerprint is not
the code's: a rule change moves the held-out range to fresh seeds, and CHANGELOG.md says so.

The fingerprint is a hash of each rule module's syntax tree without its docstrings (`ast.dump` drops comments),
and of the presets as data: a reworded comment or docstring leaves it as it is, a changed threshold, grid, test
or preset moves it.
"""
from __future__ import annotations

import ast
import functools
import hashlib
from importlib import resources
from typing import Any

from normlab.study.claims import Verdict, statistics

# the modules whose code decides a verdict, as package paths under normlab: the claims and their statistics and
# decisions, the family-wise control, the power plan, what "trained" means, how a verdict is judged at each level
# (judge.py: where it holds, `depends on`), what an outcome is. The presets enter
# as data (`presets_data`), not as presets.py's code, and the study's machinery (runner.py, workers.py, the ledger)
# not at all, so that moving machinery code leaves the rules' fingerprint as it is
RULE_MODULES = ("study/claims/*.py", "study/family.py", "study/power.py", "study/trained.py", "study/judge.py",
                "report/outcome.py")


def _sources() -> list[tuple[str, str]]:
    root = resources.files("normlab")
    out = []
    for pattern in RULE_MODULES:
        folder, _, name = pattern.rpartition("/")
        base = root.joinpath(folder)
        names = sorted(p.name for p in base.iterdir() if p.name.endswith(".py")) if name == "*.py" else [name]
        out += [(f"{folder}/{n}", base.joinpath(n).read_text("utf-8")) for n in names]
    return out


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return tree


def fingerprint_of(sources: list[tuple[str, str]]) -> str:
    """The hash of these (name, source) modules' syntax trees, docstrings and comments left out."""
    digest = hashlib.sha256()
    for name, text in sources:
        digest.update(name.encode())
        digest.update(ast.dump(_without_docstrings(ast.parse(text))).encode())
    return digest.hexdigest()[:16]


def presets_data() -> str:
    """Every preset's settings and the trained line's share, as data: what presets.py decides of a verdict. Its prose
    (`summary`, `description`, which quote the preset's measured wall time) is left out: recording a new time
    is not a rule change."""
    import dataclasses
    import json

    from normlab.data.corpus import TRAINED_SHARE
    from normlab.study.presets import HELD_OUT, PRESETS

    prose = ("summary", "description")
    return json.dumps({"presets": {n: {k: v for k, v in dataclasses.asdict(p).items() if k not in prose}
                                   for n, p in sorted(PRESETS.items())},
                       "held_out": HELD_OUT, "trained_share": TRAINED_SHARE}, sort_keys=True, default=repr)


@functools.lru_cache(maxsize=1)
def fingerprint() -> str:
    """The fingerprint of the rules as this normlab has them."""
    return fingerprint_of(_sources() + [("presets", f"PRESETS = {presets_data()!r}")])


def rules_record() -> dict:
    """What verdicts.json records of the rules."""
    return {"fingerprint": fingerprint(), "modules": list(RULE_MODULES) + ["the presets, as data"],
            "what": "a hash of the rule modules' syntax trees without docstrings or comments, and of the presets "
                    "(study/rules.py)"}


def thresholds(verdicts: list[Verdict]) -> dict[str, Any]:
    """The rules every verdict was judged by, as the report's method section states them."""
    return {"loss_margin_nats": statistics.LOSS_MARGIN, "confidence": statistics.CONFIDENCE,
            "equivalence_tost": statistics.EQUIVALENCE, "sign_test_level": statistics.SIGN_LEVEL,
            "trains_if_seeds_at_least": statistics.TRAINS, "min_seeds": statistics.MIN_SEEDS,
            "family_wise": family_text(verdicts)}


def family_text(verdicts: list[Verdict]) -> str:
    """The family-wise control in words, for the report's method section."""
    family = next((v.family for v in verdicts if v.family), None)
    if not family:
        return "not controlled"
    return (f"{family['method']}: a claim is decided at α/(m − j), j the claims decided before it; a verdict "
            "decisive at α alone but at no step of the procedure is reported inconclusive")
