"""One process per run directory: an exclusive `flock` on DIR/.lock, released when the process dies.

Two `normlab train` on one `--out` would both run and interleave metrics.jsonl, so the
second stops at once with an error naming the holder (pid, host, since when). The
kernel drops an flock with its process, so a SIGKILLed holder never leaves a stale lock.
"""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: no locking (the README says so)
    fcntl = None

LOCK_NAME = ".lock"


class RunLockedError(RuntimeError):
    """Another process holds the run directory."""


class RunLock:
    """`with RunLock(dir): ...` holds DIR/.lock exclusively, or raises `RunLockedError` naming the holder."""

    def __init__(self, directory: str | Path):
        self.path = Path(directory) / LOCK_NAME
        self._file = None

    def acquire(self) -> "RunLock":
        f = open(self.path, "a+", encoding="utf-8")
        if fcntl is not None:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder_text(self.path)
                f.close()
                raise RunLockedError(f"{self.path.parent} is in use by another normlab process ({holder}); "
                                     "wait for it to finish, or choose another directory") from None
        f.seek(0)
        f.truncate()
        f.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}))
        f.flush()
        self._file = f
        return self

    def release(self) -> None:
        if self._file is not None:
            if fcntl is not None:
                fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _holder_text(path: Path) -> str:
    try:
        holder = json.loads(path.read_text("utf-8"))
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder["since"]))
        return f"pid {holder['pid']} on {holder['host']}, since {since}"
    except (OSError, ValueError, KeyError, TypeError):
        return "holder unknown"
