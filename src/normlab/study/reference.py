"""The study's unit of cost: one reference run, timed on the machine the study runs on.

A wall time in minutes means little across machines: hosts of one kind differ by up to 1.6×, and the committed
figures come from hosts about 2× apart. So a study times, at its start and in its own process, one
reference run (the standard preset's base run: Pre-LN, 4 layers × 64 wide, 32 tokens, 300 steps, one thread, as
every CPU study run trains) and states its training wall time in reference runs beside seconds: a machine-free
figure (`verdicts.json` → `cost`, the report, `cost.json`).

`NORMLAB_REFERENCE_RUN=off` skips it (the test suite's tiny studies, which would spend more on it than on their
own runs); a study then states its cost in seconds only.
"""
from __future__ import annotations

import datetime
import os
import socket
import tempfile
import time
from typing import Any

REFERENCE_ENV = "NORMLAB_REFERENCE_RUN"  # "off": no reference run
REFERENCE_KEY = "reference_run"  # the ledger's meta: the reference run timed at the study's start


def reference_config():
    """The reference run: the standard preset's base run at its first held-out seed, its plateau stop off (it must
    run its 300 steps, whatever it learns)."""
    from normlab.config import derive
    from normlab.study.presets import PRESETS

    preset = PRESETS["standard"]
    return derive({}, {**preset.base, "train.seed": preset.seeds[0], "train.plateau_stop": "off"})


def time_reference_run() -> float:
    """Seconds one reference run takes here, from its start to its last step and end-of-run diagnostics."""
    from normlab.train.loop import train

    config = reference_config()
    with tempfile.TemporaryDirectory(prefix="normlab-reference-") as tmp:
        start = time.perf_counter()
        train(config, os.path.join(tmp, "run"), fresh=True)
        return time.perf_counter() - start


def measure_reference(known: dict[str, Any] | None) -> dict[str, Any] | None:
    """The reference run's record for this study: `known` (what the ledger holds) where it was timed on this host,
    else timed now. None where it is switched off."""
    if os.environ.get(REFERENCE_ENV, "").lower() == "off":
        return known
    host = socket.gethostname()
    if known and known.get("host") == host:
        return known
    from normlab.device import cpu_model

    return {"s": round(time_reference_run(), 3), "host": host, "cpu": cpu_model(),
            "date": datetime.date.today().isoformat(),
            "what": "one standard base run (Pre-LN, 4 × 64, 32 tokens, 300 steps, one thread), timed at the study's "
                    "start in its own process"}


def in_reference_runs(seconds: float | None, reference: dict[str, Any] | None) -> float | None:
    """A wall time in reference runs (None where either is unknown)."""
    if not seconds or not reference or not reference.get("s"):
        return None
    return seconds / reference["s"]
