"""What a finished run contributes to a study: one `RunRecord`, small enough to live in the ledger.

A record is a plain summary of a run directory (final losses, the val curve, a
subsampled train curve, the per-layer metrics at init and at the last measured step,
the layer-skip ablation, speed). Claims compute verdicts from records alone, so they
can be unit-tested on synthetic records and the report re-rendered without the runs.
"""
from __future__ import annotations

import functools
import statistics
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from normlab.compat import UNPINNED
from normlab.config import RunConfig, stored_config
from normlab.rundir.diagnostics_store import DiagnosticsStore
from normlab.rundir import RunDir

# per-layer metrics kept in a record: (metric, site)
LAYER_METRICS = [("grad_norm", "block"), ("residual_rms", "block"), ("contribution_ratio", "block"),
                 ("contribution_ratio", "attn"), ("contribution_ratio", "mlp"), ("angular_distance", "block"),
                 ("block_influence", "block"),
                 ("grad_norm", "mlp.sublayer.proj.weight"),  # the FFN's output weight W²: Xiong et al.'s Theorem 1
                 ("composite_gain", "mlp"),  # hyper-connections: the product of every H_res so far (mHC's Amax)
                 ("branch_rms", "attn"), ("branch_rms", "mlp")]  # each sub-layer's output (AttnRes §5.2, Fig. 5b)
TRAIN_CURVE_POINTS = 100


def flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"model": {"n_layer": 4}} -> {"model.n_layer": 4}."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


PLATEAU_STOPPED = "stopped at step"  # how the trainer's reason starts for a run the plateau stop finished early


@dataclass
class RunRecord:
    """One run's summary. Its `config` is the run's typed config, read-only once the record exists: `flat`, the
    dotted view every group compares, is derived from it once."""

    id: str
    config: RunConfig  # as the run trained (vocabulary filled in)
    status: str  # completed | failed_to_train (completed, but never left the unigram plateau) | diverged | failed
    step: int = 0
    val_loss: float | None = None
    reason: str | None = None
    val_curve: list[tuple[int, float | None]] = field(default_factory=list)
    train_curve: list[tuple[int, float | None]] = field(default_factory=list)
    layers_init: dict[str, list[float | None]] = field(default_factory=dict)  # "metric/site" -> per layer
    layers_final: dict[str, list[float | None]] = field(default_factory=dict)
    final_layers_step: int | None = None
    layer_skip: dict[str, Any] | None = None
    tokens_per_s: float | None = None
    elapsed_s: float | None = None
    numerics: dict[str, Any] = field(default_factory=dict)  # torch, CPU, threads, norm kernels, trainer
    base: dict[str, Any] | None = None  # the study's base config, flattened; set when verdicts are computed

    # -- config access --------------------------------------------------------------------
    def get(self, dotted: str) -> Any:
        """A resolved config value by dotted key, as stored (`RunConfig.to_dict`), e.g. `record.get("model.scheme")`:
        how a claim names a setting beside the study's base."""
        return self.flat.get(dotted)

    def matches(self, where: dict[str, Any], strict: bool = True) -> bool:
        """`record.matches({"model.scheme": "pre", "train.lr": 1e-3})`: every named key equal, and (strict, once
        `base` is set) every other key equal to the study's base config, so that a run another claim
        varied on a further axis (say norm = rmsnorm) never joins a group by accident."""
        if any(self.get(k) != v for k, v in where.items()):
            return False
        if not strict or self.base is None:
            return True
        mine = self.flat
        return all(mine.get(k) == self.base.get(k) for k in (set(mine) | set(self.base)) - set(where) - UNPINNED)

    @functools.cached_property
    def flat(self) -> dict[str, Any]:
        """The config flattened (`model.n_layer` keys), once per record: every group a claim forms compares it."""
        return flatten(self.config.to_dict())

    @property
    def seed(self) -> int:
        return self.config.train.seed

    @property
    def diverged(self) -> bool:
        return self.status == "diverged"

    @property
    def failed_to_train(self) -> bool:
        return self.status == "failed_to_train"

    @property
    def censored(self) -> bool:
        """Stopped by `train.plateau_stop` while still on the plateau, before its budget: whether it would have
        trained by the end is unknown, so a verdict counts it neither as trained nor as failed."""
        return self.failed_to_train and (self.reason or "").startswith(PLATEAU_STOPPED)

    @property
    def did_not_train(self) -> bool:
        """Diverged or failed to train: counted together, as a rate, and never inside a loss mean."""
        return self.status in ("diverged", "failed_to_train")

    def to_dict(self) -> dict[str, Any]:
        """The record as the ledger stores it (JSON), its config as `RunConfig.to_dict` writes it."""
        return {f.name: getattr(self, f.name) for f in fields(self)} | {"config": self.config.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunRecord":
        """A record the ledger stored, by this normlab or an older one (`stored_config`)."""
        data = dict(data)
        for key in ("val_curve", "train_curve"):
            data[key] = [tuple(p) for p in data.get(key, [])]
        data["config"] = stored_config(data.get("config", {}))
        return cls(**data)


def record_from_run_dir(run_id: str, path: str | Path) -> RunRecord:
    """Summarize a finished run directory."""
    run = RunDir(path)
    status = run.read_status() or {"status": "failed", "reason": "no status.json"}
    rows = run.metrics()
    train_rows = [r for r in rows if "train_loss" in r]
    stride = max(1, len(train_rows) // TRAIN_CURVE_POINTS)
    speeds = [r["tokens_per_s"] for r in rows if r.get("tokens_per_s")]
    outcome = status["status"]
    if outcome == "completed" and status.get("outcome") == "failed_to_train":
        outcome = "failed_to_train"
    record = RunRecord(
        id=run_id, config=config_of(run), status=outcome, step=status.get("step", 0),
        val_loss=status.get("val_loss"), reason=status.get("reason"),
        val_curve=[(r["step"], r["val_loss"]) for r in rows if "val_loss" in r],
        train_curve=[(r["step"], r["train_loss"]) for r in train_rows[::stride]],
        tokens_per_s=statistics.median(speeds) if speeds else None,
        elapsed_s=status.get("elapsed_s") or (rows[-1].get("elapsed_s") if rows else None),
    )
    record.numerics = numerics(run)
    if (run.path / DiagnosticsStore.FILENAME).is_file():
        store = DiagnosticsStore(run.path)
        steps = store.steps()
        if steps:
            record.layers_init = _layers(store, steps[0])
            record.final_layers_step = steps[-1]
            record.layers_final = _layers(store, steps[-1])
    if (run.path / "layer_skip.json").is_file():
        record.layer_skip = run.read_json("layer_skip.json")
    return record


def config_of(run: RunDir) -> RunConfig:
    """The run's config as its trainer wrote it (vocabulary filled in): that file was written from a validated
    config, so it is read, not validated again (`stored_config`)."""
    try:
        return stored_config(tomllib.loads(run.config_path.read_text("utf-8")))
    except (OSError, tomllib.TOMLDecodeError):
        return run.read_config()  # its error says what is wrong with the file and what to do


def numerics(run: RunDir) -> dict[str, Any]:
    """What can change a run's last bits without changing its config (a verdict that flips on them is fragile)."""
    try:
        meta = run.read_meta()
    except (OSError, ValueError):
        return {}
    env = meta.get("environment", {})
    keys = ("torch", "cpu", "torch_threads", "norm_impl", "device")
    return {**{k: env.get(k) for k in keys}, "trainer": meta.get("group", {}).get("trainer", "single")}


def _layers(store: DiagnosticsStore, step: int) -> dict[str, list[float | None]]:
    out = {}
    for metric, site in LAYER_METRICS:
        values = store.query(metric, site, step).get(step)
        if values:
            out[f"{metric}/{site}"] = values
    return out
