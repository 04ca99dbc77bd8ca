"""What a study knows about the runs its plateau stop ended: censored, unless continued to their budget.

`benchmarks/plateau_validation.py` continues every run `train.plateau_stop` ended, from the checkpoint the stop
wrote, to its full budget, and writes STUDY/plateau_validation.json. A resumed run goes on bit for bit as the
uninterrupted one would have, so its outcome at the budget is the run's own: where the file exists, a stopped run
that stayed on the plateau failed to train, and one that left it trained, with the val loss it reached.
"""
from __future__ import annotations

import json
from pathlib import Path

from normlab.study.records import RunRecord

VALIDATION = "plateau_validation.json"  # in the study directory
# how a validated run's reason starts: it no longer starts with records.PLATEAU_STOPPED, so it is not censored
VALIDATED = "continued past its plateau stop to its budget (benchmarks/plateau_validation.py)"


def validated(records: list[RunRecord], study_dir: str | Path) -> list[RunRecord]:
    """The records with each stopped run the validation continued to its budget given its outcome there, as its
    trainer ended it (completed with its val loss at the budget, or still on the plateau, or diverged): whether it
    trained is then the study's line's to say (`study.trained.judge_trained`), as for every run. The reason says
    how it is known. Records the validation did not continue are left as they are."""
    path = Path(study_dir) / VALIDATION
    if not path.is_file():
        return records
    runs = json.loads(path.read_text("utf-8")).get("runs", {})
    for r in records:
        seen = runs.get(r.id)
        if not r.censored or seen is None:
            continue
        if seen.get("status") == "diverged":
            r.status = "diverged"
        elif seen.get("status") == "completed" and seen.get("outcome") != "failed_to_train":
            r.status = "completed"
        r.val_loss, r.step = seen.get("val_loss", r.val_loss), seen.get("step", r.step)
        r.reason = f"{VALIDATED}: ended {seen.get('outcome') or seen.get('status')} at step {r.step}; {r.reason}"
    return records
