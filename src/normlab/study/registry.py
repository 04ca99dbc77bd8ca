"""The study registry: a SQLite database in the study directory, `DIR/study.sqlite`.

    runs(id, config, status, owner_pid, attempts, started, finished, result)
    measurements(claim, value)          non-training measurements (timings, constants, causality)
    meta(key, value)                    the study's preset, claims, seeds

Run ids are hashes of their resolved configs, so adding a run twice is a no-op. A run is
claimed in one `BEGIN IMMEDIATE` transaction (one writer at a time), so two `normlab study`
processes on one directory never train the same run; a `running` run whose owner process
is gone is taken over (its trainer resumes from its last checkpoint).
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from normlab.study.records import RunRecord

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY, config TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending',
    owner_pid INTEGER, attempts INTEGER NOT NULL DEFAULT 0, started REAL, finished REAL, result TEXT
);
CREATE TABLE IF NOT EXISTS measurements (claim TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
DONE = ("completed", "diverged")
MAX_ATTEMPTS = 3  # a run that failed (raised) this many times is left as failed


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


class Registry:
    FILENAME = "study.sqlite"

    def __init__(self, study_dir: str | Path):
        self.dir = Path(study_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / self.FILENAME
        db = sqlite3.connect(self.path, timeout=60)
        try:
            db.execute("PRAGMA journal_mode=WAL")  # readers do not block the writer
            db.executescript(SCHEMA)
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

    def meta(self) -> dict[str, Any]:
        with self._tx() as db:
            return {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}

    def set_measurement(self, claim: str, value: dict[str, Any]) -> None:
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO measurements VALUES (?, ?)", (claim, json.dumps(value)))

    def measurements(self) -> dict[str, dict[str, Any]]:
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
        """Atomically take the next runnable run for process `pid`: pending, failed (retries left), or
        running under a dead owner."""
        with self._tx() as db:
            rows = db.execute("SELECT id, config, status, owner_pid, attempts FROM runs "
                              "WHERE status NOT IN ('completed', 'diverged') ORDER BY rowid").fetchall()
            for rid, config, status, owner, attempts in rows:
                if ids is not None and rid not in ids:
                    continue
                if status == "running" and pid_alive(owner):
                    continue
                if status == "failed" and attempts >= MAX_ATTEMPTS:
                    continue
                db.execute("UPDATE runs SET status = 'running', owner_pid = ?, attempts = attempts + 1, "
                           "started = ? WHERE id = ?", (pid, time.time(), rid))
                return rid, json.loads(config)
        return None

    def finish(self, run_id: str, record: RunRecord) -> None:
        with self._tx() as db:
            db.execute("UPDATE runs SET status = ?, finished = ?, result = ?, owner_pid = NULL WHERE id = ?",
                       (record.status, time.time(), json.dumps(record.to_dict()), run_id))

    def fail(self, run_id: str, reason: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE runs SET status = 'failed', finished = ?, result = ?, owner_pid = NULL WHERE id = ?",
                       (time.time(), json.dumps({"reason": reason}), run_id))

    def counts(self, ids: set[str] | None = None) -> dict[str, int]:
        with self._tx() as db:
            rows = db.execute("SELECT id, status FROM runs").fetchall()
        out: dict[str, int] = {}
        for rid, status in rows:
            if ids is None or rid in ids:
                out[status] = out.get(status, 0) + 1
        return out

    def records(self, ids: set[str] | None = None) -> list[RunRecord]:
        """Records of the finished runs (completed or diverged)."""
        with self._tx() as db:
            rows = db.execute("SELECT id, result FROM runs WHERE status IN ('completed', 'diverged') "
                              "ORDER BY rowid").fetchall()
        return [RunRecord.from_dict(json.loads(r)) for rid, r in rows if ids is None or rid in ids]

    def rows(self) -> list[dict[str, Any]]:
        with self._tx() as db:
            cols = ["id", "status", "owner_pid", "attempts", "started", "finished"]
            return [dict(zip(cols, r)) for r in db.execute(f"SELECT {', '.join(cols)} FROM runs ORDER BY rowid")]
