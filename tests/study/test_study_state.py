"""What a study reports about itself: partial until every run is settled, failed runs with their reasons,
and bad study input as a one-line error that leaves nothing on disk."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from normlab.cli import app
from normlab.study.ledger import MAX_ATTEMPTS, Ledger
from normlab.study.load import load_study
from normlab.study.runner import run_study
from tests.conftest import judged_study
from tests.study.test_study import TINY

SETTINGS = [*TINY, "train.steps=20"]
runner = CliRunner()


def cli_study(out) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "normlab", "study", "--preset", "quick", "--out", str(out), "--claims", "C13",
            "--workers", "1",
            "--seeds", "0,1", "--no-init-pass"]
    for item in SETTINGS:
        args += ["--set", item]
    return subprocess.run(args, capture_output=True, text=True, timeout=600)


def read_report(out) -> tuple[list[str], str, dict]:
    md = (out / "report.md").read_text(encoding="utf-8").splitlines()
    return md, (out / "report.html").read_text(encoding="utf-8"), json.loads((out / "verdicts.json").read_text())


def test_partial_until_every_run_settles_then_failed_runs_are_listed(tmp_path):
    out = tmp_path / "study"
    spec = load_study("quick", claims=["C13"], seeds=[0, 1], overrides=SETTINGS)
    ids = [r.id for r in spec.runs]
    reg = Ledger(out)
    reg.add_runs([(r.id, r.config.to_dict()) for r in spec.runs])
    held, _ = reg.claim_next(os.getpid(), {ids[0]})  # as another `normlab study` training it would
    with reg.holding(held, os.getpid()):
        status, _ = judged_study(spec, out, run_study(spec, out, workers=1))
        assert (status.final, status.done, status.total) == (False, 3, 4)
        # (a second `normlab study` would now wait for the held run: tests/study/test_study.py runs two)
        from normlab.study.publish import publish

        publish(out)  # as the first process to finish writes its report: never final while a run is held
        md, html, doc = read_report(out)
        assert "partial: 3 of 4 runs" in md[0]
        assert '<main>\n<p class="partial" id="partial"' in html and "partial: 3 of 4 runs" in html
        assert (doc["final"], doc["status"], doc["done"], doc["total"]) == (False, "partial: 3 of 4 runs", 3, 4)
        report = runner.invoke(app, ["report", str(out)])
        assert report.exit_code == 0 and "partial: 3 of 4 runs" in report.output
    for _ in range(MAX_ATTEMPTS):  # the run fails on every attempt
        reg.fail(held, "RuntimeError: loss <b>exploded</b>\nTraceback (most recent call last):\n  File x")
        reg.claim_next(os.getpid(), {held})

    cli = cli_study(out)
    assert cli.returncode == 4, cli.stderr
    assert "failed runs (1)" in cli.stdout and held in cli.stdout and "RuntimeError: loss" in cli.stdout
    md, html, doc = read_report(out)
    assert md[0].startswith("# ") and doc["final"] is True and doc["status"] == "final"
    [failed] = doc["failed_runs"]
    assert failed["id"] == held and failed["attempts"] == MAX_ATTEMPTS and "train.seed" in failed["settings"]
    assert failed["reason"].startswith("RuntimeError: loss <b>exploded</b>\nTraceback")
    row = next(line for line in md if line.startswith(f"| {held} |"))
    assert "## Failed runs" in md and "Traceback" not in row
    assert row.endswith("| 3 | RuntimeError: loss &lt;b&gt;exploded&lt;/b&gt; |")
    assert 'id="failed-runs"' in html and "RuntimeError: loss &lt;b&gt;exploded&lt;/b&gt;</td>" in html
    report = runner.invoke(app, ["report", str(out)])
    assert report.exit_code == 0 and "failed runs (1)" in report.output and held in report.output


def invoke_study(tmp_path, *args):
    out = tmp_path / "study"
    result = runner.invoke(app, ["study", "--out", str(out), "--claims", "C13", *args])
    errors = [line for line in result.output.splitlines() if line.strip()]
    return result, out, errors


@pytest.mark.parametrize("content", [os.urandom(2048), b"# my notes, not a database\n" * 40])
def test_a_corrupt_study_sqlite_is_a_one_line_error(tmp_path, content):
    out = tmp_path / "study"
    out.mkdir()
    (out / "study.sqlite").write_bytes(content)
    for args in (["study", "--out", str(out), "--claims", "C13"], ["report", str(out)]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
        error = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(error) == 1 and "study.sqlite' is not a normlab study ledger" in error[0]
        assert "file is not a database" in error[0]
    assert (out / "study.sqlite").read_bytes() == content


STUDY_FILES = {
    "empty axis": ('[axes]\n"model.norm" = []\n', "study axis 'model.norm' has no values (got []); give a "
                   'non-empty list, e.g. "model.norm" = [value1, value2]'),
    "bad second value": ('[axes]\n"model.norm" = ["layernorm", "<script>alert(1)</script>"]\n',
                         "study axis 'model.norm': value '<script>alert(1)</script>' is not valid: "
                         "model: unknown normalizer '<script>alert(1)</script>'. Valid: layernorm, rmsnorm"),
    "bad depth": ('[axes]\n"model.n_layer" = [2, "deep"]\n', "study axis 'model.n_layer': value 'deep'"),
    "scalar claims": ('claims = "C13"\n', 'claims must be a list, e.g. claims = ["C13"] (got \'C13\')'),
    "scalar seeds": ("seeds = 3\n", "seeds must be a list, e.g. seeds = [0, 1] (got 3)"),
    "string seed": ('seeds = [0, "1"]\n', "seeds must be integers, e.g. [0, 1] (got '1' in [0, '1'])"),
    "float seed": ("seeds = [1.5]\n", "seeds must be integers, e.g. [0, 1] (got 1.5 in [1.5])"),
}


@pytest.mark.parametrize("case", list(STUDY_FILES))
def test_bad_study_file_is_a_one_line_error_that_leaves_nothing(tmp_path, case):
    text, message = STUDY_FILES[case]
    study_file = tmp_path / "s.toml"
    study_file.write_text('preset = "quick"\n' + text)
    out = tmp_path / "study"
    result = runner.invoke(app, ["study", "--study", str(study_file), "--out", str(out)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    error = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(error) == 1 and message in error[0], error
    assert not out.exists()  # no study directory, no study.sqlite


def test_non_integer_seeds_on_the_command_line(tmp_path):
    out = tmp_path / "study"
    result = runner.invoke(app, ["study", "--out", str(out), "--claims", "C13", "--seeds", "0,x"])
    assert result.exit_code == 2 and "--seeds '0,x': seeds must be integers, e.g. --seeds 0,1,2" in result.stderr
    assert not out.exists()


def test_an_existing_directory_keeps_no_ledger_after_bad_input(tmp_path):
    out = tmp_path / "study"
    out.mkdir()  # the user's directory stays; no study.sqlite appears in it
    result = runner.invoke(app, ["study", "--out", str(out), "--claims", "C13", "--set", "model.norm=bogus"])
    assert result.exit_code == 2 and "unknown normalizer 'bogus'" in result.stderr
    assert list(out.iterdir()) == []


def test_a_run_another_live_process_trains_is_waited_for_and_a_lost_ones_is_not(tmp_path):
    """The second of two `normlab study` processes on one directory waits for the other's runs (`wait_for_others`),
    so both end with the final report; a run whose owner died is not waited for: it is claimed again."""
    from normlab.study.runner import wait_for_others

    ledger = Ledger(tmp_path)
    ledger.add_runs([("a", {"k": 1}), ("b", {"k": 2})])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert ledger.claim_next(other.pid)[0] == "a"
        assert ledger.held_elsewhere({"a", "b"}, os.getpid()) == ["a"]
        assert ledger.held_elsewhere({"a", "b"}, other.pid) == []  # its own run is not another's
        said = []
        waits = iter([["a"], ["a"], []])
        ledger.held_elsewhere = lambda ids, pid: next(waits)
        assert wait_for_others(ledger, {"a", "b"}, said.append, poll_s=0) and len(said) == 1
        assert "another process is training 1 of this study's runs" in said[0]
        del ledger.held_elsewhere
    finally:
        other.kill()
        other.wait()
    assert ledger.held_elsewhere({"a", "b"}, os.getpid()) == []  # its owner is gone: not waited for
    assert not wait_for_others(ledger, {"a", "b"}, print, poll_s=0)


def test_a_measurement_without_its_claims_key_is_refused_as_it_is_taken(tmp_path, monkeypatch):
    """`measuring.measure_claims` answers whether every claim is measured under its current key; a measurement
    that does not carry the key it was taken under is refused then and there (stored, it would read as stale, and
    every later run of the study would measure it again and never be final), and nothing of it is stored."""
    from types import SimpleNamespace

    from normlab.study import measuring
    from normlab.study.claims import CLAIMS
    from normlab.study.presets import PRESETS

    cls = CLAIMS.get("C1")
    monkeypatch.setattr(cls, "measure_key", lambda self, preset: "k2")
    monkeypatch.setattr(cls, "measure", lambda self, preset: {"x": 1})
    plan, ledger = SimpleNamespace(claims=["C1"], preset=PRESETS["quick"]), Ledger(tmp_path)
    assert measuring.measure_claims(plan, ledger, measure=False) is False  # not yet measured
    with pytest.raises(ValueError, match="C1's measurement carries key None, not its measure_key 'k2'"):
        measuring.measure_claims(plan, ledger)
    assert ledger.measured() == set()
    monkeypatch.setattr(cls, "measure", lambda self, preset: {"x": 1, "key": "k2"})
    assert measuring.measure_claims(plan, ledger) is True
    assert measuring.measure_claims(plan, ledger, measure=False) is True and ledger.measured() == {"C1"}
    monkeypatch.setattr(cls, "measure_key", lambda self, preset: "k3")  # its recipe moved: stale again
    assert measuring.measure_claims(plan, ledger, measure=False) is False
