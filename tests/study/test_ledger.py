"""The study ledger on its own: leases (PID reuse, live owners, expired heartbeats), migration, failures."""
from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time

import pytest

from normlab.config import ConfigError
from normlab.study import ledger as ledger_module
from normlab.study.ledger import MAX_ATTEMPTS, Ledger, process_start


@pytest.fixture
def sleeper():
    """A live process that is not ours to hold runs: its PID stands in for a worker's."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def held_by(reg: Ledger, run_id: str, pid: int, host: str, start: int | None, heartbeat: float) -> None:
    with reg._tx() as db:
        db.execute("UPDATE runs SET status = 'running', owner_pid = ?, owner_host = ?, owner_start = ?, heartbeat = ?, "
                   "attempts = 1 WHERE id = ?", (pid, host, start, heartbeat, run_id))


def one_run(tmp_path) -> Ledger:
    reg = Ledger(tmp_path)
    reg.add_runs([("a", {"x": 1})])
    return reg


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process start times come from /proc")
def test_a_reused_pid_is_taken_over(tmp_path, sleeper):
    # the PID is alive, but it is another process than the one that claimed the run (it started at another time)
    reg = one_run(tmp_path)
    held_by(reg, "a", sleeper.pid, socket.gethostname(), process_start(sleeper.pid) + 1, time.time())
    assert reg.claim_next(os.getpid())[0] == "a"
    assert reg.rows()[0]["owner_pid"] == os.getpid() and reg.rows()[0]["attempts"] == 2


def test_a_live_owner_keeps_its_run(tmp_path, sleeper):
    reg = one_run(tmp_path)
    held_by(reg, "a", sleeper.pid, socket.gethostname(), process_start(sleeper.pid), time.time())
    assert reg.claim_next(os.getpid()) is None


def test_an_expired_lease_on_another_host_is_taken_over(tmp_path):
    reg = one_run(tmp_path)
    # another host's PID means nothing here (1 is alive on every Linux): only the heartbeat tells
    held_by(reg, "a", 1, "elsewhere", 123, time.time())
    assert reg.claim_next(os.getpid()) is None
    held_by(reg, "a", 1, "elsewhere", 123, time.time() - ledger_module.LEASE_S - 1)
    assert reg.claim_next(os.getpid())[0] == "a"


def test_a_worker_heartbeat_keeps_its_lease(tmp_path, monkeypatch):
    monkeypatch.setattr(ledger_module, "LEASE_S", 0.4)  # beats every 0.1 s
    reg = one_run(tmp_path)
    other = Ledger(tmp_path)
    run_id, _ = reg.claim_next(os.getpid())
    with reg.holding(run_id, os.getpid()):
        time.sleep(1.0)  # 2.5 leases: only the heartbeat keeps the run
        assert other.claim_next(os.getpid()) is None
    time.sleep(0.6)  # no more beats: the lease runs out, even though its owner (this process) is alive
    assert other.claim_next(os.getpid())[0] == "a"


def test_a_ledger_without_lease_columns_is_migrated(tmp_path):
    db = sqlite3.connect(tmp_path / "study.sqlite")
    db.executescript("CREATE TABLE runs (id TEXT PRIMARY KEY, config TEXT NOT NULL, status TEXT NOT NULL DEFAULT "
                     "'pending', owner_pid INTEGER, attempts INTEGER NOT NULL DEFAULT 0, started REAL, finished REAL, "
                     "result TEXT); INSERT INTO runs (id, config) VALUES ('a', '{}');")
    db.commit()
    db.close()
    reg = Ledger(tmp_path)
    with reg._tx() as db:
        columns = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
    assert {"owner_host", "owner_start", "heartbeat"} <= columns
    assert reg.claim_next(os.getpid())[0] == "a" and reg.rows()[0]["owner_host"] == socket.gethostname()
    Ledger(tmp_path)  # opening it again: nothing left to migrate
    assert reg.schema == 0  # made before schemas were recorded: its rows are read as schema 0 wrote them


def test_a_ledger_records_its_schema_and_one_a_newer_normlab_made_is_refused(tmp_path):
    from normlab.compat import SCHEMA_VERSION

    assert Ledger(tmp_path / "new").schema == SCHEMA_VERSION == Ledger(tmp_path / "new").schema
    db = sqlite3.connect(tmp_path / "new" / "study.sqlite")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    with pytest.raises(ConfigError, match=rf"written by a newer normlab \(schema {SCHEMA_VERSION + 1}\); this "
                                          rf"normlab reads schemas 0 to {SCHEMA_VERSION}"):
        Ledger(tmp_path / "new")


def test_a_stored_number_for_a_word_is_read_as_the_word_only_under_the_schema_that_wrote_it(tmp_path):
    """Schema 0 wrote `train.grad_clip = 0` for `off`; a worker claims it typed, in today's spelling. Schema 1
    writes words as words, so a 0 there is no word of its: the run fails, saying why, and no worker stops."""
    from normlab.config import validate_config
    from normlab.study.jobs import claim_jobs

    stored = validate_config({}).to_dict()
    stored["train"]["grad_clip"] = 0.0
    old = Ledger(tmp_path / "old")
    with old._tx() as db:
        db.execute("PRAGMA user_version = 0")
    old.schema = 0
    old.add_runs([("a", stored)])
    [(_, config)] = claim_jobs(old, os.getpid(), ["a"], stack_runs=True)
    assert config.train.grad_clip == "off"
    new = Ledger(tmp_path / "new")
    new.add_runs([("a", stored)])
    assert claim_jobs(new, os.getpid(), ["a"], stack_runs=False) == []
    [failed] = new.failed()
    assert failed["attempts"] == MAX_ATTEMPTS and "train.grad_clip: 0 is not a value here" in failed["reason"]


def test_failed_runs_come_with_their_reasons(tmp_path):
    reg = one_run(tmp_path)
    for attempt in range(MAX_ATTEMPTS):
        assert reg.progress() == (0, 1)  # retries left: not settled
        run_id, _ = reg.claim_next(os.getpid())
        reg.fail(run_id, f"RuntimeError: boom {attempt}\nTraceback (most recent call last): ...")
    assert reg.claim_next(os.getpid()) is None and reg.progress() == (1, 1)
    [failed] = reg.failed()
    assert failed["id"] == "a" and failed["attempts"] == MAX_ATTEMPTS and failed["config"] == {"x": 1}
    assert failed["reason"].startswith(f"RuntimeError: boom {MAX_ATTEMPTS - 1}\n")


@pytest.mark.parametrize("content", [os.urandom(4096), b"not a database, just some text\n" * 50])
def test_a_corrupt_ledger_is_a_clear_error(tmp_path, content):
    (tmp_path / "study.sqlite").write_bytes(content)
    with pytest.raises(ConfigError, match=r"study\.sqlite' is not a normlab study ledger.*not a database"):
        Ledger(tmp_path)
    assert (tmp_path / "study.sqlite").read_bytes() == content  # left as it was


def test_a_stored_presets_older_fields_move_to_knobs_only_under_the_schema_that_wrote_them():
    """Schema 0 stored C14's stress learning rates as a preset field; schema 1 stores knobs, so a field of that
    name there is not read as the knob (it is no field of today's Preset, and is dropped)."""
    import dataclasses

    from normlab.study.presets import PRESETS, stored_preset

    old = {**dataclasses.asdict(PRESETS["standard"]), "stress_lrs": [0.5, 0.7]}
    assert stored_preset(old, schema=0).knobs["C14"]["stress_lrs"] == [0.5, 0.7]
    assert stored_preset(old, schema=1) == stored_preset(dataclasses.asdict(PRESETS["standard"]), schema=1)


def test_a_stored_config_this_normlab_refuses_fails_its_run_with_the_reason_and_the_worker_goes_on(tmp_path):
    """A stacking worker groups the runs it claims by their configs: one that no longer validates is failed with
    the validation's words, never raised inside the claim (which stopped the worker), and the valid runs beside
    it are handed on, typed."""
    from normlab.config import RunConfig, validate_config
    from normlab.study.jobs import claim_jobs

    good = validate_config({}).to_dict()
    bad = {**good, "model": {**good["model"], "scheme": "gone"}}
    reg = Ledger(tmp_path)
    reg.add_runs([("bad", bad), ("good", good)])
    jobs = claim_jobs(reg, os.getpid(), ["bad", "good"], stack_runs=True)
    assert [rid for rid, _ in jobs] == ["good"] and isinstance(jobs[0][1], RunConfig)
    [failed] = reg.failed()
    assert failed["id"] == "bad" and "'gone'" in failed["reason"] and "scheme" in failed["reason"]


def test_a_newer_normlabs_ledger_is_refused_before_anything_is_written_to_it(tmp_path):
    """Its journal mode (the first thing an open sets) and its bytes stay as they were."""
    from normlab.compat import SCHEMA_VERSION

    db = sqlite3.connect(tmp_path / "study.sqlite")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.execute("CREATE TABLE runs (id TEXT PRIMARY KEY, config TEXT NOT NULL)")
    db.commit()
    db.close()
    before = (tmp_path / "study.sqlite").read_bytes()
    with pytest.raises(ConfigError, match="written by a newer normlab"):
        Ledger(tmp_path)
    assert (tmp_path / "study.sqlite").read_bytes() == before
    db = sqlite3.connect(tmp_path / "study.sqlite")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    db.close()


def test_each_run_keeps_the_rules_it_was_claimed_under_and_the_manifest_lists_them(tmp_path):
    """A held-out study's freeze is checkable: the ledger stores the rules' fingerprint of the process that claimed
    each run (an older ledger gains the column), and `StudyRuns.manifest` lists every run with its seed, start,
    end and that fingerprint."""
    import json

    from normlab.study.records import RunRecord
    from normlab.study.rules import fingerprint
    from tests.conftest import tiny_config

    config = tiny_config(train={"seed": 7}).to_dict()
    reg = Ledger(tmp_path)
    reg.add_runs([("a", config), ("b", config)])
    (rid, _), = reg.claim_group(os.getpid(), {"a"})
    reg.finish(rid, RunRecord(id=rid, config=tiny_config(train={"seed": 7}), status="completed", val_loss=2.0))
    rows = {r["id"]: r for r in reg.rows()}
    assert rows["a"]["rules"] == fingerprint() and rows["b"]["rules"] is None  # "b" never started
    manifest = json.loads(json.dumps(reg.study_runs({"a", "b"}).manifest(fingerprint())))  # as written
    assert manifest["rules"] == fingerprint()
    a = next(r for r in manifest["runs"] if r["id"] == "a")
    assert a["seed"] == 7 and a["rules"] == fingerprint() and a["started"] <= a["finished"]
    assert a["started"].endswith("+00:00")  # UTC, to the second
