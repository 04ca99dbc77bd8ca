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


def test_the_busy_fraction_counts_each_worker_once_and_every_gap():
    """Two workers over 10 s: both busy 0–4 s, one 4–6 s, none 6–8 s (a round being judged), three runs (a stack and
    a run) 8–10 s: (2·4 + 1·2 + 0 + 2·2) / (2 · 10) = 0.7."""
    spec = importlib.util.spec_from_file_location("busy", BENCHMARKS[0].parent / "busy_fraction.py")
    busy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(busy)
    spans = [(0, 4), (0, 6), (8, 10), (8, 10), (8, 10)]
    out = busy.busy_fraction(spans, 2)
    assert out["busy_s"] == 14.0 and out["busy_fraction"] == 0.7 and out["study_span_s"] == 10
    assert out["longest_idle_s"] == 2.0  # 6–8 s, where no run trained
    assert busy.busy_fraction(spans, 2, wall_s=20)["busy_fraction"] == 0.35  # the job's wall around the study
    assert busy.busy_fraction([], 2)["busy_fraction"] is None


def test_a_validations_continued_run_counts_from_its_resumed_step_to_its_end(tmp_path):
    """A run the plateau validation continued from step 150 to 300 trained from its end (the status's last update)
    less the time its metrics say steps 150–300 took; a run that did not end, or never resumed, counts nothing."""
    import json

    spec = importlib.util.spec_from_file_location("busy", BENCHMARKS[0].parent / "busy_fraction.py")
    busy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(busy)

    def run(name: str, status: str, resumed: int | None) -> None:
        d = tmp_path / name
        d.mkdir()
        (d / "status.json").write_text(json.dumps({"status": status, "updated": 1000.0}), "utf-8")
        (d / "run.json").write_text(json.dumps({"resumed_from_step": resumed}), "utf-8")
        lines = [{"step": s, "elapsed_s": s / 10} for s in range(0, 301, 50)]  # the whole curve, 0.1 s a step
        (d / "metrics.jsonl").write_text("\n".join(json.dumps(m) for m in lines) + "\n", "utf-8")

    run("a", "completed", 150)
    run("b", "running", 150)
    run("c", "completed", None)
    assert busy.validation_spans(tmp_path) == [(985.0, 1000.0)]
    assert busy.validation_spans(tmp_path / "none") == []


def test_the_make_run_record_reads_its_five_timed_steps_and_refuses_fewer(tmp_path):
    spec = importlib.util.spec_from_file_location("make_run_record", BENCHMARKS[0].parent / "make_run_record.py")
    record = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(record)
    times = tmp_path / "study.times"
    times.write_text("standard|normlab study|10.0|20.5\nnot a step\nstandard|validate|20.5|22.0\n", "utf-8")
    assert record.read_times(times) == [("normlab study", 10.0, 20.5), ("validate", 20.5, 22.0)]
    with pytest.raises(SystemExit, match="make run has 5 steps; the times give 2"):
        record.record(record.read_times(times), tmp_path)
    # the Makefile's five commands, on this study: the study twice without its report, the report once at the end
    cmds = record.commands(tmp_path / "s")
    assert [c[c.index("-m") + 2] if "-m" in c else Path(c[1]).name for c in cmds] == [
        "study", "plateau_validation.py", "study", "plateau_validation.py", "report"]
    assert all(str(tmp_path / "s") in c for c in cmds) and [("--no-report" in c) for c in cmds] == [
        True, False, True, False, False]


def test_a_studys_quiet_measuring_is_told_from_waiting(tmp_path):
    """Two workers over 20 s: both train 0–10 s and 15–20 s; 10–13 s the study measures alone on a quiet machine
    (its ledger's `quiet_spans`), 13–15 s it waits. Busy 75 %, measuring alone 15 %, waiting the other 10 %."""
    import sqlite3

    from normlab.study.ledger import Ledger

    spec = importlib.util.spec_from_file_location("busy", BENCHMARKS[0].parent / "busy_fraction.py")
    busy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(busy)
    ledger = Ledger(tmp_path)
    with sqlite3.connect(tmp_path / "study.sqlite") as db:
        db.executemany("INSERT INTO runs (id, config, status, started, finished) VALUES (?, '{}', 'completed', ?, ?)",
                       [("a", 100.0, 110.0), ("b", 100.0, 110.0), ("c", 115.0, 120.0),
                        ("d", 115.0, 120.0)])
    ledger.add_quiet_span("measure C10", 110.0, 112.0)
    ledger.add_quiet_span("measure C16", 112.0, 113.0)
    out = busy.study_busy(tmp_path, 2)
    assert (out["busy_fraction"], out["quiet_s"], out["quiet_fraction"]) == (0.75, 3.0, 0.15)
    assert out["waiting_fraction"] == pytest.approx(0.10) and out["longest_idle_s"] == 5.0
    assert [s[0] for s in ledger.meta()["quiet_spans"]] == ["measure C10", "measure C16"]
    # the reference run, timed before the first run starts, is outside the study's own span (the default wall), and
    # inside a whole job's wall given from outside
    ledger.add_quiet_span("reference run", 95.0, 100.0)
    assert busy.study_busy(tmp_path, 2)["quiet_s"] == 3.0
    assert busy.study_busy(tmp_path, 2, wall_s=25.0)["quiet_s"] == 8.0
