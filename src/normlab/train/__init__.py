"""Training runs: optimizer, schedules, the loop, the run directory."""
from normlab.train.loop import RunResult, Trainer, resolve_device, train
from normlab.rundir import RunDir

__all__ = ["RunDir", "RunResult", "Trainer", "resolve_device", "train"]
