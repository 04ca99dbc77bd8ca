"""Live TensorBoard events of a run: `normlab train --tensorboard`, `normlab study --tensorboard`.

Written while the run trains (each logged step's scalars, each measured step's per-layer
metrics), and its hyperparameters with its final metrics when it ends. A run that resumes
starts its events over from what its run directory kept (metrics.jsonl and diagnostics.sqlite,
already rewound to the checkpoint), so TensorBoard never shows a step twice: the event files
in the directory are normlab's own, written for this run, and rewritten.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from normlab.rundir.layout import RunDir

SCALARS = ("train_loss", "val_loss", "lr", "grad_norm", "tokens_per_s")
EVENT_GLOB = "events.out.tfevents.*"
HPARAMS = ("model.arch", "model.scheme", "model.norm", "model.n_layer", "model.d_model", "model.n_head",
           "model.final_norm", "train.lr", "train.warmup_steps", "train.schedule", "train.batch_size", "train.steps",
           "train.seed", "train.grad_clip", "train.precision")


def run_name(config: dict[str, Any], run_id: str) -> str:
    """A folder name a person can tell apart: scheme, normalizer, depth, lr, warmup, seed, then the run's short id."""
    m, t = config["model"], config["train"]
    arch = "" if m.get("arch", "decoder") == "decoder" else f"{m['arch']}-"
    final = "-nofinalnorm" if m.get("final_norm") is False else ""  # C13's other arm
    return (f"{arch}{m['scheme']}-{m['norm']}-L{m['n_layer']}-d{m['d_model']}{final}-lr{t['lr']:g}"
            f"-w{t['warmup_steps']}-s{t['seed']}-{run_id[:6]}")


def scalar_tag(key: str) -> str:
    """train_loss → loss/train, val_loss → loss/val (one chart for both); others as they are."""
    return f"loss/{key[:-5]}" if key.endswith("_loss") else key


def require_tensorboard():
    """torch's SummaryWriter, or a ValueError saying what to install (asked once, before any run starts)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ValueError("--tensorboard needs the tensorboard package, which is not installed: "
                         "pip install tensorboard") from None
    return SummaryWriter


class EventLog:
    """One run's TensorBoard event files in `logdir` (see the module doc)."""

    def __init__(self, logdir: str | Path, run_dir: RunDir, config: dict[str, Any]):
        SummaryWriter = require_tensorboard()
        self.logdir = Path(logdir)
        self.logdir.mkdir(parents=True, exist_ok=True)
        for old in self.logdir.glob(EVENT_GLOB):  # this run's own events, rewritten below from what it kept
            old.unlink()
        self.hparams = {}
        for key in HPARAMS:  # the settings a reader compares runs by
            section, name = key.split(".")
            value = config.get(section, {}).get(name)
            self.hparams[key] = value if isinstance(value, (int, float, str, bool)) else str(value)
        self.writer = SummaryWriter(str(self.logdir))
        for row in run_dir.metrics():
            self.scalars(row)
        if (run_dir.path / "diagnostics.sqlite").is_file():
            from normlab.rundir.diagnostics_store import DiagnosticsStore

            self.layers(DiagnosticsStore(run_dir.path).rows())
        self.writer.flush()

    def scalars(self, row: dict[str, Any]) -> None:
        for key in SCALARS:
            if row.get(key) is not None:
                self.writer.add_scalar(scalar_tag(key), row[key], row["step"])
        self.writer.flush()  # live: TensorBoard sees each logged step

    def layers(self, rows: list[tuple]) -> None:
        """Per-layer metrics (the probe's rows); per-head ones averaged over heads."""
        heads: dict[tuple, list[float]] = {}
        for step, layer, site, metric, head, value in rows:
            if layer is None or value is None:
                continue
            if head is None:
                self.writer.add_scalar(f"{metric}/{site}/layer{layer:02d}", value, step)
            else:
                heads.setdefault((step, layer, site, metric), []).append(value)
        for (step, layer, site, metric), values in heads.items():
            self.writer.add_scalar(f"{metric}/{site}/layer{layer:02d}", sum(values) / len(values), step)
        self.writer.flush()

    def close(self, status: str | None = None, val_loss: float | None = None) -> None:
        """With the run's end (`status`): its hyperparameters beside its final val loss and outcome."""
        if status is not None:
            metrics = {"hparam/val_loss": val_loss if val_loss is not None else float("nan"),
                       "hparam/diverged": float(status == "diverged"),
                       "hparam/failed_to_train": float(status == "failed_to_train")}
            self.writer.add_hparams(self.hparams, metrics, run_name=".")
        self.writer.close()
