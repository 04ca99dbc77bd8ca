"""What a study directory holds, read from its ledger: which runs are the study's (its claims' and axes', and the
follow-ups chosen from them once their sources are done), how far it is (`Completion`: settled runs, measured
claims), which runs failed and why, and which are training now. The runner reads it to plan and train, `normlab
report` (publish.py) to render, and the progress display to show; nothing here trains or writes.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from normlab.compat import UNPINNED
from normlab.config import stored_config
from normlab.study.claims import CLAIMS
from normlab.study.ledger import Ledger
from normlab.study.plan import StudyPlan
from normlab.study.records import flatten
from normlab.study.runs import source_key
from normlab.study.trained import judge_trained


@dataclass
class Completion:
    """How far a study is: its verdicts are final only once every run is settled and every claim measured."""

    done: int  # settled runs: completed, diverged, or failed with their attempts exhausted
    total: int
    measured: bool  # every claim's non-training measurement is stored
    failed: list[dict[str, Any]]  # `failed_runs`

    @property
    def final(self) -> bool:
        return self.done == self.total and self.measured

    def status_text(self) -> str:
        """`final`, or `partial: N of M runs` (with why, when all runs are done but measurements are not)."""
        if self.final:
            return "final"
        pending = ", measurements pending" if self.done == self.total else ""
        return f"partial: {self.done} of {self.total} runs{pending}"

    def to_dict(self) -> dict[str, Any]:
        """What `render_report` and verdicts.json carry (the failed runs go separately)."""
        return {"final": self.final, "status": self.status_text(), "done": self.done, "total": self.total}


def followup_runs(plan: StudyPlan, ledger: Ledger, ids: list[str]) -> list:
    """The runs the claims start from trained runs (`Claim.followups`), once every run in `ids` is settled
    (chosen from partial results they could differ from the final ones). Each is its source's config with the
    claim's overrides and `train.init_from` = the source's run directory; the robustness pass's reruns get theirs."""
    done, total = ledger.progress(set(ids))
    if done < total:
        return []
    records = judge_trained(ledger.records(set(ids)), plan.lines)  # "trained" as the verdicts read it
    # a follow-up registered earlier is the same run even if the study directory has moved since (its
    # init_from then names the old place): it is found by its config with init_from cut to the source's id
    registered = {source_key(config): rid for rid, config in ledger.configs() if config["train"].get("init_from")}
    out: dict[str, Any] = {}
    for claim_id in plan.claims:
        claim = CLAIMS.get(claim_id)()
        seeds = set(plan[claim_id].seeds)
        for at in plan[claim_id].passes:
            pass_records = [dataclasses.replace(r, base=at.base) for r in records if r.seed in seeds]
            for source, overrides in claim.followups(pass_records, plan.preset):
                run = plan.builder.followup(source.config, {**overrides,  # built once per study
                                                    "train.init_from": str(ledger.run_dir(source.id).resolve())})
                rid = registered.get(source_key(run.data), run.id)
                out.setdefault(rid, run if rid == run.id else dataclasses.replace(run, id=rid))
    return list(out.values())


def study_ids(plan: StudyPlan, ledger: Ledger, ids: list[str]) -> list[str]:
    """A study's runs: those its claims and axes expand to (`ids`), then the follow-ups chosen from them."""
    known = set(ids)
    return list(ids) + [r.id for r in followup_runs(plan, ledger, ids) if r.id not in known]


def completion(plan: StudyPlan, ledger: Ledger, ids: list[str], measured: bool) -> Completion:
    """How far the study is: its runs `ids` settled, and (`measured`: `measuring.measure_claims`'s answer) every
    claim's measurement current."""
    failed = failed_runs(plan, ledger, ids)
    done, total = ledger.progress(set(ids))
    return Completion(done, total, measured, failed)


def failed_runs(plan: StudyPlan, ledger: Ledger, ids: list[str]) -> list[dict[str, Any]]:
    """The failed runs: id, attempts, reason, and settings (the config keys that set the run apart from the
    study's base, and its seed), so a reader can tell which run it was without opening the ledger."""
    base = plan.base
    out = []
    for run in ledger.failed(set(ids)):
        config = flatten(stored_config(run["config"]).to_dict())  # an older ledger's row: in today's spelling
        settings = {k: v for k, v in config.items() if base.get(k) != v and k not in UNPINNED}
        settings["train.seed"] = config.get("train.seed")
        out.append({"id": run["id"], "settings": settings, "attempts": run["attempts"], "reason": run["reason"]})
    return out


@dataclass
class ActiveRun:
    """A run being trained now, as a progress display shows it."""

    id: str
    name: str  # rundir/events.py's run_name: scheme, norm, depth, width, lr, warmup, seed, id
    step: int
    steps: int
    loss: float | None
    phase: str | None = None  # the work after the last step, as status.json says (train/end_of_run.py)

    def progress_text(self) -> str:
        loss = "" if self.loss is None else f" loss {self.loss:.4f}"
        return f"{self.name} step {self.step}/{self.steps}{loss}" + (f", {self.phase}" if self.phase else "")


def active_runs(ledger: Ledger, ids: set[str] | None = None) -> list[ActiveRun]:
    """The runs training now, each with its newest logged step and train loss (read from its metrics' tail) and
    the phase after its last step, if in one."""
    from normlab.rundir import RunDir
    from normlab.rundir.events import run_name

    out = []
    for rid, config in ledger.running():
        if ids is not None and rid not in ids:
            continue
        run = RunDir(ledger.run_dir(rid))
        row = run.last_metrics() or {}
        out.append(ActiveRun(rid, run_name(config, rid), row.get("step", 0), config["train"]["steps"],
                             row.get("train_loss"), (run.read_status() or {}).get("phase")))
    return out
