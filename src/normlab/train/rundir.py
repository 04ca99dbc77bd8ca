"""A self-describing run directory: the directory alone reproduces and explains the run.

    DIR/config.toml     the resolved config (normlab train DIR/config.toml reruns it)
    DIR/run.json        environment (normlab, torch, Python, device, threads), model facts, init used
    DIR/metrics.jsonl   one JSON object per logged step, flushed as written
    DIR/status.json     running | completed | diverged | failed, with step and reason
    DIR/checkpoint.pt   model, optimizer, RNG states and data position of the latest checkpoint
    DIR/diagnostics.sqlite  per-layer metrics (normlab.diagnostics.store)
    DIR/layer_skip.json     val loss with each block skipped (effective depth)
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import torch

from normlab.config import RunConfig, load_config
from normlab.jsonsafe import json_safe

STATUSES = ("running", "completed", "diverged", "failed")


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
        self.checkpoint_path = self.path / "checkpoint.pt"

    def exists(self) -> bool:
        return self.config_path.is_file()

    # config and metadata
    def write_config(self, cfg: RunConfig) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        _atomic_write(self.config_path, lambda p: p.write_text(cfg.to_toml(), "utf-8"))

    def read_config(self) -> RunConfig:
        return load_config(self.config_path)

    def write_meta(self, meta: dict[str, Any]) -> None:
        self.write_json(self.meta_path.name, meta)

    def write_json(self, name: str, data: Any) -> None:
        _atomic_write(self.path / name, lambda p: p.write_text(json.dumps(json_safe(data), indent=2) + "\n", "utf-8"))

    def read_json(self, name: str) -> Any:
        return json.loads((self.path / name).read_text("utf-8"))

    def read_meta(self) -> dict[str, Any]:
        return self.read_json(self.meta_path.name)

    # status
    def write_status(self, status: str, **info: Any) -> None:
        assert status in STATUSES, status
        record = {"status": status, **json_safe(info), "updated": time.time()}
        _atomic_write(self.status_path, lambda p: p.write_text(json.dumps(record, indent=2) + "\n", "utf-8"))

    def read_status(self) -> dict[str, Any] | None:
        if not self.status_path.is_file():
            return None
        return json.loads(self.status_path.read_text("utf-8"))

    # metrics
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

    def truncate_metrics(self, after_step: int) -> None:
        """Drop rows logged after `after_step` (the checkpoint a resume starts from)."""
        keep = [r for r in self.metrics() if r["step"] <= after_step]
        text = "".join(json.dumps(r) + "\n" for r in keep)
        _atomic_write(self.metrics_path, lambda p: p.write_text(text, "utf-8"))

    # checkpoints
    def save_checkpoint(self, state: dict[str, Any]) -> None:
        _atomic_write(self.checkpoint_path, lambda p: torch.save(state, p))

    def load_checkpoint(self, map_location: str | torch.device = "cpu") -> dict[str, Any] | None:
        if not self.checkpoint_path.is_file():
            return None
        return torch.load(self.checkpoint_path, map_location=map_location, weights_only=False)
