"""A study's jobs, as every executor runs them: which runs train together (a stack of one shape, up to a memory
budget), training them into their run directories, and writing their outcomes to the ledger. The local worker
processes (local_executor.py) and the Ray tasks (ray_executor.py) both take their jobs from here, so neither imports the
other."""
from __future__ import annotations

import functools
import json
import traceback
from pathlib import Path
from typing import Any

from normlab.config import ConfigError, RunConfig, config_hash, upgrade_stored
from normlab.study.records import record_from_run_dir
from normlab.study.ledger import Ledger, settled

EXECUTORS = ("local", "ray")  # where a study's jobs run: worker processes here (local_executor.py), or Ray tasks
MAX_GROUP = 16  # runs one worker stacks at most (benchmarks/multirun.py: the gain is flat from K = 8 on)
GROUP_MEMORY_BYTES = 2 * 1024 ** 3  # activation memory one worker's stack may take


def run_cost(config: dict[str, Any]) -> float:
    """Relative compute of a run (tokens × layers × width²), for a progress bar that moves evenly."""
    m, t = config["model"], config["train"]
    return t["steps"] * t["batch_size"] * m["block_size"] * m["n_layer"] * m["d_model"] ** 2


def group_limit(config: dict[str, Any], budget_bytes: float = GROUP_MEMORY_BYTES, cap: int = MAX_GROUP) -> int:
    """How many runs of this shape one worker stacks: an activation-memory estimate against a budget.

    Per member: the stream and its per-layer intermediates (≈ 40 floats per token, layer and
    channel for attention + a 4× MLP, kept for backward) plus the logits (3 copies of B·T·V).
    """
    m, t = config["model"], config["train"]
    tokens = t["batch_size"] * m["block_size"]
    per_member = 4 * tokens * (40 * m["n_layer"] * m["d_model"] + 3 * (m.get("vocab_size") or 256))
    return int(max(1, min(cap, budget_bytes // per_member)))


@functools.lru_cache(maxsize=4096)
def _config_of_json(config_json: str) -> RunConfig:
    from normlab.config import validate_config

    return validate_config(json.loads(config_json))


def run_config(config: dict[str, Any]) -> RunConfig:
    """A registered run's config, in today's spelling (`claim_jobs` reads the row so), as a RunConfig validated
    once per process: a worker groups the pending runs it scans by their configs, then trains the ones it claimed
    from the same configs."""
    return _config_of_json(json.dumps(config, sort_keys=True))


def group_of(config: RunConfig) -> str | None:
    """The key runs share when one worker may train them as one stack, or None where a run trains alone."""
    from normlab.train.group import group_key, groupable

    return group_key(config) if groupable(config) else None


def is_stacked(jobs: list[tuple[str, RunConfig]], stack_runs: bool) -> bool:
    return stack_runs and group_of(jobs[0][1]) is not None


def claim_jobs(ledger: Ledger, owner: int, ids: list[str], stack_runs: bool) -> list[tuple[str, RunConfig]]:
    """The next runs to train together (up to `group_limit`), claimed for process `owner`, each with its config
    typed: the ledger's row as its schema wrote it, read in today's spelling (`upgrade_stored`) and validated once
    per process. [] when none is left. Without `stack_runs` each run is claimed alone, and no config is read to
    group it. A row this normlab refuses is failed with the validation's words (its attempts count), never handed
    on and never raised inside the claim, which would stop the worker."""
    def today(config: dict[str, Any]) -> dict[str, Any]:
        return upgrade_stored(config, ledger.schema)

    def key(config: dict[str, Any]) -> str:  # a run that trains alone groups with nobody: its own id is its key
        try:
            return group_of(run_config(today(config))) or config_hash(config)
        except ConfigError:
            return config_hash(config)

    while True:
        claimed = ledger.claim_group(owner, set(ids), key, lambda config: group_limit(today(config))) \
            if stack_runs else ledger.claim_group(owner, set(ids))
        jobs = []
        for rid, config in claimed:
            try:
                jobs.append((rid, relocated(ledger, run_config(today(config)))))
            except ConfigError as e:
                ledger.fail(rid, f"its stored config cannot be read by this normlab: {e}")
        if jobs or not claimed:
            return jobs


def train_alone(cfg, out: str, events: str | None = None):
    from normlab.train.lifecycle import RunError, RunResult
    from normlab.train.loop import train

    try:
        return train(cfg, out, events=events)
    except RunError as e:  # as GroupTrainer reports a member that could not run
        return RunResult("failed", 0, None, str(e))


def events_dir(study_dir: Path, run_id: str, config: RunConfig | dict[str, Any]) -> Path:
    """A run's live TensorBoard directory: STUDY/tensorboard/<scheme-norm-depth-lr-warmup-seed-id>; `config`: a
    claimed run's (a dict, as the ledger hands it out) or a record's."""
    from normlab.rundir.events import run_name

    data = config if isinstance(config, dict) else config.to_dict()
    return Path(study_dir) / "tensorboard" / run_name(data, run_id)


def train_jobs(runs: list[tuple[RunConfig, str]], stacked: bool, events: list[str | None] | None = None) -> list:
    """Train (config, run directory) pairs as one stack, or the one run alone: a `RunResult` each. What the
    local workers and the Ray tasks both run; it touches the run directories (and `events`, each run's live
    TensorBoard directory), never the ledger."""
    from normlab.train.group import GroupTrainer
    from normlab.train.lifecycle import RunResult

    events = events or [None] * len(runs)
    try:
        return GroupTrainer(runs, events=events).run() if stacked else [train_alone(*runs[0], events[0])]
    except Exception as e:  # the group itself could not run: every member failed for that reason
        reason = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"
        return [RunResult("failed", 0, None, reason) for _ in runs]


def record_results(ledger: Ledger, jobs: list[tuple[str, RunConfig]], results: list) -> None:
    """Each run finished (its record summarized from its run directory) or failed, with its reason."""
    for (rid, _), result in zip(jobs, results):
        try:
            if result.status == "failed":
                ledger.fail(rid, result.reason or "failed")
            else:
                ledger.finish(rid, record_from_run_dir(rid, ledger.run_dir(rid)))
        except Exception as e:  # a run directory that cannot be summarized: that run failed
            ledger.fail(rid, f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}")


def relocated(ledger: Ledger, config: RunConfig) -> RunConfig:
    """A claimed run's config with `train.init_from` pointing into this study's directory where it named a run
    of this study that has moved with it (a study copied or moved elsewhere: its run directories came along)."""
    source = config.train.init_from
    if not source or Path(source).exists():
        return config
    here = ledger.run_dir(Path(source).name)
    if not (here / "config.toml").is_file():
        return config  # not one of this study's runs: the trainer says what is missing
    return config.model_copy(update={"train": config.train.model_copy(update={"init_from": str(here.resolve())})})


def done_cost(ledger: Ledger, costs: dict[str, float]) -> float:
    return sum(costs[row["id"]] for row in ledger.rows()
               if row["id"] in costs and settled(row["status"], row["attempts"]))
