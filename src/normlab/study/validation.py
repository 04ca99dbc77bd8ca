"""What a study knows about the runs its plateau stop ended: censored, unless continued to their budget.

`benchmarks/plateau_validation.py` continues every run `train.plateau_stop` ended, from the checkpoint the stop
wrote, to its full budget, and writes STUDY/plateau_validation.json. Where it exists, a stopped run that stayed
on the plateau to its budget is a run that failed to train (known, no longer censored); one that left it stays
censored (it would have trained, but its loss at the budget is not the study's run's).
"""
from __future__ import annotations

import json
from pathlib import Path

from normlab.study.records import RunRecord

VALIDATION = "plateau_validation.json"  # in the study directory
# how a validated run's reason starts: it no longer starts with records.PLATEAU_STOPPED, so it is not censored
VALIDATED = "still on the plateau at its budget when continued past its stop (benchmarks/plateau_validation.py)"


def validated(records: list[RunRecord], study_dir: str | Path) -> list[RunRecord]:
    """The records with the stopped runs the validation continued to their budget and found still on the plateau
    counted as failed to train (their reason says how that is known); the rest as they are."""
    path = Path(study_dir) / VALIDATION
    if not path.is_file():
        return records
    runs = json.loads(path.read_text("utf-8")).get("runs", {})
    for r in records:
        seen = runs.get(r.id)
        if r.censored and seen is not None and not seen["trained"]:
            r.reason = f"{VALIDATED}; {r.reason}"
    return records
