"""The table of synthetic verdict scenarios both verdict test modules fill (C1–C16 in test_verdicts.py, F1–F8
in test_frontier_verdicts.py): each registers situations that must give an outcome, and which outcomes each
claim's rule was shown to reach."""
from __future__ import annotations

from typing import Any, Callable

import pytest

NO_VALUE = object()


class Scenarios:
    """`scenario = Scenarios()`; `@scenario("C1", HOLDS, 0.25)` registers a function that builds a case. A
    scenario with `bug=` is a strict xfail and does not count toward its claim's reached outcomes."""

    def __init__(self):
        self.params: list[Any] = []  # pytest params (claim, builder, expected, value)
        self.covered: dict[str, set[str]] = {}  # claim -> the outcomes its scenarios reach

    def __call__(self, claim: str, expected: str, value: Any = NO_VALUE, *, bug: str | None = None, raises=None):
        def deco(fn: Callable[[], Any]):
            marks = [pytest.mark.xfail(strict=True, reason=f"BUG: {bug}", raises=raises)] if bug else []
            self.params.append(pytest.param(claim, fn, expected, value, id=f"{claim}-{fn.__name__}", marks=marks))
            if not bug:
                self.covered.setdefault(claim, set()).add(expected)
            return fn
        return deco


def check_verdict(v, claim: str, expected: str, value: Any, check: Callable | None) -> None:
    """A scenario's verdict: of its claim, the expected outcome, the hand-computed value (where given) and the
    scenario's own assertions (a lambda's `and` chain that returns False is a miss)."""
    assert v.id == claim
    assert v.verdict == expected, v.summary
    if value is not NO_VALUE:
        assert v.value == (None if value is None else pytest.approx(value, rel=1e-9, abs=1e-12)), v.summary
    if check:
        assert check(v) is not False, v.summary
