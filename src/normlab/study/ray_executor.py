"""Train a study's runs on a Ray cluster: `normlab study --executor ray [--address ADDR]`.

The SQLite ledger stays on the driver, the single source of truth: the driver claims runs
(a group of one shape, or one run) under its own leases, as a local worker would, submits each
claim as one Ray task with its resource request (`threads` CPUs; a GPU when the cluster has
one), and records each task's results. Resume, no duplicates, `failed` with retries and the
report therefore behave as with the local executor.

Where the runs are trained:
- in place, when every node sees the study directory (one machine, NFS, a shared volume): each
  task trains in its run directory, checkpointing there, so a task Ray retries after its worker
  died resumes from the last checkpoint and continues the same curve;
- shipped, when some node does not: the run directory (empty, or an interrupted run's) goes to
  the task as a tar, is trained in a temporary directory there, and comes back as a tar that the
  driver unpacks into the run directory. A worker killed mid-run restarts from the state it was
  sent. Runs that start from a trained run (`train.init_from`, C7's fine-tunes) are pinned to the
  driver's node, which sees their source.

Which: one tiny task per node reads a token the driver wrote into the study directory.
"""
from __future__ import annotations

import io
import os
import secrets
import shutil
import tarfile
import tempfile
from contextlib import ExitStack
from pathlib import Path

from normlab.config import ConfigError, RunConfig
from normlab.rundir.lock import LOCK_NAME
from normlab.study.ledger import Ledger

TOKEN = ".normlab-ray-token"  # normlab's own file in the study directory: which nodes see the directory
MAX_RETRIES = 2  # Ray re-runs a task whose worker or node died this many times; the ledger's retries follow


def import_ray():
    try:
        import ray
    except ImportError:
        raise ConfigError("--executor ray needs Ray, which is not installed; install it with "
                          "pip install -e '.[ray]' (valid executors: local, ray)") from None
    return ray


def connect(address: str | None):
    """Ray, initialised: the cluster at `address` ('auto': the one this node belongs to), or a local Ray
    started for this study when None. Returns (ray, whether this call started the connection)."""
    ray = import_ray()
    if ray.is_initialized():
        return ray, False
    try:
        # the workers import normlab as installed on their node (pip install -e '.[ray]' on every node)
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    except (ConnectionError, ValueError, RuntimeError) as e:
        raise ConfigError(f"cannot reach a Ray cluster at --address {address!r}: {e}; valid: a running cluster's "
                          "address (ray start --head prints it), 'auto', or no --address for a local Ray") from None
    return ray, True


def _sees(study_dir: str, token: str) -> bool:
    try:
        return (Path(study_dir) / TOKEN).read_text() == token
    except OSError:
        return False


def _node_sees(study_dir: str, token: str) -> tuple[str, bool]:
    import ray

    return ray.get_runtime_context().get_node_id(), _sees(study_dir, token)


def nodes_seeing(ray, study_dir: Path) -> tuple[list[str], list[str]]:
    """(node ids that see the study directory, node ids that do not), by a token only this study holds."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    token = secrets.token_hex(16)
    (study_dir / TOKEN).write_text(token)
    probe = ray.remote(num_cpus=0)(_node_sees)
    nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
    answers = ray.get([probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False))
                       .remote(str(study_dir.resolve()), token) for n in nodes])
    return [n for n, seen in answers if seen], [n for n, seen in answers if not seen]


def pack(directory: Path) -> bytes | None:
    """A run directory as tar bytes (its lock file left out); None when it does not exist yet."""
    if not directory.is_dir():
        return None
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in sorted(directory.rglob("*")):
            if path.name != LOCK_NAME:
                tar.add(path, arcname=str(path.relative_to(directory)), recursive=False)
    return buf.getvalue()


def unpack(data: bytes, directory: Path, replacing: bool = False) -> None:
    """Extract `pack`'s bytes into `directory` (members that would leave it are refused: tarfile's data filter).
    `replacing`: a trained run coming back over its directory in the study; normlab's own files there that the
    tar does not hold (a checkpoint rotated away, a sqlite -wal an earlier attempt left) are then deleted, so the
    directory ends as the task left its copy. Files normlab did not write are never touched."""
    from normlab.rundir.layout import OWN_FILES

    directory.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        kept = {member.name.split("/")[0] for member in tar.getmembers()}
        tar.extractall(directory, filter="data")
    for path in directory.iterdir() if replacing else ():
        if path.is_file() and path.name in OWN_FILES and path.name not in kept:
            path.unlink()


def ray_train(jobs: list[tuple[str, RunConfig]], run_dirs: list[str], threads: int, stacked: bool,
              packed: list[bytes | None] | None, events: list[str] | None = None, cwd: str | None = None
              ) -> tuple[list, list[bytes] | None]:
    """A Ray task: train the claimed runs in place (`packed` None) or in a temporary copy of their directories;
    returns their results, and with a copy, the trained directories as tar bytes. `cwd`: the driver's working
    directory, entered where this node has it, so a relative `data.path` means what it meant to the driver."""
    import torch

    from normlab.study.jobs import train_jobs

    if cwd and Path(cwd).is_dir():
        os.chdir(cwd)
    torch.set_num_threads(threads)
    if packed is None:
        return train_jobs([(cfg, out) for (_, cfg), out in zip(jobs, run_dirs)], stacked, events), None
    scratch = Path(tempfile.mkdtemp(prefix="normlab-ray-"))
    try:
        dirs = [scratch / rid for rid, _ in jobs]
        for data, directory in zip(packed, dirs):
            if data is not None:
                unpack(data, directory)
        results = train_jobs([(cfg, str(d)) for (_, cfg), d in zip(jobs, dirs)], stacked)
        return results, [pack(d) for d in dirs]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # the task's own temporary directory


def _submit(task, jobs, dirs, ledger: Ledger, threads: int, stack_runs: bool, shipped: bool, tensorboard: bool,
            anywhere: dict, here: dict):
    """One Ray task for one claim: in place, or shipped (fine-tunes then pinned to the driver's node)."""
    from normlab.study.jobs import events_dir, is_stacked

    local = shipped and any(cfg.train.init_from for _, cfg in jobs)
    packed = [pack(d) for d in dirs] if shipped and not local else None
    # live TensorBoard events where the run trains in place; shipped runs get theirs afterwards
    events = ([str(events_dir(ledger.dir.resolve(), rid, cfg)) for rid, cfg in jobs]
              if tensorboard and packed is None else None)
    return task.options(**(here if local else anywhere)).remote(
        jobs, [str(d.resolve()) for d in dirs], threads, is_stacked(jobs, stack_runs), packed, events, os.getcwd())


def _collect(ray, ref, jobs, dirs, ledger: Ledger) -> None:
    """A finished task's results into the ledger (and a shipped task's directories into the study)."""
    from normlab.study.jobs import record_results
    from normlab.train.lifecycle import RunResult

    try:
        results, trained = ray.get(ref)
        for data, directory in zip(trained or [], dirs):
            if data is not None:
                unpack(data, directory, replacing=True)
    except Exception as e:  # the task's worker or node died more than MAX_RETRIES times, or its tar did not unpack
        reason = f"Ray task lost: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        results = [RunResult("failed", 0, None, reason) for _ in jobs]
    record_results(ledger, jobs, results)


def _cluster(ray, ledger: Ledger, threads: int, say) -> tuple[int, bool, dict, dict]:
    """What the cluster holds, said once: how many tasks it runs at a time, whether run directories must be
    shipped (a node does not see the study directory), and the options of a task that runs anywhere and of one
    pinned to the driver's node (which sees the study directory)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    seeing, blind = nodes_seeing(ray, ledger.dir)
    shipped = bool(blind)
    resources = ray.cluster_resources()
    gpus = 1 if resources.get("GPU", 0) >= 1 else 0
    capacity = max(1, int(resources.get("GPU", 0) if gpus else resources.get("CPU", 1) // threads))
    say(f"Ray: {len(seeing) + len(blind)} nodes, {resources.get('CPU', 0):g} CPUs, {resources.get('GPU', 0):g} "
        f"GPUs; {threads} CPU{'s' * (threads > 1)}{' + 1 GPU' if gpus else ''} a task; " +
        (f"{len(blind)} nodes do not see {ledger.dir}: run directories are shipped to and from the tasks"
         if shipped else "every node sees the study directory: runs train in place"))
    anywhere = {"num_cpus": threads, "num_gpus": gpus, "max_retries": MAX_RETRIES}
    here = {**anywhere, "scheduling_strategy":
            NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)}
    return capacity, shipped, anywhere, here


def train_all_ray(ledger: Ledger, ids: list[str], costs: dict[str, float], threads: int, progress,
                  stack_runs: bool, address: str | None, say=print, tensorboard: bool = False) -> None:
    """Train `ids` on the Ray cluster until each is settled or claimed by another process (see the module doc)."""
    from normlab.study.jobs import claim_jobs, done_cost

    ray, started = connect(address)
    try:
        capacity, shipped, anywhere, here = _cluster(ray, ledger, threads, say)
        task = ray.remote(ray_train)
        owner, inflight = os.getpid(), {}
        total = sum(costs.values())
        try:
            while True:
                while len(inflight) < capacity:
                    jobs = claim_jobs(ledger, owner, ids, stack_runs)
                    if not jobs:
                        break
                    hold = ExitStack()  # the claim's lease, released on every path out (results, errors, Ctrl-C)
                    inflight_jobs = (jobs, [ledger.run_dir(rid) for rid, _ in jobs], hold)
                    hold.enter_context(ledger.holding([rid for rid, _ in jobs], owner))
                    try:
                        ref = _submit(task, jobs, inflight_jobs[1], ledger, threads, stack_runs, shipped, tensorboard,
                                      anywhere, here)
                    except BaseException:
                        hold.close()
                        ledger.release([rid for rid, _ in jobs], owner)
                        raise
                    inflight[ref] = inflight_jobs
                if progress is not None:
                    progress(done_cost(ledger, costs), total, ledger.counts(set(costs)))
                if not inflight:
                    return
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=0.5)
                for ref in ready:
                    jobs, dirs, hold = inflight.pop(ref)
                    with hold:
                        _collect(ray, ref, jobs, dirs, ledger)
        finally:  # interrupted: the tasks are cancelled and their runs handed back (pending, attempt not counted)
            for ref, (jobs, _, hold) in inflight.items():
                ray.cancel(ref, force=True)
                hold.close()
                ledger.release([rid for rid, _ in jobs], owner)
    finally:
        if started:
            ray.shutdown()
