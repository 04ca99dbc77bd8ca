"""A run's config is built once: validated at most twice per distinct run config over every process of a study
(once where the study builds it, once in the worker that trains it), and `normlab report` renders from the
stored study without re-expanding today's preset.

Every validation of a RunConfig goes through pydantic's `RunConfig.model_validate` (`validate_config`,
`with_defaults`, the trainers), so a `sitecustomize` on PYTHONPATH wraps it in every process the study spawns
and logs the hash of each config it validated.
"""
from __future__ import annotations

import collections
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

COUNTER = textwrap.dedent("""
    import os
    from normlab.config import RunConfig

    _validate = RunConfig.model_validate.__func__

    def _counted(cls, obj, *args, **kwargs):
        config = _validate(cls, obj, *args, **kwargs)
        with open(os.environ["NORMLAB_VALIDATIONS"], "a") as log:
            log.write(config.hash() + "\\n")
        return config

    RunConfig.model_validate = classmethod(_counted)
""")


def _validations(tmp_path: Path, *args: str) -> collections.Counter:
    hook = tmp_path / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(COUNTER)
    log = tmp_path / "validations.log"
    log.unlink(missing_ok=True)
    path = os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "NORMLAB_VALIDATIONS": str(log)}
    done = subprocess.run([sys.executable, "-m", "normlab", *args], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode in (0, 4), done.stdout + done.stderr
    return collections.Counter(log.read_text().split()) if log.exists() else collections.Counter()


@pytest.mark.parametrize("stacking", [[], ["--stack-runs", "--workers", "1"]], ids=["alone", "stacked"])
def test_a_study_validates_each_run_config_at_most_twice(tmp_path, stacking):
    out = tmp_path / "study"
    counts = _validations(tmp_path, "study", "--preset", "quick", "--claims", "C13", "--seeds", "0",
                          "--set", "train.steps=10", "-o", str(out), *stacking)
    import sqlite3

    with sqlite3.connect(out / "study.sqlite") as db:
        run_ids = {row[0] for row in db.execute("SELECT id FROM runs")}
    assert len(run_ids) == 2
    assert run_ids <= set(counts), f"every run is validated where it is built: {counts}"
    assert max(counts.values()) <= 2, f"a config validated more than twice: {counts}"
    assert sum(counts.values()) <= 2 * len(run_ids) + 1, counts  # the runs, and the study's base once

    again = _validations(tmp_path, "report", str(out))  # from the stored study: no run is built again
    assert not run_ids & set(again), again
    assert sum(again.values()) <= 1, again  # the study's base, which groups are matched against


def test_a_study_resolves_each_runs_vocabulary_at_its_start_reading_the_corpus_once():
    """The RunSpecs a study hands on carry the corpus's vocabulary (so a record and the study's base compare
    key for key, the vocabulary included), read once per corpus; a run's id is still the hash of its config
    as built, before the vocabulary is filled in (the ids of earlier studies)."""
    from normlab.data.vocab import _read
    from normlab.study.load import load_study

    _read.cache_clear()
    spec = load_study("quick", claims=["C13", "C3"], seeds=[0, 1])
    runs = spec.runs
    assert len(runs) > 4 and {r.config.model.vocab_size for r in runs} == {65}  # tiny Shakespeare's characters
    assert _read.cache_info().misses == 1
    for r in runs:
        as_built = r.config.model_copy(update={"model": r.config.model.model_copy(update={"vocab_size": None})})
        assert r.id == as_built.hash() != r.config.hash()
    assert spec.base["model.vocab_size"] == 65
    assert list(spec.builder.tokens.values()) == [[65, None]]  # stored with the study (`StudyPlan.record`)


def test_report_reads_the_vocabulary_the_study_stored_not_the_corpus(tmp_path, monkeypatch):
    """`normlab report` rebuilds the spec from the ledger: the tokens it resolved at its start come with it, so a
    corpus moved away since (or unreadable) does not stop the report."""
    from normlab.study import plan as plan_module
    from normlab.study import runs as runs_module
    from normlab.study.load import load_study

    spec = load_study("quick", claims=["C13"], seeds=[0])
    stored = spec.record([r.id for r in spec.runs])

    def unreadable(*args):
        raise OSError("the corpus is gone")

    monkeypatch.setattr(runs_module, "vocabulary", unreadable)
    again = plan_module.plan_from_meta({"study": stored})
    assert again.base["model.vocab_size"] == 65 and again.base == spec.base
    # a study stored before its tokens were: its base keeps the vocabulary unset, as then, reading no corpus
    older = plan_module.plan_from_meta({"study": {k: v for k, v in stored.items() if k != "tokens"}})
    assert "model.vocab_size" not in older.base
