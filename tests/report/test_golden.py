"""A study's report, pinned: `normlab report` on a fixed ledger must write the same report.html, report.md and
verdicts.json as when the golden files were made. The ledger is synthetic (every run's record is a function of
its config and seed, the timestamps fixed), so the report is a pure function of it; the embedded PNGs are left
out of the comparison (matplotlib versions differ in their bytes), the figures' data are not.

When a change means to alter the report, regenerate the golden files and read their diff:
    NORMLAB_GOLDEN=write python -m pytest tests/report/test_golden.py
"""
from __future__ import annotations

import importlib.util
import json
import math
import os
import sqlite3
from pathlib import Path

import pytest

GOLDEN = Path(__file__).with_name("golden")
_spec = importlib.util.spec_from_file_location("rerender", GOLDEN.parents[2] / "benchmarks" / "rerender.py")
rerender = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rerender)
CLAIMS = ["C1", "C3", "C5", "C6", "C13", "C15"]  # comparisons, per-layer trends, sub-verdicts, both init recipes
ENVIRONMENT = {"normlab": "golden", "torch": "golden", "python": "3.x", "platform": "golden", "device": "cpu",
               "torch_threads": 1, "cpu": "golden", "norm_impl": "reference", "processes": 1}


def _record(rid: str, config, seed: int):
    """A run's record as a fixed function of its config: a loss that depends on scheme, norm, lr, warmup, depth,
    init and seed; per-layer profiles with a trend per scheme; Post-LN at lr ≥ 0.01 without warmup stuck."""
    from normlab.study.records import RunRecord

    m, t = config.to_dict()["model"], config.to_dict()["train"]
    scheme, depth, lr, warmup = m["scheme"], m["n_layer"], t["lr"], t["warmup_steps"]
    stuck = scheme == "post" and ((lr >= 1e-2 and warmup == 0) or depth >= 16)
    wobble = ((seed * 7919) % 13 - 6) / 600
    loss = (3.34 if stuck else 2.2 + 0.03 * abs(math.log10(lr / 3e-3)) + (0.02 if warmup == 0 else 0)
            + (0.01 if scheme == "post" else 0) + (0.015 if m.get("final_norm") is False else 0)
            + (0.005 if m.get("norm") == "rmsnorm" else 0) + (0.01 if m.get("init") == "gpt2" else 0) + wobble)
    rise = 0.45 if scheme == "pre" else 0.05
    layers = {"residual_rms/block": [0.05] + [(l ** rise) * (1 + wobble) for l in range(1, depth)],
              "contribution_ratio/block": [math.exp(-(2.0 if scheme == "pre" else 0.3) * l / max(1, depth - 1)
                                                    + wobble) for l in range(depth)],
              "angular_distance/block": [0.3 * math.exp(-(1.5 if scheme == "pre" else 0.2) * l / max(1, depth - 1))
                                         for l in range(depth)],
              "grad_norm/block": [(1.5 - l / depth if scheme == "pre" else 0.5 + l / depth) * (1 + wobble)
                                  for l in range(depth)],
              "grad_norm/mlp.sublayer.proj.weight": [0.1 / math.sqrt(depth) if scheme == "pre" else 0.1] * depth}
    skip = {"delta_loss": [0.3 - 0.2 * l / max(1, depth - 1) for l in range(depth)],
            "effective_depth_fraction": 0.5, "effective_depth": depth // 2, "threshold": 0.01}
    steps = t["steps"]
    curve = [(s, loss + 1.2 * (1 - s / steps) ** 2) for s in range(0, steps + 1, max(1, steps // 3))]
    return RunRecord(rid, config, "failed_to_train" if stuck else "completed", steps, loss, val_curve=curve,
                     train_curve=curve, layers_init=layers, layers_final=layers, final_layers_step=steps,
                     layer_skip=None if stuck else skip, tokens_per_s=1000.0, elapsed_s=10.0)


def build_ledger(out: Path, claims: list[str] = CLAIMS, seeds: list[int] = (0, 1, 2)) -> None:
    """The study of `claims` (by default `CLAIMS`) at the quick preset with `seeds`, each run finished with
    `_record`."""
    from normlab.study.claims import CLAIMS as REGISTRY
    from normlab.study.ledger import Ledger
    from normlab.study.load import load_study

    spec = load_study("quick", claims=list(claims), seeds=list(seeds), init_pass=True)
    runs = spec.runs
    ledger = Ledger(out)
    ledger.add_runs([(r.id, r.config.to_dict()) for r in runs])
    ledger.set_meta("study", spec.record([r.id for r in runs]))
    for r in runs:
        ledger.finish(r.id, _record(r.id, r.config, r.config.train.seed))
    with sqlite3.connect(out / "study.sqlite") as db:  # fixed times: the report's wall time is part of the page
        db.execute("UPDATE runs SET started = 1000.0, finished = 1600.0")


def render(out: Path, monkeypatch) -> dict[str, str]:
    """report.html (PNG bytes left out), report.md and verdicts.json as written by `normlab report`."""
    from normlab.study import publish

    monkeypatch.setattr(publish, "environment", lambda device, *a: dict(ENVIRONMENT))
    # the rules' fingerprint moves with every rule change (tests/study/test_rules.py holds it): not the report's
    monkeypatch.setattr(publish, "rules_record", lambda: {"fingerprint": "golden"})
    publish.publish(out)
    html = (out / "report.html").read_text("utf-8")
    html = rerender.comparable("report.html", html)  # the one masking of PNG bytes, as benchmarks/rerender.py's
    return {"report.html": html, "report.md": (out / "report.md").read_text("utf-8"),
            "verdicts.json": (out / "verdicts.json").read_text("utf-8")}


def test_the_report_of_a_fixed_study_is_unchanged(tmp_path, monkeypatch):
    out = tmp_path / "study"
    build_ledger(out)
    written = render(out, monkeypatch)
    assert json.loads(written["verdicts.json"])["final"] is True
    if os.environ.get("NORMLAB_GOLDEN") == "write":
        GOLDEN.mkdir(exist_ok=True)
        for name, text in written.items():
            (GOLDEN / name).write_text(text, "utf-8")
        pytest.skip("golden files written")
    for name, text in written.items():
        golden = (GOLDEN / name).read_text("utf-8")
        assert text == golden, f"{name} differs from tests/report/golden/{name} (see the module docstring)"


def test_rerender_says_same_for_a_study_as_committed_and_names_a_file_that_differs(tmp_path):
    """benchmarks/rerender.py, the check a refactor of the study runs on the committed studies: a copy of the study
    renders as it was committed (PNG bytes aside), the study itself is left as it was, a changed file is named."""
    from normlab.study.publish import publish

    study, results = tmp_path / "study", tmp_path / "results"
    build_ledger(study, claims=["C13"], seeds=[0, 1])
    publish(study)
    results.mkdir()
    for name in rerender.COMPARED:
        (results / name).write_text((study / name).read_text("utf-8"), "utf-8")
    before = {p: p.stat().st_mtime_ns for p in study.rglob("*")}
    assert rerender.rerender(study, results) == dict.fromkeys(rerender.COMPARED, True)
    assert {p: p.stat().st_mtime_ns for p in study.rglob("*")} == before  # rendered in a copy, nothing written here
    (results / "report.md").write_text("# another report\n", "utf-8")
    assert rerender.main([f"{study}:{results}"]) == 1
