"""The study ledger: a SQLite database in the study directory, `DIR/study.sqlite`.

    runs(id, config, status, owner_pid, owner_host, owner_start, heartbeat, attempts, started, finished, result,
         rules)                         rules: the fingerprint (study/rules.py) of the code that claimed the run
    measurements(claim, value)          non-training measurements (timings, constants, causality)
    meta(key, value)                    the study's preset, claims, seeds

SQLite's `user_version` holds the schema the ledger was created under (`compat.SCHEMA_VERSION`; 0: before it was
recorded). Its rows are read as that schema wrote them (`config.upgrade_stored`), and a ledger a newer normlab
created is refused.

Run ids are hashes of their resolved configs, so adding a run twice is a no-op. A run is
claimed in one `BEGIN IMMEDIATE` transaction (one writer at a time), so two `normlab study`
processes on one directory never train the same run.

A claimed run is held under a lease: its worker heartbeats it every LEASE_S / 4 from a
daemon thread. A `running` run is taken over (its trainer resumes from its last
checkpoint) when its heartbeat is older than LEASE_S, from any host; or, on the owner's
own host, as soon as the owner process is gone, or its PID now belongs to a process that
started at another time (PIDs are reused, so "a process with that PID is alive" alone
would keep a dead worker's run locked forever).
"""
from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from normlab.compat import SCHEMA_VERSION, newer_schema
from normlab.config import ConfigError
from normlab.study.records import RunRecord
from normlab.study.validation import validated

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY, config TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending',
    owner_pid INTEGER, attempts INTEGER NOT NULL DEFAULT 0, started REAL, finished REAL, result TEXT,
    owner_host TEXT, owner_start INTEGER, heartbeat REAL
);
CREATE TABLE IF NOT EXISTS measurements (claim TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
# columns older ledgers lack: the leases', and the rules' fingerprint each run was claimed under (the manifest's)
LEASE_COLUMNS = {"owner_host": "TEXT", "owner_start": "INTEGER", "heartbeat": "REAL", "rules": "TEXT"}
DONE = ("completed", "failed_to_train", "diverged")  # trained to the end: a result, never retried
MAX_ATTEMPTS = 3  # a run that failed (raised) this many times is left as failed
OPEN_TRIES = 100  # × 50 ms: switching a new database to WAL fails at once (no busy wait) while another opens it
LEASE_S = 60.0  # a running run whose heartbeat is older than this is taken over; workers beat every LEASE_S / 4


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_start(pid: int | None) -> int | None:
    """When process `pid` started (clock ticks since boot, /proc/PID/stat field 22); None if unknown or not Linux."""
    if not pid:
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces and ")"
    return int(fields[19]) if len(fields) > 19 else None  # fields[0] is field 3 (state)


def settled(status: str, attempts: int) -> bool:
    """A run no worker will take again: completed, diverged, or failed with its attempts exhausted."""
    return status in DONE or (status == "failed" and attempts >= MAX_ATTEMPTS)


def owner_gone(owner_pid: int | None, owner_host: str | None, owner_start: int | None, heartbeat: float | None,
               now: float, lease_s: float) -> bool:
    """Whether a `running` run's owner has lost it (see the module docstring)."""
    if heartbeat is None or now - heartbeat > lease_s:
        return True
    # another host's PID means nothing here: only its lease tells (None: a pre-lease row, from this host)
    if owner_host not in (None, socket.gethostname()):
        return False
    if not pid_alive(owner_pid):
        return True
    start = process_start(owner_pid)
    return owner_start is not None and start is not None and start != owner_start


QUIET_SPANS = "quiet_spans"  # the meta key of `Ledger.add_quiet_span`

class Ledger:
    FILENAME = "study.sqlite"

    def __init__(self, study_dir: str | Path, lease_s: float | None = None):
        self.dir = Path(study_dir)
        self.path = self.dir / self.FILENAME
        self.lease_s = LEASE_S if lease_s is None else lease_s
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            self._open()
        except sqlite3.DatabaseError as e:  # a text file, random bytes, a foreign database; or a lasting lock
            raise ConfigError(self._open_error(e)) from None

    def _open_error(self, error: sqlite3.DatabaseError) -> str:
        if "locked" in str(error):
            return f"{str(self.path)!r} stayed locked by another process (SQLite: {error}); run again once it is done"
        return (f"{str(self.path)!r} is not a normlab study ledger (SQLite: {error}); valid: the study.sqlite "
                "that `normlab study` writes. Move it away or choose another study directory")

    def _open(self) -> None:
        for attempt in range(OPEN_TRIES):
            try:
                return self._create_or_migrate()
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or attempt == OPEN_TRIES - 1:
                    raise
                time.sleep(0.05)

    def _create_or_migrate(self) -> None:
        db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            # a newer normlab's ledger is refused before anything is written to it (its journal mode included)
            why = newer_schema(db.execute("PRAGMA user_version").fetchone()[0], f"study ledger {str(self.path)!r}")
            if why:
                raise ConfigError(why)
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":  # set once; later opens need no lock
                db.execute("PRAGMA journal_mode=WAL")  # readers do not block the writer
            db.execute("BEGIN IMMEDIATE")  # two processes opening an old ledger: one migrates, one waits
            if db.execute("SELECT name FROM sqlite_master WHERE name = 'runs'").fetchone() is None:  # a new ledger
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self.schema = db.execute("PRAGMA user_version").fetchone()[0]
            for statement in filter(str.strip, SCHEMA.split(";")):
                db.execute(statement)
            have = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
            for column, kind in LEASE_COLUMNS.items():  # a ledger written before leases: add their columns
                if column not in have:
                    db.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")
            db.execute("COMMIT")
        finally:
            db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            db.execute("BEGIN IMMEDIATE")
            yield db
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        finally:
            db.close()

    def run_dir(self, run_id: str) -> Path:
        return self.dir / "runs" / run_id

    # -- meta and measurements ------------------------------------------------------------
    def set_meta(self, key: str, value: Any) -> None:
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def add_quiet_span(self, what: str, start: float, end: float) -> None:
        """A stretch of the study's own measuring on a quiet machine (the reference run, the claims' timings and
        checks), when by design no run trains: `quiet_spans` in the meta, [what, start, end] each (time.time()), so
        that a reading of the workers' busy fraction (benchmarks/busy_fraction.py) tells it from waiting."""
        with self._tx() as db:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (QUIET_SPANS,)).fetchone()
            spans = json.loads(row[0]) if row else []
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                       (QUIET_SPANS, json.dumps(spans + [[what, start, end]])))

    def meta(self) -> dict[str, Any]:
        with self._tx() as db:
            return {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}

    def set_measurement(self, claim: str, value: dict[str, Any] | None) -> None:
        """Store a claim's measurement; None records that the claim was measured and has nothing to store."""
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO measurements VALUES (?, ?)", (claim, json.dumps(value)))

    def measurements(self) -> dict[str, dict[str, Any]]:
        return {c: v for c, v in self._measurement_rows().items() if v is not None}

    def measured(self) -> set[str]:
        """The claims whose measurement is done (stored, or found to have none)."""
        return set(self._measurement_rows())

    def _measurement_rows(self) -> dict[str, dict[str, Any] | None]:
        with self._tx() as db:
            return {c: json.loads(v) for c, v in db.execute("SELECT claim, value FROM measurements")}

    # -- runs -----------------------------------------------------------------------------
    def add_runs(self, runs: list[tuple[str, dict[str, Any]]]) -> int:
        """Register (id, config) pairs; existing ids are left untouched. Returns how many were new."""
        with self._tx() as db:
            before = db.total_changes
            db.executemany("INSERT OR IGNORE INTO runs (id, config) VALUES (?, ?)",
                           [(rid, json.dumps(cfg, sort_keys=True)) for rid, cfg in runs])
            return db.total_changes - before

    def claim_next(self, pid: int, ids: set[str] | None = None) -> tuple[str, dict[str, Any]] | None:
        """Atomically take the next runnable run for process `pid` (of this host): pending, failed (retries
        left), or running under an owner that lost it (`owner_gone`)."""
        claimed = self.claim_group(pid, ids)
        return claimed[0] if claimed else None

    def claim_group(self, pid: int, ids: set[str] | None = None,
                    group_of: Callable[[dict[str, Any]], str] | None = None,
                    limit_of: Callable[[dict[str, Any]], int] = lambda config: 1) -> list[tuple[str, dict[str, Any]]]:
        """Atomically take the next runnable run and up to `limit_of(its config) − 1` more runnable runs
        whose `group_of(config)` equals its own (runs a worker can train as one stack), in ledger order."""
        from normlab.study.rules import fingerprint  # the rules this process judges by, recorded with each start

        now, claimed, key, limit, rules = time.time(), [], None, 1, fingerprint()
        with self._tx() as db:
            rows = db.execute("SELECT id, config, status, attempts, owner_pid, owner_host, owner_start, "
                              "COALESCE(heartbeat, started) FROM runs "
                              "WHERE status NOT IN ('completed', 'failed_to_train', 'diverged') ORDER BY rowid").fetchall()
            for rid, config, status, attempts, *owner in rows:
                if ids is not None and rid not in ids:
                    continue
                if status == "running" and not owner_gone(*owner, now, self.lease_s):
                    continue
                if status == "failed" and attempts >= MAX_ATTEMPTS:
                    continue
                cfg = json.loads(config)
                mine = group_of(cfg) if group_of is not None else None
                if claimed and (group_of is None or mine != key):
                    continue
                if not claimed:
                    key, limit = mine, limit_of(cfg)
                db.execute("UPDATE runs SET status = 'running', owner_pid = ?, owner_host = ?, owner_start = ?, "
                           "heartbeat = ?, attempts = attempts + 1, started = ?, rules = ? WHERE id = ?",
                           (pid, socket.gethostname(), process_start(pid), now, now, rules, rid))
                claimed.append((rid, cfg))
                if len(claimed) >= limit:
                    break
        return claimed

    def heartbeat(self, run_id: str, pid: int) -> bool:
        """Renew `pid`'s lease on a run; False if it no longer holds it (finished, or taken over)."""
        with self._tx() as db:
            cursor = db.execute("UPDATE runs SET heartbeat = ? WHERE id = ? AND status = 'running' AND "
                                "owner_pid = ? AND owner_host = ?", (time.time(), run_id, pid, socket.gethostname()))
            return cursor.rowcount == 1

    @contextmanager
    def holding(self, run_ids: str | list[str], pid: int) -> Iterator[None]:
        """Heartbeat `pid`'s lease on `run_ids` (one run, or a group's) from a daemon thread while the body trains."""
        run_ids = [run_ids] if isinstance(run_ids, str) else list(run_ids)
        stop = threading.Event()
        beat = threading.Thread(target=self._beat, args=(run_ids, pid, stop), daemon=True, name="lease")
        beat.start()
        try:
            yield
        finally:
            stop.set()
            beat.join()

    def _beat(self, run_ids: list[str], pid: int, stop: threading.Event) -> None:
        while not stop.wait(self.lease_s / 4):
            for run_id in run_ids:
                try:
                    self.heartbeat(run_id, pid)  # each beat opens its own connection: sqlite3's are per thread
                except sqlite3.Error:  # a busy database: the lease outlasts three missed beats
                    pass

    def release(self, run_ids: list[str], pid: int) -> None:
        """Hand back runs `pid` holds, interrupted (Ctrl-C): pending again, the attempt not counted."""
        with self._tx() as db:
            db.executemany("UPDATE runs SET status = 'pending', attempts = MAX(attempts - 1, 0), owner_pid = NULL, "
                           "heartbeat = NULL WHERE id = ? AND status = 'running' AND owner_pid = ? AND owner_host = ?",
                           [(rid, pid, socket.gethostname()) for rid in run_ids])

    def finish(self, run_id: str, record: RunRecord) -> None:
        with self._tx() as db:
            db.execute("UPDATE runs SET status = ?, finished = ?, result = ?, owner_pid = NULL, heartbeat = NULL "
                       "WHERE id = ?",
                       (record.status, time.time(), json.dumps(record.to_dict()), run_id))

    def fail(self, run_id: str, reason: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE runs SET status = 'failed', finished = ?, result = ?, owner_pid = NULL, "
                       "heartbeat = NULL WHERE id = ?",
                       (time.time(), json.dumps({"reason": reason}), run_id))

    def counts(self, ids: set[str] | None = None) -> dict[str, int]:
        out: dict[str, int] = {}
        for row in self.rows():
            if ids is None or row["id"] in ids:
                out[row["status"]] = out.get(row["status"], 0) + 1
        return out

    def progress(self, ids: set[str] | None = None) -> tuple[int, int]:
        """(settled, total) runs: settled ones no worker will take again (see `settled`). An id in `ids` that
        was never registered counts in the total, unsettled: a study missing runs is not complete."""
        rows = [r for r in self.rows() if ids is None or r["id"] in ids]
        return sum(settled(r["status"], r["attempts"]) for r in rows), len(rows) if ids is None else len(ids)

    def held_elsewhere(self, ids: set[str], pid: int) -> list[str]:
        """The runs in `ids` another live process is training now: not `pid`'s, and not a lost owner's (the next
        claim takes those)."""
        now = time.time()
        with self._tx() as db:
            rows = db.execute("SELECT id, owner_pid, owner_host, owner_start, heartbeat FROM runs "
                              "WHERE status = 'running' ORDER BY rowid").fetchall()
        here = socket.gethostname()
        mine = lambda owner, host: owner == pid and host in (None, here)  # noqa: E731 (a pid means a process only here)
        return [rid for rid, owner, host, start, beat in rows
                if rid in ids and not mine(owner, host) and not owner_gone(owner, host, start, beat, now, self.lease_s)]

    def running(self) -> list[tuple[str, dict[str, Any]]]:
        """(id, config) of the runs being trained now (progress displays)."""
        with self._tx() as db:
            rows = db.execute("SELECT id, config FROM runs WHERE status = 'running' ORDER BY rowid").fetchall()
        return [(rid, json.loads(config)) for rid, config in rows]

    def failed(self, ids: set[str] | None = None) -> list[dict[str, Any]]:
        """The failed runs: id, config, attempts, and the reason their last attempt raised."""
        with self._tx() as db:
            rows = db.execute("SELECT id, config, attempts, result FROM runs WHERE status = 'failed' "
                              "ORDER BY rowid").fetchall()
        return [{"id": rid, "config": json.loads(config), "attempts": attempts,
                 "reason": (json.loads(result) if result else {}).get("reason") or "unknown"}
                for rid, config, attempts, result in rows if ids is None or rid in ids]

    def records(self, ids: set[str] | None = None) -> list[RunRecord]:
        """Records of the finished runs (completed, failed to train, or diverged)."""
        with self._tx() as db:
            rows = db.execute(f"SELECT id, result FROM runs WHERE status IN {DONE} "
                              "ORDER BY rowid").fetchall()
        # runs the plateau stop ended are censored, unless continued to their budget (study/validation.py)
        records = [RunRecord.from_dict(json.loads(r)) for rid, r in rows if ids is None or rid in ids]
        return validated(records, self.dir)

    def configs(self) -> list[tuple[str, dict[str, Any]]]:
        """(id, config) of every registered run, in registration order."""
        with self._tx() as db:
            return [(rid, json.loads(config)) for rid, config in
                    db.execute("SELECT id, config FROM runs ORDER BY rowid").fetchall()]

    def study_runs(self, ids: set[str]) -> "StudyRuns":
        """What the ledger holds of these runs, read at once (the report's): their rows, seeds, records and the
        claims' measurements."""
        seeds = {rid: config["train"].get("seed") for rid, config in self.configs() if rid in ids}
        return StudyRuns([r for r in self.rows() if r["id"] in ids], seeds, self.records(ids), self.measurements())

    def rows(self) -> list[dict[str, Any]]:
        with self._tx() as db:
            cols = ["id", "status", "owner_pid", "owner_host", "heartbeat", "attempts", "started", "finished", "rules"]
            return [dict(zip(cols, r)) for r in db.execute(f"SELECT {', '.join(cols)} FROM runs ORDER BY rowid")]


@dataclass(frozen=True)
class StudyRuns:
    """A study's runs as the ledger held them when read (`Ledger.study_runs`): what its report counts, times and
    lists, all from one reading."""

    rows: list[dict[str, Any]]  # `Ledger.rows`, the study's only
    seeds: dict[str, Any]  # run id → its train.seed
    records: list[RunRecord]  # the finished runs' (`Ledger.records`)
    measurements: dict[str, dict[str, Any]]

    def unfinished(self) -> dict[str, int]:
        """How many runs are pending, running, or failed to run (their attempts spent or not)."""
        out: dict[str, int] = {}
        for row in self.rows:
            if row["status"] in ("pending", "running", "failed"):
                out[row["status"]] = out.get(row["status"], 0) + 1
        return out

    def train_wall_s(self) -> float:
        """From the first run's start to the last run's end (pending runs have neither)."""
        started = [r["started"] for r in self.rows if r["started"]]
        finished = [r["finished"] for r in self.rows if r["finished"]]
        return max(finished) - min(started) if started and finished else 0.0

    def manifest(self, fingerprint: str) -> dict[str, Any]:
        """manifest.json: each run with its seed, its start and end (UTC) and the fingerprint of the rules that
        claimed it, beside the fingerprint the report judged by (`fingerprint`), so that a reader (and
        tests/test_results.py) can check that every run of a held-out study started after its rules were frozen."""
        import datetime

        def utc(t: float | None) -> str | None:
            return None if t is None else datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(
                timespec="seconds")

        return {"rules": fingerprint, "runs": [{"id": r["id"], "seed": self.seeds.get(r["id"]), "status": r["status"],
                                                "started": utc(r["started"]), "finished": utc(r["finished"]),
                                                "rules": r["rules"]} for r in self.rows]}
