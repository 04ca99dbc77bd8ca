"""`normlab study --tensorboard`: TensorBoard event files per run, from the run directories' metrics."""
from __future__ import annotations

from pathlib import Path

from normlab.rundir import RunDir


def write_events(study_dir: str | Path) -> int:
    """Write DIR/tensorboard/<run id>/ events (train/val loss, lr, grad norm, tokens/s); returns the run count."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:
        raise RuntimeError("--tensorboard needs the tensorboard package: pip install tensorboard") from e
    runs = sorted(p for p in (Path(study_dir) / "runs").glob("*") if (p / "metrics.jsonl").is_file())
    for path in runs:
        with SummaryWriter(str(Path(study_dir) / "tensorboard" / path.name)) as writer:
            for row in RunDir(path).metrics():
                for key in ("train_loss", "val_loss", "lr", "grad_norm", "tokens_per_s"):
                    if row.get(key) is not None:
                        writer.add_scalar(key.replace("_", "/", 1) if key.endswith("loss") else key,
                                          row[key], row["step"])
    return len(runs)
