"""Run directories: their layout, the lock that keeps them to one process, verified checkpoints, and
the one function that rebuilds a run's model. Below `train` and `diagnostics`, above `nn` and `data`."""
from normlab.rundir.checkpoint import Checkpoint, CheckpointError
from normlab.rundir.layout import STATUSES, RunDir, RunDirError, read_config_file
from normlab.rundir.load import LoadedModel, build_model, load_model
from normlab.rundir.lock import RunLock, RunLockedError

__all__ = ["STATUSES", "Checkpoint", "CheckpointError", "LoadedModel", "RunDir", "RunDirError", "RunLock",
           "RunLockedError", "build_model", "load_model", "read_config_file"]
