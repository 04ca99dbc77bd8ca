"""A self-describing run directory: the directory alone reproduces and explains the run.

    DIR/.normlab-run    marker: normlab made this directory (only such a directory is ever cleared)
    DIR/.lock           held by the one process working on the run (normlab.rundir.lock)
    DIR/config.toml     the resolved config (normlab train DIR/config.toml reruns it)
    DIR/run.json        environment (normlab, torch, Python, device, threads), model facts, init used
    DIR/metrics.jsonl   one JSON object per logged step, flushed as written
    DIR/status.json     running | completed | diverged | failed, with step and reason
    DIR/checkpoint.pt, checkpoint.prev.pt, checkpoints.json   (normlab.rundir.checkpoint)
    DIR/diagnostics.sqlite  per-layer metrics (normlab.rundir.diagnostics_store)
    DIR/layer_skip.json     val loss with each block skipped (effective depth)
    DIR/corpus.json         what it trained on: the corpus's SHA-256 and its vocabulary (normlab.data.provenance)
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from normlab.compat import SCHEMA_VERSION, newer_schema
from normlab.config import ConfigError, RunConfig, load_config
from normlab.jsonsafe import json_safe
from normlab.rundir import checkpoint
from normlab.rundir.lock import LOCK_NAME
from normlab.version import __version__

STATUSES = ("running", "completed", "diverged", "failed", "interrupted")  # interrupted: Ctrl-C; resumable
MARKER = ".normlab-run"
# everything normlab may write into a run directory; `clear` deletes these and nothing else
OWN_FILES = {MARKER, "config.toml", "run.json", "metrics.jsonl", "status.json", "layer_skip.json", "corpus.json",
             checkpoint.NEWEST, checkpoint.PREVIOUS, checkpoint.MANIFEST,
             "diagnostics.sqlite", "diagnostics.sqlite-wal", "diagnostics.sqlite-shm", "diagnostics.sqlite-journal"}
OWN_DIRS = {"tensorboard"}  # an imported run's tokenizer/ is not cleared: --fresh refuses that run directory


class RunDirError(ValueError):
    """A directory normlab will not use as a run directory (not its own, not writable, a file)."""


def _atomic_write(path: Path, write) -> None:
    """Write to a temporary sibling and rename: a kill never leaves a half-written file."""
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.config_path = self.path / "config.toml"
        self.meta_path = self.path / "run.json"
        self.metrics_path = self.path / "metrics.jsonl"
        self.status_path = self.path / "status.json"
        self.checkpoint_path = self.path / checkpoint.NEWEST

    def exists(self) -> bool:
        return self.config_path.is_file()

    # -- ownership ------------------------------------------------------------------------
    def is_normlab_made(self) -> bool:
        """Marked by normlab, or (run directories from before the marker) config.toml + run.json of a run."""
        if (self.path / MARKER).is_file():
            return True
        try:
            return self.exists() and "config_hash" in self.read_meta()
        except (OSError, ValueError):
            return False

    def create(self) -> None:
        """Make the directory (or adopt an empty one) and mark it as normlab's; refuse anyone else's."""
        if self.path.exists() and not self.path.is_dir():
            raise RunDirError(f"{str(self.path)!r} is a file, not a directory; choose a directory for the run")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RunDirError(f"cannot create run directory {str(self.path)!r}: {e.strerror}") from None
        if self.is_normlab_made():
            return
        foreign = sorted(p.name for p in self.path.iterdir() if p.name != LOCK_NAME)
        if foreign:
            raise RunDirError(f"{str(self.path)!r} is not empty and is not a normlab run directory "
                              f"(it holds {', '.join(foreign[:5])}{' …' if len(foreign) > 5 else ''}); "
                              "choose a new or empty directory; nothing was deleted or written")
        self.write_json(MARKER, {"normlab": __version__, "schema": SCHEMA_VERSION, "created": time.time()})

    def clear(self) -> None:
        """Delete what normlab wrote here (for --fresh); refuse, touching nothing, if anything else is here."""
        if not self.path.exists():
            return
        if not self.is_normlab_made():
            raise RunDirError(f"refusing to clear {str(self.path)!r}: it is not a normlab run directory "
                              "(no .normlab-run marker, no run.json); nothing was deleted")
        entries = [p for p in self.path.iterdir() if p.name != LOCK_NAME]
        foreign = sorted(p.name for p in entries if not _own(p))
        if foreign:
            raise RunDirError(f"refusing to clear {str(self.path)!r}: it holds files normlab did not write "
                              f"({', '.join(foreign[:5])}); move them away first; nothing was deleted")
        for p in entries:
            shutil.rmtree(p) if p.is_dir() else p.unlink()

    # -- config and metadata --------------------------------------------------------------
    def write_config(self, cfg: RunConfig) -> None:
        _atomic_write(self.config_path, lambda p: p.write_text(cfg.to_toml(), "utf-8"))

    def schema(self) -> int:
        """The schema this run directory was written under (`compat.SCHEMA_VERSION`; 0: before it was recorded),
        refused where a newer normlab wrote it."""
        try:
            version = int(self.read_json(MARKER).get("schema", 0))
        except (OSError, ValueError, AttributeError):
            version = 0  # a run directory from before the marker, or one whose marker is unreadable
        why = newer_schema(version, f"run directory {str(self.path)!r}")
        if why:
            raise ConfigError(why)
        return version

    def read_config(self) -> RunConfig:
        """The config the run was started with, as normlab wrote it (an older normlab's spellings read as
        today's: `upgrade_stored`)."""
        schema = self.schema()
        try:
            return load_config(self.config_path, stored=schema)
        except ConfigError as e:
            raise ConfigError(f"{self.config_path}: the run's config cannot be read ({e}); "
                              "restore it, or start over with --fresh") from None

    def write_meta(self, meta: dict[str, Any]) -> None:
        self.write_json(self.meta_path.name, meta)

    def write_json(self, name: str, data: Any) -> None:
        _atomic_write(self.path / name, lambda p: p.write_text(json.dumps(json_safe(data), indent=2) + "\n", "utf-8"))

    def read_json(self, name: str) -> Any:
        return json.loads((self.path / name).read_text("utf-8"))

    def read_meta(self) -> dict[str, Any]:
        return self.read_json(self.meta_path.name)

    # -- status ---------------------------------------------------------------------------
    def write_status(self, status: str, **info: Any) -> None:
        assert status in STATUSES, status
        self.write_json(self.status_path.name, {"status": status, **info, "updated": time.time()})

    def read_status(self) -> dict[str, Any] | None:
        if not self.status_path.is_file():
            return None
        try:
            return json.loads(self.status_path.read_text("utf-8"))
        except ValueError:  # cut short by a full disk: as if there were none
            return None

    # -- metrics --------------------------------------------------------------------------
    def append_metrics(self, row: dict[str, Any]) -> None:
        with self.metrics_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps({k: json_safe(v) for k, v in row.items()}) + "\n")
            f.flush()

    def metrics(self) -> list[dict[str, Any]]:
        if not self.metrics_path.is_file():
            return []
        rows = []
        for line in self.metrics_path.read_text("utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut short by a kill
                break
        return rows

    def last_metrics(self) -> dict[str, Any] | None:
        """The newest logged row, read from the file's end (progress displays poll it while the run trains)."""
        try:
            with self.metrics_path.open("rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - 4096))
                lines = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return None
        for line in reversed(lines):
            try:
                return json.loads(line)
            except json.JSONDecodeError:  # cut at the start of the window, or being written
                continue
        return None

    def truncate_metrics(self, after_step: int) -> None:
        """Drop rows logged after `after_step` (the checkpoint a resume starts from)."""
        keep = [r for r in self.metrics() if r["step"] <= after_step]
        text = "".join(json.dumps(r) + "\n" for r in keep)
        _atomic_write(self.metrics_path, lambda p: p.write_text(text, "utf-8"))

    # -- checkpoints ----------------------------------------------------------------------
    def save_checkpoint(self, state: dict[str, Any]) -> None:
        checkpoint.save(self.path, state, self.write_json)

    def find_checkpoint(self, map_location: Any = "cpu") -> checkpoint.Checkpoint | None:
        """The newest checkpoint that verifies (see `Checkpoint.note` for any it had to pass over)."""
        return checkpoint.find(self.path, map_location)

    def load_checkpoint(self, map_location: Any = "cpu") -> dict[str, Any] | None:
        found = self.find_checkpoint(map_location)
        return found.state if found else None


def read_config_file(path: str | Path | None, overrides: list[str] | None = None) -> RunConfig:
    """`load_config` of a TOML file (None: the defaults), where a run directory's own config.toml (`normlab
    train RUN/config.toml --out NEW`, `normlab check RUN/config.toml`) is read as normlab wrote it, an older
    normlab's spellings upgraded; any other file is held to today's."""
    if path is None:
        return load_config(None, overrides)
    p = Path(path)
    run = RunDir(p.parent)
    stored = p.name == "config.toml" and run.is_normlab_made()
    return load_config(p, overrides, stored=run.schema() if stored else None)


def _own(p: Path) -> bool:
    name = p.name.removesuffix(".tmp")
    return name in OWN_DIRS if p.is_dir() else name in OWN_FILES
