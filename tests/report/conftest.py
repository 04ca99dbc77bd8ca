"""One synthetic report per test session, shared by the render and the browser tests (drawing costs seconds)."""
from __future__ import annotations

import pytest

from normlab.report import render_report
from tests.report.synthetic import render_kwargs


@pytest.fixture(scope="session")
def report(tmp_path_factory) -> dict:
    """The paths render_report returned for the synthetic study."""
    return render_report(tmp_path_factory.mktemp("report"), **render_kwargs())
