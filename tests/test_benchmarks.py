"""Every benchmark still imports: they run outside the suite (by hand, or to regenerate a committed result), so a
name they import from normlab that moved would otherwise be found only the next time one is run."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py"))


def test_every_benchmark_is_listed():
    assert len(BENCHMARKS) >= 20, BENCHMARKS  # the folder was found, not an empty glob


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.stem)
def test_a_benchmark_imports(path):
    """Its module body runs (imports, constants), not its main: each keeps that behind `__name__ == "__main__"`."""
    assert 'if __name__ == "__main__":' in path.read_text("utf-8"), path.name
    spec = importlib.util.spec_from_file_location(f"benchmark_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert callable(getattr(module, "main", None)), f"{path.name} has no main()"
