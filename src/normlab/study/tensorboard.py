"""`normlab study --tensorboard`: events of runs that trained without live ones (runs trained before the flag
was given, or shipped to Ray nodes that do not see the study directory), from their run directories. Runs
trained with the flag wrote theirs live (rundir/events.py) and are left as they are."""
from __future__ import annotations

from pathlib import Path

from normlab.rundir import RunDir
from normlab.rundir.events import EVENT_GLOB, EventLog
from normlab.study.ledger import Ledger


def write_events(study_dir: str | Path) -> int:
    """Write STUDY/tensorboard/<run name>/ for each finished run that has none; returns how many were written."""
    from normlab.study.jobs import events_dir

    ledger = Ledger(study_dir)
    written = 0
    for record in ledger.records():
        logdir = events_dir(ledger.dir, record.id, record.config)
        run = RunDir(ledger.run_dir(record.id))
        if any(logdir.glob(EVENT_GLOB)) or not run.metrics_path.is_file():
            continue
        events = EventLog(logdir, run, record.config.to_dict())
        events.close(record.status, record.val_loss)
        written += 1
    return written
