"""What a study publishes: its report (HTML, Markdown, verdicts.json), from its ledger alone.

`normlab study` calls this when its runs are done, `normlab report` on a study directory at any time. The
report states the rules it judged by (thresholds and the family-wise level, rules.py), the machine it ran on and
its training wall time; all of it is gathered here, so the command line only prints.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from normlab.config import ConfigError
from normlab.device import resolve_device
from normlab.report import render_report
from normlab.study import power
from normlab.study.claims import CLAIMS, Verdict
from normlab.study.judge import Judged, judge_study
from normlab.study.ledger import Ledger
from normlab.study.measuring import measure_claims
from normlab.study.plan import plan_from_meta
from normlab.study.reference import REFERENCE_KEY, in_reference_runs
from normlab.study.rules import rules_record, thresholds
from normlab.study.sections import general_sections, main_records
from normlab.study.state import Completion, completion, study_ids
from normlab.study.trained import judge_trained, study_counts
from normlab.train.lifecycle import environment

HIDDEN = ("run_ids", "preset_settings", "init_pass_flag", "tokens", "lines")  # stored for `normlab report`, not for a reader


class Published(NamedTuple):
    """What `publish` wrote and found: the report's paths (None where none was written), the verdicts, how far the
    study is, and its runs counted in the one meaning of each word (`trained.study_counts`)."""

    paths: dict[str, Path] | None
    verdicts: list[Verdict]
    status: Completion
    counts: dict[str, int]


def publish(out: str | Path, judged: Judged | None = None, write: bool = True) -> Published:
    """Write the report of the study in `out` (`write`: else only count its runs). `judged`: the study as this
    process judged it when it ended (`StudyOutcome.judged`); None: judge the ledger by the plan it stored (`normlab
    report`)."""
    ledger = Ledger(out)
    meta = ledger.meta()
    if "study" not in meta:  # killed before it registered its runs
        raise ConfigError(f"{str(ledger.path)!r} holds no study yet: run `normlab study --out {out}` first")
    if judged is None:
        plan = plan_from_meta(meta, ledger.schema)  # every claim's seeds, looks and passes, resolved once
        ids = study_ids(plan, ledger, meta["study"]["run_ids"])
        measured = measure_claims(plan, ledger, measure=False)  # as stored: `normlab report` measures nothing
        judged = judge_study(plan, ledger, ids, completion(plan, ledger, ids, measured))
    return write_report(out, ledger, meta, judged, write)


def write_report(out: str | Path, ledger: Ledger, meta: dict, judged: Judged, write: bool = True) -> Published:
    """The report of a judged study (HTML, Markdown, verdicts.json) and its manifest, with what it ran on and cost,
    all from one reading of the ledger (`Ledger.study_runs`); `write` False: only its runs, counted."""
    runs = ledger.study_runs(set(judged.ids))
    wall, unfinished, manifest = runs.train_wall_s(), runs.unfinished(), runs.manifest(rules_record()["fingerprint"])
    records = judge_trained(runs.records, judged.plan.lines)  # judged once: counts and sections
    counts = study_counts(records, unfinished)
    if not write:
        return Published(None, [], judged.status, counts)
    info = {cid: {"title": CLAIMS.get(cid).title, "statement": CLAIMS.get(cid).statement,
                  "sources": CLAIMS.get(cid).sources} for cid in judged.plan.claims}
    reference = meta.get(REFERENCE_KEY)
    cost = {"train_wall_s": wall, "reference_run_s": (reference or {}).get("s"),
            "train_wall_reference_runs": in_reference_runs(wall, reference), "reference_run": reference}
    study_info = {**{k: v for k, v in meta["study"].items() if k not in HIDDEN},
                  "counts": counts, "train_wall_s": wall,
                  **({"train_wall_reference_runs": round(cost["train_wall_reference_runs"], 1),
                      "reference_run_s": reference["s"]} if cost["train_wall_reference_runs"] else {}),
                  "environment": environment(resolve_device("cpu")), "thresholds": thresholds(judged.verdicts),
                  "power_plan": {"scheme": power.SCHEME, **{r.claim: r.text() for r in judged.plan.power_plan}}}
    sections = general_sections(main_records(records, judged.plan.robust_changed), runs.measurements)
    paths = render_report(out, title=f"normlab study ({judged.plan.preset.name})", verdicts=list(judged.verdicts),
                          claim_info=info, claim_figures=judged.figures, sections=sections, study_info=study_info,
                          completion=judged.status.to_dict(), failed_runs=judged.status.failed, rules=rules_record(),
                          cost=cost)
    path = Path(out) / "manifest.json"  # which rules claimed each run (tests/test_results.py reads it)
    path.write_text(json.dumps(manifest, indent=1) + "\n", "utf-8")
    return Published({**paths, "manifest": path}, list(judged.verdicts), judged.status, counts)
