"""`normlab study --executor ray` on a real local Ray cluster: a head node and a second worker node on the
loopback address, started by `ray start --block` here (stopping them stops only their own processes).

What must hold: the same per-run results as the local executor; a worker killed mid-run is retried by Ray
and its run resumes from its checkpoint, nothing lost or trained twice; run directories shipped to and from
tasks when a node does not see the study directory.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from normlab.rundir.checkpoint import NEWEST  # noqa: E402
from normlab.study import ray_executor  # noqa: E402
from normlab.study.ledger import Ledger  # noqa: E402
from normlab.study.load import load_study  # noqa: E402
from normlab.study.runner import run_study  # noqa: E402
from normlab.train import RunDir  # noqa: E402
from tests.conftest import judged_study  # noqa: E402

TINY = ["model.d_model=16", "model.n_head=2", "model.block_size=16", "train.batch_size=4", "train.steps=150",
        "train.eval_interval=50", "train.eval_batches=2", "train.ckpt_interval=10", "diagnostics.interval=50"]
CLAIMS, SEEDS = "C13", "0,1"
RAY = str(Path(sys.executable).parent / "ray")
SESSIONS: set[int] = set()  # the test cluster's process sessions: only its workers are ever killed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster():
    """A head node and one worker node, 1 CPU each, on 127.0.0.1; yields the head's address."""
    port, temp = _free_port(), tempfile.mkdtemp(prefix="nlray")  # short: Ray's socket paths must fit 107 bytes
    common = ["--block", "--node-ip-address=127.0.0.1", "--num-cpus=1", "--object-store-memory=80000000",
              "--disable-usage-stats"]
    env = {**os.environ, "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}
    nodes = [subprocess.Popen([RAY, "start", "--head", f"--port={port}", "--include-dashboard=false",
                               f"--temp-dir={temp}", *common], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)]
    address = f"127.0.0.1:{port}"
    try:
        _wait_for(lambda: _nodes(address) >= 1, "the head node")
        nodes.append(subprocess.Popen([RAY, "start", f"--address={address}", *common], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        _wait_for(lambda: _nodes(address) >= 2, "the worker node")
        SESSIONS.update(node.pid for node in nodes)  # start_new_session: each node leads its own session
        yield address
    finally:
        for node in reversed(nodes):  # `ray start --block` stops its node's processes on SIGTERM
            node.send_signal(signal.SIGTERM)
        for node in nodes:
            try:
                node.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)


def _nodes(address: str) -> int:
    out = subprocess.run([sys.executable, "-c", "import ray, sys; ray.init(address=sys.argv[1], "
                          "log_to_driver=False); print(sum(n['Alive'] for n in ray.nodes()))", address],
                         capture_output=True, text=True, timeout=60)
    return int(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 and out.stdout.strip() else 0


def _wait_for(ready, what: str, timeout: float = 90) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if ready():
            return
        time.sleep(0.5)
    raise TimeoutError(f"{what} of the Ray test cluster did not come up in {timeout:.0f} s")


def _curves(study_dir: Path) -> dict[str, tuple]:
    """Per run: status, final val loss, and every logged loss (train and val) by step."""
    ledger = Ledger(study_dir)
    out = {}
    for record in ledger.records():
        rows = RunDir(ledger.run_dir(record.id)).metrics()
        out[record.id] = (record.status, record.val_loss,
                          [(r["step"], r.get("train_loss"), r.get("val_loss")) for r in rows])
    return out


@pytest.fixture(scope="module")
def local_study(tmp_path_factory):
    """The same study with the local executor: 2 worker processes × 1 thread, the reference."""
    out = tmp_path_factory.mktemp("local")
    spec = load_study("standard", claims=CLAIMS.split(","), seeds=[0, 1], overrides=TINY, init_pass=False)
    outcome = run_study(spec, out, workers=2, stack_runs=False)
    assert judged_study(spec, out, outcome)[0].final
    return _curves(out)


def _ray_trainers() -> list[int]:
    """PIDs of the test cluster's Ray workers executing a training task (Ray titles them ray::ray_train); another
    Ray on this machine is never touched."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if (proc / "cmdline").read_bytes().startswith(b"ray::ray_train") and \
                        os.getsid(int(proc.name)) in SESSIONS:
                    pids.append(int(proc.name))
            except OSError:
                pass
    return pids


# slow: a two-node Ray cluster (~110 s with its start)
# (the default suite stays under 10 min on 2 cores; `make test-slow` runs it)
@pytest.mark.slow
def test_a_study_on_ray_survives_a_killed_worker_and_matches_the_local_executor(cluster, local_study, tmp_path):
    out = tmp_path / "ray"
    cmd = [sys.executable, "-m", "normlab", "study", "--out", str(out), "--claims", CLAIMS, "--seeds", SEEDS,
           "--executor", "ray", "--address", cluster, "--no-stack-runs", "--no-init-pass"]
    for item in TINY:
        cmd += ["--set", item]
    study = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed = []
    deadline = time.time() + 120
    while not killed and time.time() < deadline and study.poll() is None:
        # checkpoint.pt, not checkpoint.pt.tmp or the manifest: a worker killed while its first checkpoint is
        # still being written has nothing to resume from, and the test would fail by its own timing
        checkpointed = list((out / "runs").glob(f"*/{NEWEST}")) if (out / "runs").is_dir() else []
        if checkpointed:  # a run is past its first checkpoint: kill every worker training one, mid-run
            for pid in _ray_trainers():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        time.sleep(0.05)
    output, _ = study.communicate(timeout=300)
    assert killed, f"no Ray training worker was found to kill; the study said:\n{output}"
    assert study.returncode == 0, output
    assert "every node sees the study directory: runs train in place" in output
    ledger = Ledger(out)
    rows = ledger.rows()
    assert {r["status"] for r in rows} <= {"completed", "failed_to_train"} and len(rows) == 4  # all trained to the end
    assert all(r["attempts"] == 1 for r in rows)  # Ray retried the task; the ledger claimed each run once
    resumed = [json.loads((ledger.run_dir(r["id"]) / "run.json").read_text())["resumed_from_step"] for r in rows]
    assert any(step for step in resumed), "no run resumed from a checkpoint after its worker was killed"
    # the resumed curves are the uninterrupted ones (1 thread in both executors): nothing lost, nothing twice
    assert _curves(out) == local_study


# slow: a two-node Ray cluster (~110 s with its start)
# (the default suite stays under 10 min on 2 cores; `make test-slow` runs it)
@pytest.mark.slow
def test_run_directories_are_shipped_when_a_node_does_not_see_the_study(cluster, local_study, tmp_path,
                                                                        monkeypatch):
    """A cluster without shared storage: each run trains in a task's temporary copy and comes back whole."""
    out = tmp_path / "shipped"
    monkeypatch.setattr(ray_executor, "nodes_seeing", lambda ray_, study_dir: ([], ["a", "b"]))
    said = []
    spec = load_study("standard", claims=CLAIMS.split(","), seeds=[0, 1], overrides=TINY, init_pass=False)
    try:
        outcome = run_study(spec, out, stack_runs=False, executor="ray", address=cluster, say=said.append)
    finally:
        ray.shutdown()
    status, _ = judged_study(spec, out, outcome)
    assert status.final and sum(outcome.counts.values()) == 4 and not status.failed
    assert "run directories are shipped to and from the tasks" in said[0]
    assert _curves(out) == local_study
    run = Ledger(out).run_dir(next(iter(local_study)))
    assert (run / "config.toml").is_file() and list(run.glob("checkpoint*"))
    assert not (run / ".lock").exists()  # the task's lock stayed in its temporary directory


def test_pack_leaves_the_lock_out_and_unpack_refuses_paths_that_leave_the_directory(tmp_path):
    run = tmp_path / "run"
    (run / "sub").mkdir(parents=True)
    (run / "metrics.jsonl").write_text("{}\n")
    (run / "sub" / "x").write_text("y")
    (run / ".lock").write_text("pid")
    data = ray_executor.pack(run)
    ray_executor.unpack(data, tmp_path / "copy")
    assert (tmp_path / "copy" / "metrics.jsonl").read_text() == "{}\n"
    assert (tmp_path / "copy" / "sub" / "x").read_text() == "y" and not (tmp_path / "copy" / ".lock").exists()
    assert ray_executor.pack(tmp_path / "missing") is None
    import io
    import tarfile

    evil = io.BytesIO()
    with tarfile.open(fileobj=evil, mode="w") as tar:
        info = tarfile.TarInfo("../escaped")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(tarfile.OutsideDestinationError):
        ray_executor.unpack(evil.getvalue(), tmp_path / "inside")
    assert not (tmp_path / "escaped").exists()


def test_a_shipped_run_coming_back_replaces_normlabs_stale_files_and_nothing_else(tmp_path):
    """An earlier attempt's sqlite -wal or rotated checkpoint must not sit beside the trained files (SQLite would
    read the stale log against the new database); a file the user put there stays."""
    trained = tmp_path / "trained"
    trained.mkdir()
    (trained / "metrics.jsonl").write_text("new\n")
    (trained / "diagnostics.sqlite").write_text("new db")
    study_run = tmp_path / "study-run"
    study_run.mkdir()
    for name, text in (("metrics.jsonl", "old\n"), ("diagnostics.sqlite", "old db"), ("diagnostics.sqlite-wal", "old"),
                       ("checkpoint.prev.pt", "old"), ("notes.txt", "mine")):
        (study_run / name).write_text(text)
    ray_executor.unpack(ray_executor.pack(trained), study_run, replacing=True)
    assert sorted(p.name for p in study_run.iterdir()) == ["diagnostics.sqlite", "metrics.jsonl", "notes.txt"]
    assert (study_run / "metrics.jsonl").read_text() == "new\n" and (study_run / "notes.txt").read_text() == "mine"


def test_bad_executor_and_address_are_clear_errors(tmp_path):
    from normlab.config import ConfigError

    spec = load_study("standard", claims=["C13"], seeds=[0], overrides=TINY, init_pass=False)
    with pytest.raises(ConfigError, match="unknown executor 'dask'; valid: local, ray"):
        run_study(spec, tmp_path / "a", executor="dask")
    with pytest.raises(ConfigError, match="--address '1.2.3.4:6379' is for --executor ray"):
        run_study(spec, tmp_path / "b", address="1.2.3.4:6379")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()



# slow: a two-node Ray cluster (~110 s with its start)
# (the default suite stays under 10 min on 2 cores; `make test-slow` runs it)
@pytest.mark.slow
def test_a_shipped_fine_tune_trains_in_place_on_the_drivers_node(cluster, tmp_path, monkeypatch):
    """A run that starts from a trained one needs its source: with shipping on, it is pinned to the driver's node
    and trains in its own directory there (which keeps the lock file that a shipped copy never brings back)."""
    from normlab.config import load_config
    from normlab.train.loop import train

    ledger = Ledger(tmp_path / "study")
    short = [item for item in TINY if not item.startswith("train.steps")] + ["train.steps=20"]
    source = tmp_path / "source"
    train(load_config(None, short), str(source))
    tune = load_config(None, short + [f'train.init_from="{source}"', 'data.path="paradise_lost"',
                                      'data.vocab_from="tinyshakespeare"'])
    plain = load_config(None, short + ["train.seed=7"])
    ledger.add_runs([(tune.hash(), tune.to_dict()), (plain.hash(), plain.to_dict())])
    monkeypatch.setattr(ray_executor, "nodes_seeing", lambda ray_, study_dir: ([], ["a", "b"]))
    ray_executor.connect(cluster)
    try:
        ray_executor.train_all_ray(ledger, [tune.hash(), plain.hash()], {tune.hash(): 1.0, plain.hash(): 1.0},
                                   threads=1, progress=None, stack_runs=False, address=cluster, say=lambda line: None)
    finally:
        ray.shutdown()
    assert {r["status"] for r in ledger.rows()} <= {"completed", "failed_to_train"}
    assert (ledger.run_dir(tune.hash()) / ".lock").exists()  # trained in place, on the driver's node
    assert not (ledger.run_dir(plain.hash()) / ".lock").exists()  # shipped out and back
    assert json.loads((ledger.run_dir(tune.hash()) / "run.json").read_text())["init_from"] == str(source)


# slow: a two-node Ray cluster (~110 s with its start)
# (the default suite stays under 10 min on 2 cores; `make test-slow` runs it)
@pytest.mark.slow
def test_a_relative_data_path_means_what_it_meant_to_the_driver(cluster, tmp_path, monkeypatch):
    """`data.path = "corpus.txt"` names a file beside the driver, not in a Ray worker's own directory."""
    from normlab.config import load_config

    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus.txt").write_text("to be or not to be, that is the question. " * 400)
    short = [item for item in TINY if not item.startswith("train.steps")] + ["train.steps=20"]
    config = load_config(None, short + ['data.path="corpus.txt"'])
    ledger = Ledger(tmp_path / "study")
    ledger.add_runs([(config.hash(), config.to_dict())])
    ray_executor.connect(cluster)
    try:
        ray_executor.train_all_ray(ledger, [config.hash()], {config.hash(): 1.0}, threads=1, progress=None,
                                   stack_runs=False, address=cluster, say=lambda line: None)
    finally:
        ray.shutdown()
    (row,) = ledger.rows()
    assert row["status"] in ("completed", "failed_to_train"), row
