"""`torchrun -m normlab train`: DDP over 2 CPU processes (gloo) trains the 1-process curve of the same global
batch, within fp tolerance; only rank 0 writes the run directory; a checkpoint resumes on another world size."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from normlab.config import load_config
from normlab.rundir import load_model
from normlab.train import RunDir
from normlab.train.distributed import Dist
from normlab.train.loop import Trainer, train

TORCHRUN = str(Path(sys.executable).parent / "torchrun")
SETS = ["model.d_model=32", "model.n_head=2", "model.n_layer=2", "model.block_size=32", "model.dropout=0",
        "train.batch_size=8", "train.steps=60", "train.warmup_steps=10", "train.eval_interval=20", "train.eval_batches=2",
        "train.ckpt_interval=20", "train.threads=1", "diagnostics.interval=20"]
# fp32, 60 AdamW steps: the ranks' gradients are averaged in another order than one process sums them.
# Measured: at most 9.5e-7 apart (train loss, val loss, gradient norm); the tolerance leaves 100× room.
TOLERANCE = 1e-4


def torchrun(out: Path, sets: list[str], nproc: int = 2, *extra: str) -> subprocess.CompletedProcess:
    cmd = [TORCHRUN, "--standalone", f"--nproc_per_node={nproc}", "-m", "normlab", "train", "--out", str(out),
           *extra]
    for item in sets:
        cmd += ["--set", item]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def curve(out: Path) -> list[dict]:
    return RunDir(out).metrics()


def assert_same_curve(a: list[dict], b: list[dict]) -> float:
    """Same steps, same logged quantities, every value within TOLERANCE; returns the largest difference."""
    assert [r["step"] for r in a] == [r["step"] for r in b]
    worst = 0.0
    for ra, rb in zip(a, b):
        for key in ("train_loss", "val_loss", "grad_norm", "lr"):
            assert (key in ra) == (key in rb), (ra, rb)
            if key in ra:
                worst = max(worst, abs(ra[key] - rb[key]))
                assert ra[key] == pytest.approx(rb[key], abs=TOLERANCE), (key, ra["step"], ra[key], rb[key])
    return worst


ENGINES = {"ddp": SETS, "fsdp": SETS[:-1] + ["diagnostics.interval=off"]}  # FSDP's shards: no weight probe
# DDP's tests run by default, FSDP's in the slow suite (`make test-slow`): 36 s of a default suite kept under 10 min
ENGINE_PARAMS = ["ddp", pytest.param("fsdp", marks=pytest.mark.slow)]


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """The 1-process reference run of each engine's settings."""
    runs = {}
    for engine, sets in ENGINES.items():
        out = tmp_path_factory.mktemp(f"single-{engine}") / "run"
        assert train(load_config(None, sets), str(out)).status == "completed"
        runs[engine] = out
    return runs


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
def test_two_processes_train_the_one_process_curve(engine, single, tmp_path):
    out = tmp_path / engine
    done = torchrun(out, ENGINES[engine], 2, "--parallel", engine)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("completed 60 steps") == 1  # rank 0 alone reports
    assert assert_same_curve(curve(out), curve(single[engine])) < TOLERANCE
    env = RunDir(out).read_meta()["environment"]
    assert (env["world_size"], env["backend"], env["parallel"]) == (2, "gloo", engine)
    assert RunDir(single[engine]).read_meta()["environment"]["world_size"] == 1
    steps = [r["step"] for r in curve(out)]
    assert len(steps) == len(set(steps))  # rank 0 alone wrote: one row per logged step
    # the checkpoint is one process's: whole weights, loadable alone, the reference's within fp tolerance
    ours, theirs = load_model(out).model.state_dict(), load_model(single[engine]).model.state_dict()
    assert ours.keys() == theirs.keys()
    for name in ours:
        torch.testing.assert_close(ours[name], theirs[name], atol=TOLERANCE, rtol=0, msg=name)


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
def test_a_checkpoint_resumes_on_another_world_size(engine, single, tmp_path):
    """Interrupted after its step-20 checkpoint in one process, resumed by two: the uninterrupted curve."""
    out = tmp_path / "resumed"
    cfg = load_config(None, ENGINES[engine])

    def stop_at_30(row):
        if row["step"] == 30:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Trainer(cfg, str(out), on_log=stop_at_30).run()
    done = torchrun(out, ENGINES[engine], 2, "--parallel", engine)
    assert done.returncode == 0, done.stdout + done.stderr
    assert RunDir(out).read_meta()["resumed_from_step"] == 20
    assert_same_curve(curve(out), curve(single[engine]))


def test_masked_lm_weights_each_rank_by_its_masked_tokens(tmp_path):
    """An encoder's ranks score different numbers of masked tokens; the loss is still the global batch's mean."""
    sets = SETS + ['model.arch="encoder"', "train.steps=20", "train.eval_interval=10"]
    # the premise: the first global batch's halves (rank 0's and rank 1's slices) hold different masked counts
    from normlab.nn.model import IGNORE

    cfg = load_config(None, sets)
    probe = Trainer(cfg, str(tmp_path / "probe"))  # its objective and corpus; the batch as train_step draws it
    _, y = probe.objective.batch(probe.corpus, "train", cfg.train.batch_size, cfg.model.block_size,
                                 torch.Generator().manual_seed(cfg.train.seed))
    half = y.shape[0] // 2
    assert (y[:half] != IGNORE).sum() != (y[half:] != IGNORE).sum()
    alone = tmp_path / "alone"
    train(load_config(None, sets), str(alone))
    done = torchrun(tmp_path / "ddp", sets)
    assert done.returncode == 0, done.stdout + done.stderr
    assert_same_curve(curve(tmp_path / "ddp"), curve(alone))


def test_a_global_batch_that_does_not_split_is_a_clear_error(tmp_path):
    cfg = load_config(None, SETS + ["train.batch_size=7"])
    with pytest.raises(ValueError, match="train.batch_size = 7 does not split over 2 processes; valid: a multiple of 2"):
        Trainer(cfg, str(tmp_path / "x"), dist=Dist(rank=0, world=2))
    with pytest.raises(ValueError, match="diagnostics.interval = 20 under --parallel fsdp.*valid: diagnostics.interval = 'off'"):
        Trainer(load_config(None, SETS), str(tmp_path / "x"), dist=Dist(rank=0, world=2, parallel="fsdp"))
    with pytest.raises(ValueError, match="--fresh is refused under torchrun"):
        Trainer(load_config(None, SETS), str(tmp_path / "x"), fresh=True, dist=Dist(rank=0, world=2))
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
def test_a_diverging_run_ends_on_every_rank_and_is_recorded_once(engine, tmp_path):
    """All ranks see the same (global) loss, so all stop at the same step; no rank waits on a collective."""
    out = tmp_path / "diverged"
    done = torchrun(out, ENGINES[engine] + ["train.diverge_loss=3.0"], 2, "--parallel", engine)
    # the ranks exit 3, the CLI's code for a diverged run (torchrun reports a non-zero child as its own failure)
    assert done.returncode != 0 and re.search(r"exitcode\s*:\s*3\b", done.stderr), done.stdout + done.stderr
    assert "diverged at step 1" in done.stdout and "Timeout" not in done.stderr
    status = RunDir(out).read_status()
    assert status["status"] == "diverged" and status["step"] == 1 and "above diverge_loss 3" in status["reason"]
