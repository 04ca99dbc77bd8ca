"""What a study publishes: its report (HTML, Markdown, verdicts.json), from its ledger alone.

`normlab study` calls this when its runs are done, `normlab report` on a study directory at any time. The
report states the rules it judged by (thresholds and the family-wise level, rules.py), the machine it ran on and
its training wall time; all of it is gathered here, so the command line only prints.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from normlab.config import ConfigError
from normlab.device import resolve_device
from normlab.report import render_report
from normlab.study import power
from normlab.study.claims import CLAIMS, Verdict
from normlab.study.judge import Judged, judge_study
from normlab.study.ledger import Ledger
from normlab.study.plan import StudyPlan, plan_from_meta
from normlab.study.reference import REFERENCE_KEY, in_reference_runs
from normlab.study.rules import rules_record, thresholds
from normlab.study.sections import general_sections, main_records
from normlab.study.state import Completion, completion, study_ids
from normlab.study.trained import judge_trained, trained_counts
from normlab.train.lifecycle import environment

HIDDEN = ("run_ids", "preset_settings", "init_pass_flag", "tokens", "lines")  # stored for `normlab report`, not for a reader


def publish(out: str | Path, judged: Judged | None = None) -> tuple[dict[str, Path], list[Verdict], Completion]:
    """Write the report of the study in `out`; returns (paths, verdicts, `Completion`). `judged`: the study as this
    process judged it when it ended (`StudyOutcome.judged`); None: judge the ledger by the plan it stored (`normlab
    report`)."""
    ledger = Ledger(out)
    meta = ledger.meta()
    if "study" not in meta:  # killed before it registered its runs
        raise ConfigError(f"{str(ledger.path)!r} holds no study yet: run `normlab study --out {out}` first")
    if judged is None:
        plan = plan_from_meta(meta, ledger.schema)  # every claim's seeds, looks and passes, resolved once
        ids = study_ids(plan, ledger, meta["study"]["run_ids"])
        judged = judge_study(plan, ledger, ids, completion(plan, ledger, ids))
    return write_report(out, ledger, meta, judged), list(judged.verdicts), judged.status


def write_report(out: str | Path, ledger: Ledger, meta: dict, judged: Judged) -> dict[str, Path]:
    """The report of a judged study (HTML, Markdown, verdicts.json) and its manifest, with what it ran on and cost."""
    info = {cid: {"title": CLAIMS.get(cid).title, "statement": CLAIMS.get(cid).statement,
                  "sources": CLAIMS.get(cid).sources} for cid in judged.plan.claims}
    wall = train_wall_s(ledger, judged.ids)
    records = judge_trained(ledger.records(set(judged.ids)), judged.plan.lines)  # read once: counts and sections
    reference = meta.get(REFERENCE_KEY)
    cost = {"train_wall_s": wall, "reference_run_s": (reference or {}).get("s"),
            "train_wall_reference_runs": in_reference_runs(wall, reference), "reference_run": reference}
    study_info = {**{k: v for k, v in meta["study"].items() if k not in HIDDEN},
                  "counts": counted(records, ledger, judged.ids), "train_wall_s": wall,
                  **({"train_wall_reference_runs": round(cost["train_wall_reference_runs"], 1),
                      "reference_run_s": reference["s"]} if cost["train_wall_reference_runs"] else {}),
                  "environment": environment(resolve_device("cpu")), "thresholds": thresholds(judged.verdicts),
                  "power_plan": {"scheme": power.SCHEME, **{r.claim: r.text() for r in judged.plan.power_plan}}}
    sections = general_sections(main_records(records, judged.plan.robust_changed), ledger.measurements())
    paths = render_report(out, title=f"normlab study ({judged.plan.preset.name})", verdicts=list(judged.verdicts),
                          claim_info=info, claim_figures=judged.figures, sections=sections, study_info=study_info,
                          completion=judged.status.to_dict(), failed_runs=judged.status.failed, rules=rules_record(),
                          cost=cost)
    return {**paths, "manifest": write_manifest(ledger, judged.ids, out)}


def run_counts(plan: StudyPlan, ledger: Ledger, ids: Sequence[str]) -> dict[str, int]:
    """The study's runs counted in the one meaning of each word (`study.trained.trained_counts`: trained below the
    study's line, did not train, censored), and those not finished (pending, running, failed to run)."""
    return counted(judge_trained(ledger.records(set(ids)), plan.lines), ledger, ids)


def counted(records: list, ledger: Ledger, ids: Sequence[str]) -> dict[str, int]:
    """`run_counts` of records already judged against the study's line."""
    unfinished = {k: v for k, v in ledger.counts(set(ids)).items() if k in ("pending", "running", "failed")}
    return {k: v for k, v in {**trained_counts(records), **unfinished}.items() if v}


def write_manifest(ledger: Ledger, ids: Sequence[str], out: str | Path) -> Path:
    """OUT/manifest.json: each of the study's runs with its seed, its start and end (UTC) and the fingerprint of the
    rules that claimed it, beside the fingerprint the report judged by, so that a reader (and tests/test_results.py)
    can check that every run of a held-out study started after its rules were frozen."""
    import datetime
    import json

    seeds = {rid: config["train"].get("seed") for rid, config in ledger.configs()}

    def utc(t: float | None) -> str | None:
        return None if t is None else datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(
            timespec="seconds")

    wanted = set(ids)
    runs = [{"id": r["id"], "seed": seeds.get(r["id"]), "status": r["status"], "started": utc(r["started"]),
             "finished": utc(r["finished"]), "rules": r["rules"]} for r in ledger.rows() if r["id"] in wanted]
    path = Path(out) / "manifest.json"
    path.write_text(json.dumps({"rules": rules_record()["fingerprint"], "runs": runs}, indent=1) + "\n", "utf-8")
    return path


def train_wall_s(ledger: Ledger, ids: Sequence[str]) -> float:
    """From the first run's start to the last run's end (pending runs have neither)."""
    wanted = set(ids)
    rows = [r for r in ledger.rows() if r["id"] in wanted]
    started, finished = [r["started"] for r in rows if r["started"]], [r["finished"] for r in rows if r["finished"]]
    return max(finished) - min(started) if started and finished else 0.0
