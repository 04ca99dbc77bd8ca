"""The training loop: nanoGPT's recipe, with checkpoints that resume the same curve bit for bit.

A run knows nothing of the study around it. It reads a `RunConfig`, writes a
`RunDir`, and reports each logged step to an optional callback (the CLI's
progress bar).
"""
from __future__ import annotations

import contextlib
import math
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

import normlab
from normlab.config import RunConfig
from normlab.device import cpu_model, resolve_device
from normlab.data import Corpus, corpus_of
from normlab.data.objectives import objective_for
from normlab.diagnostics import DiagnosticsStore, LayerProbe, find_nonfinite_origin
from normlab.diagnostics.probe import NO_PROBE
from normlab.nn.kernels import get_norm_impl
from normlab.nn.model import IGNORE
from normlab.nn.schemes import profile_model
from normlab.rundir import RunDir, RunDirError, RunLock, RunLockedError, load_model, with_vocab
from normlab.train.cadence import run_cadence
from normlab.train.distributed import SINGLE, Dist, full_state, shard_optimizer_state, sharded, wrap
from normlab.train.end_of_run import LayerSkipRun, PhaseCallback, Phases, budget_s, skip_line, skip_note
from normlab.train.optim import build_optimizer, learning_rate

EVAL_SEED = 0x5EED_0E7A  # val batches are the same at every evaluation and in every run

StepCallback = Callable[[dict[str, Any]], None]
NoteCallback = Callable[[str], None]


class RunError(ValueError):
    """A run that cannot start or go on, for a reason the user can act on; the message is one line."""


class RunConflictError(RunError):
    """The output directory holds a different run."""


class Diverged(Exception):
    def __init__(self, step: int, reason: str, origin: dict | None = None):
        super().__init__(reason)
        self.step, self.reason, self.origin = step, reason, origin


def environment(device: torch.device, dist: Dist = SINGLE) -> dict[str, Any]:
    """What decides a run's numerics beyond its config: versions, CPU, threads, norm kernels, processes."""
    env = {
        "normlab": normlab.__version__, "torch": torch.__version__, "python": sys.version.split()[0],
        "platform": platform.platform(), "device": str(device), "torch_threads": torch.get_num_threads(),
        "cpu": cpu_model(), "norm_impl": get_norm_impl(), **dist.describe(),
    }
    if device.type == "cuda":
        env["device_name"] = torch.cuda.get_device_name(device)
    return env


@contextlib.contextmanager
def run_threads(threads: int):
    """torch's intra-op thread count for the body (0: leave it as it is), restored after."""
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class _RunSteps:
    """A single run as the cadence's `Steps`: one AdamW update, its own val loss, its metrics row."""

    def __init__(self, trainer: "Trainer"):
        self.trainer, self.val_loss, self.row = trainer, math.nan, {}
        self.clock_from, self.elapsed_from = time.perf_counter(), trainer.elapsed

    @property
    def step(self) -> int:
        return self.trainer.step

    def active(self) -> bool:
        return self.trainer.stopped_at is None  # it leaves by raising (Diverged), or stopped on the plateau

    def evaluate(self) -> None:
        if self.step < self.trainer.tc.steps:
            self.val_loss = self.trainer.evaluate()
            return
        batches, batch_s = self.trainer.tc.eval_batches, self.trainer.eval_batch_s  # from the evaluation before
        with self.trainer.phases.phase("final evaluation", batches, "val batches",
                                       expected_s=batch_s and batch_s * batches) as phase:
            self.val_loss = self.trainer.evaluate(on_batch=phase.advance)

    def take_step(self) -> None:
        lr = learning_rate(self.trainer.step, self.trainer.tc)
        loss, grad_norm = self.trainer.train_step(lr)
        self.trainer.step += 1
        self.row = {"lr": lr, "train_loss": loss, "grad_norm": grad_norm}

    def start_clock(self) -> None:
        self.clock_from, self.elapsed_from = time.perf_counter(), self.trainer.elapsed

    def tick_clock(self) -> None:
        self.trainer.elapsed = self.elapsed_from + time.perf_counter() - self.clock_from

    def log(self, step: int, tokens_per_s: float | None, evaluated: bool) -> None:
        row: dict[str, Any] = {"step": step, **(self.row if step else {})}
        if tokens_per_s is not None:
            row["tokens_per_s"] = tokens_per_s
        if evaluated:
            row["val_loss"] = self.val_loss
        self.trainer._log({**row, "elapsed_s": self.trainer.elapsed})

    def checkpoint(self) -> None:
        if self.step < self.trainer.tc.steps:
            self.trainer._checkpoint()
            return
        with self.trainer.phases.phase("checkpoint", 1, "file", expected_s=self.trainer.checkpoint_s) as phase:
            self.trainer._checkpoint()
            phase.advance()

    def stop_on_plateau(self, checkpointed: bool) -> None:
        self.trainer.stop_on_plateau(self.val_loss, checkpointed)


@dataclass
class RunResult:
    status: str
    step: int
    val_loss: float | None
    reason: str | None = None
    outcome: str | None = None  # completed runs: TRAINED or FAILED_TO_TRAIN


TRAINED, FAILED_TO_TRAIN = "trained", "failed_to_train"


def judge_training(val_loss: float | None, plateau: float, margin: float,
                   what: str = "corpus's unigram cross-entropy") -> tuple[str, str | None]:
    """A completed run trained, or failed to train: it ended within `margin` nats of the unigram cross-entropy
    (a model that learned token frequencies and nothing else), or with no finite val loss."""
    if margin <= 0:
        return TRAINED, None
    if val_loss is None or not math.isfinite(val_loss):
        return FAILED_TO_TRAIN, "failed to train: the final val loss is not finite"
    if val_loss > plateau - margin:
        gap = val_loss - plateau
        where = (f"{gap:.3f} nats above the {what} {plateau:.4f}: it did not even learn token frequencies"
                 if gap > 0 else f"{-gap:.3f} nats below the {what} {plateau:.4f}, within the {margin:g}-nat margin "
                                 f"(token frequencies, nothing more)")
        return FAILED_TO_TRAIN, f"failed to train: final val loss {val_loss:.4f} is {where}"
    return TRAINED, None


class Trainer:
    """Trains one `RunConfig` into one run directory, resuming it if it was interrupted."""

    def __init__(self, cfg: RunConfig, out: str, on_log: StepCallback | None = None, fresh: bool = False,
                 on_note: NoteCallback | None = None, corpus: Corpus | None = None, dist: Dist = SINGLE,
                 events: str | Path | None = None, on_phase: PhaseCallback | None = None):
        self.run_dir = RunDir(out)
        self.events_dir, self.events = events, None  # live TensorBoard events (rundir/events.py), when asked
        self.on_log, self.on_note, self.fresh = on_log, on_note, fresh
        self.phases = Phases(self.run_dir, on_phase, writes=dist.main)  # the work after the last step, shown
        self.result: RunResult | None = None  # set once the run is completed: what follows cannot undo that
        self.checkpoint_s: float | None = None  # how long the last checkpoint took to write
        self.eval_batch_s: float | None = None  # a val batch's time in the last evaluation (the ablation's plan)
        self.notes: list[str] = []  # what the user should be told (e.g. a damaged checkpoint passed over)
        self.dist = dist  # one of torchrun's processes (distributed.py), or the only one
        if dist.active and cfg.train.batch_size % dist.world:
            raise ValueError(f"train.batch_size = {cfg.train.batch_size} does not split over {dist.world} processes; "
                             f"valid: a multiple of {dist.world} (it is the global batch)")
        if sharded(dist) and cfg.diagnostics.interval:
            raise ValueError(f"diagnostics.interval = {cfg.diagnostics.interval} under --parallel fsdp: the probe "
                             "reads whole weights and FSDP holds shards; valid: diagnostics.interval = 0, "
                             "or --parallel ddp")
        if dist.active and fresh:
            raise ValueError("--fresh is refused under torchrun (one process would clear what the others read); "
                             "run it once without torchrun, or choose another --out")
        self.device = dist.device or resolve_device(cfg.train.device)
        self.corpus: Corpus = corpus or corpus_of(cfg)
        self.cfg = with_vocab(cfg, self.corpus.tokenizer.vocab_size, self.corpus.tokenizer.mask_id)
        self.tc = self.cfg.train
        tokenizer = self.corpus.tokenizer
        self.objective = objective_for(self.cfg.model.arch, tokenizer.vocab_size, tokenizer.mask_id)

    # -- set-up ---------------------------------------------------------------------------
    def _build(self) -> dict[str, Any] | None:
        """The model (with the checkpoint's weights, if any) and optimizer; returns the checkpoint's state."""
        loaded = load_model(self.run_dir, self.device, cfg=self.cfg, require_checkpoint=False)
        self.model = loaded.model
        self.profile: dict[str, list[float]] = {}  # Admin's ω per stack, when this start profiled them
        self.swap: dict[str, Any] | None = None  # what a swap kept and moved (_swapped_weights); kept on resume
        if loaded.checkpoint is not None and self.run_dir.meta_path.is_file():
            self.swap = self.run_dir.read_meta().get("swap")
        if loaded.checkpoint is None and self.tc.init_from:  # a fine-tune's first start: the source's weights
            self.model.load_state_dict(self._source_weights())
        elif loaded.checkpoint is None:  # Admin's profiling pass (ω), on one batch of its own generator
            self.profile = profile_model(self.model, self._profiling_forward)
        self.eager = wrap(self.model, self.dist)  # what a step calls: the model, or its DDP / FSDP form
        self.forward = torch.compile(self.eager) if self.tc.compile else self.eager
        self.optimizer = build_optimizer(self.model, self.tc, self.device.type)
        self.data_rng = torch.Generator().manual_seed(self.tc.seed)
        self.step, self.elapsed = 0, 0.0
        self.stopped_at: int | None = None  # the step `train.plateau_stop` finished it at, still on the plateau
        # rank 0 alone records diagnostics, of its own slice of the batch (the gradients are the global ones)
        self.store = DiagnosticsStore(self.run_dir.path) if self.cfg.diagnostics.interval and self.dist.main else None
        self.probe = LayerProbe(self.model, self.store, self.cfg.diagnostics.interval) if self.store else None
        if loaded.checkpoint is not None and loaded.checkpoint.note():
            self._note(loaded.checkpoint.note())
        return loaded.checkpoint.state if loaded.checkpoint else None

    def _profiling_forward(self) -> None:
        """One forward on a batch drawn from its own generator (the run's data order is left untouched)."""
        rng = torch.Generator().manual_seed(self.tc.seed)
        x, y = self.objective.batch(self.corpus, "train", self.tc.batch_size, self.cfg.model.block_size, rng)
        self.model(x.to(self.device), y.to(self.device))

    def _source_weights(self) -> dict[str, torch.Tensor]:
        """The trained weights of `train.init_from` (weights_only, digest-checked), for this very model."""
        source = self.tc.init_from
        try:
            loaded = load_model(source, self.device)
        except (ValueError, OSError) as e:
            raise ValueError(f"train.init_from {source!r} cannot be loaded: {e}") from None
        theirs, ours = loaded.cfg.model.model_dump(mode="json"), self.cfg.model.model_dump(mode="json")
        differ = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
        if self.tc.init_from_match != "exact":  # a swap: only the placement and the normalizer may differ
            differ = [k for k in differ if k not in SWAPPABLE]
        if not differ and self.tc.init_from_match != "exact":
            return self._swapped_weights(loaded.model)
        if differ:
            raise ValueError(f"train.init_from {source!r} is another model: "
                             + ", ".join(f"model.{k} = {theirs.get(k)!r} there, {ours.get(k)!r} here" for k in differ))
        return loaded.model.state_dict()

    def _swapped_weights(self, source_model: torch.nn.Module) -> dict[str, torch.Tensor]:
        """The source's tensors where this model has the same name and shape, its own init elsewhere (a swap
        of placement or normalizer); with `by_stream`, a norm the placement moved takes the gains of the
        source's norm that read the same point of the stream (`stream_norms`: Post-LN's norm after sub-layer
        k becomes Pre-LN's norm before sub-layer k + 1, its last the final norm). run.json's "swap" lists what
        went where."""
        source, ours = source_model.state_dict(), self.model.state_dict()
        kept = {k: k for k, v in ours.items() if k in source and source[k].shape == v.shape}
        by_stream = self.tc.init_from_match == "by_stream"
        moved = _moved_norms(source_model, self.model, source, ours, kept) if by_stream else {}
        kept.update(moved)
        if not kept:
            raise ValueError(f"train.init_from {self.tc.init_from!r} shares no tensor (name and shape) with this model")
        taken = set(kept.values())
        self.swap = {"kept": sum(k == v for k, v in kept.items()), "moved": moved,
                     "new": sorted(set(ours) - set(kept)), "left_behind": sorted(set(source) - taken)}
        self._note(f"swap: {len(kept)} of {len(ours)} tensors from {self.tc.init_from} ({len(moved)} norm tensors "
                   f"moved to their point of the stream); new at init: {len(self.swap['new'])}, left behind: "
                   f"{len(self.swap['left_behind'])}")
        return {**ours, **{k: source[v] for k, v in kept.items()}}

    def _restore(self, ckpt: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(ckpt["optimizer"])
        shard_optimizer_state(self.optimizer, self.dist)
        # RNG states are CPU byte tensors, whatever map_location moved them to
        self.data_rng.set_state(ckpt["data_rng"].cpu())
        torch.set_rng_state(ckpt["torch_rng"].cpu())
        if self.device.type == "cuda" and ckpt.get("cuda_rng") is not None:
            torch.cuda.set_rng_state(ckpt["cuda_rng"].cpu(), self.device)
        self.step, self.elapsed = ckpt["step"], ckpt["elapsed"]

    def _checkpoint(self) -> None:
        # one process's format whatever the engine (FSDP's shards gathered by every rank); rank 0 writes
        started = time.perf_counter()
        model = full_state(self.model.state_dict(), self.dist)
        optimizer = full_state(self.optimizer.state_dict(), self.dist)
        if not self.dist.main:
            return
        self.run_dir.save_checkpoint({
            "model": model, "optimizer": optimizer,
            "data_rng": self.data_rng.get_state(), "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None,
            "step": self.step, "elapsed": self.elapsed, "config_hash": self.cfg.hash(),
        })
        self.checkpoint_s = time.perf_counter() - started

    def _prepare_dir(self) -> None:
        """Check that the directory holds this run (or nothing yet) and write its config."""
        rd = self.run_dir
        if not rd.exists():
            rd.write_config(self.cfg)
            return
        old = rd.read_config()
        if old.hash() != self.cfg.hash():
            raise RunConflictError(
                f"{rd.path} holds another run (config {old.hash()}, this one is {self.cfg.hash()}); "
                "choose another output directory, or pass --fresh to start over")

    def _rewind(self, ckpt: dict[str, Any] | None) -> None:
        """Drop what was logged after the checkpoint a resume starts from."""
        step = ckpt["step"] if ckpt else 0
        self.run_dir.truncate_metrics(step if ckpt else -1)
        if (self.run_dir.path / DiagnosticsStore.FILENAME).is_file():
            DiagnosticsStore(self.run_dir.path).truncate(step - 1 if ckpt else -1)

    # -- the run: lock, start, loop, finish ------------------------------------------------
    def run(self) -> RunResult:
        """Train (or resume) under the directory's lock; a reason the user can act on raises `RunError`.
        Under torchrun, rank 0 takes the lock and every rank learns whether it could."""
        lock, refused = None, None
        if self.dist.main:
            try:
                lock = self.acquire()
            except RunError as e:
                refused = str(e)
        refused = self.dist.from_main(refused)
        if refused is not None:
            raise RunError(refused)
        try:
            with run_threads(self.tc.threads):
                return self.guarded(self._run_locked)
        finally:
            self.close_events()  # still open: the run stopped early (interrupted, failed)
            if lock is not None:
                lock.release()

    def acquire(self) -> RunLock:
        """Make (or adopt) the run directory and lock it; with `fresh`, clear what normlab wrote there."""
        rd = self.run_dir
        try:
            rd.create()
            lock = RunLock(rd.path).acquire()
        except (RunDirError, RunLockedError) as e:  # not our directory, or another process's: touch nothing
            raise RunError(str(e)) from None
        except OSError as e:
            raise RunError(_os_message(e, rd.path)) from None
        if self.fresh:
            try:
                rd.clear()
                rd.create()
            except (RunDirError, OSError) as e:  # refused, or the disk said no: nothing of the user's touched
                lock.release()
                raise RunError(str(e)) from None
        return lock

    def guarded(self, fn: Callable[[], Any]) -> Any:
        """Call `fn`; config, checkpoint and disk errors are recorded in status.json and raised as `RunError`."""
        try:
            return fn()
        except RunError:  # e.g. the directory holds another run: its status is not ours to write
            raise
        except (ValueError, OSError) as e:
            message = _os_message(e, self.run_dir.path) if isinstance(e, OSError) else str(e)
            self._record_failure(message)
            raise RunError(message) from None
        except KeyboardInterrupt:  # Ctrl-C (or a study stopping its workers): resumable, not a failure
            self._record_interrupted()
            raise
        except BaseException as e:
            self._record_failure(f"{type(e).__name__}: {e}")
            raise

    def _run_locked(self) -> RunResult:
        done = self.start()
        if done is not None:
            return done
        try:
            val_loss = self._loop()
        except Diverged as d:
            return self.record_diverged(d)
        return self.finish(val_loss)

    def start(self) -> RunResult | None:
        """Ready the model, optimizer and data position (resuming a checkpoint); a finished run's result.
        Under torchrun, rank 0 checks and prepares the directory, then every rank reads the checkpoint."""
        rd = self.run_dir
        get_norm_impl()  # a bad NORMLAB_NORM_IMPL fails the run now, not at the first norm's forward
        done, problem = None, None
        if self.dist.main:
            try:
                done = self._finished()
                if done is None:
                    self._prepare_dir()
            except (ValueError, OSError) as e:
                if not self.dist.active:
                    raise
                problem = _os_message(e, rd.path) if isinstance(e, OSError) else str(e)
        done, problem = self.dist.from_main((done, problem))
        if problem is not None:
            raise RunError(problem)
        if done is not None:
            return done
        ckpt = self._build()
        if self.dist.main:
            self._rewind(ckpt)
        if ckpt is not None:
            self._restore(ckpt)
            if self.dist.main:
                self._note(f"resuming from step {self.step} (its last checkpoint)")
        if self.dist.active:  # every rank resumes from rank 0's step, or none goes on (else their collectives hang)
            apart = self.dist.from_main(self.step) != self.step
            if self.dist.sum(torch.tensor(float(apart), device=self.device)).item():
                raise RunError(f"the ranks resume at different steps (this one, rank {self.dist.rank}, at {self.step}): "
                               f"they see different checkpoints in {self.run_dir.path}; run torchrun where every "
                               "rank sees the same run directory")
        if self.dist.main:
            rd.write_meta(self._meta(resumed_from=self.step if ckpt else None))
            rd.write_status("running", step=self.step)
            self._open_events()
        return None

    def _open_events(self) -> None:
        """TensorBoard events from what the run kept (rewound to its checkpoint), then live from the loop."""
        if self.events_dir is None:
            return
        from normlab.rundir.events import EventLog

        self.events = EventLog(self.events_dir, self.run_dir, self.cfg.to_dict())
        if self.store is not None:
            self.store.on_write = self.events.layers

    def close_events(self, status: str | None = None, val_loss: float | None = None) -> None:
        if self.events is not None:
            self.events.close(status, val_loss)
            self.events = None

    def _finished(self) -> RunResult | None:
        """The result of a run this directory already finished (completed or diverged), else None."""
        rd = self.run_dir
        status = rd.read_status() if rd.exists() else None
        if status and status["status"] in ("completed", "diverged") and rd.read_config().hash() == self.cfg.hash():
            return RunResult(status["status"], status["step"], status.get("val_loss"), status.get("reason"),
                             status.get("outcome"))
        return None

    def record_diverged(self, d: Diverged) -> RunResult:
        self.close_events("diverged")
        if self.dist.main:
            self.run_dir.write_status("diverged", step=d.step, reason=d.reason, val_loss=None, nan_origin=d.origin)
        return RunResult("diverged", d.step, None, d.reason)

    def stop_on_plateau(self, val_loss: float, checkpointed: bool) -> bool:
        """`train.plateau_stop`: is the run still on the unigram plateau at this evaluation? Then it stops here
        (checkpointed, so its directory holds the state it was judged in) and `finish` records it as failed to
        train. Under torchrun rank 0 decides for every rank."""
        plateau = self.objective.plateau(self.corpus)
        stuck = judge_training(val_loss, plateau, self.tc.untrained_margin)[0] != TRAINED
        if not self.dist.from_main(stuck):  # rank 0's call on every rank: a last-bit difference must not split them
            return False
        self.stopped_at = self.step
        if not checkpointed:
            self._checkpoint()
        return True

    def finish(self, val_loss: float) -> RunResult:
        """`completed`, with its outcome (trained, or failed to train), then the layer-skip ablation: a run cut
        short in its ablation stays completed (train/end_of_run.py)."""
        plateau = self.objective.plateau(self.corpus)
        outcome, reason = judge_training(val_loss, plateau, self.tc.untrained_margin, self.objective.plateau_what)
        if self.stopped_at is not None:
            reason = (f"stopped at step {self.stopped_at} of {self.tc.steps} (train.plateau_stop = "
                      f"{self.tc.plateau_stop:g}): {reason}")
        if self.dist.main:
            self.close_events(outcome if outcome == FAILED_TO_TRAIN else "completed", val_loss)
            self.run_dir.write_status("completed", step=self.step, val_loss=val_loss, elapsed_s=self.elapsed,
                                      outcome=outcome, reason=reason, unigram_ce=plateau)
        self.result = RunResult("completed", self.step, val_loss, reason, outcome)
        if self.cfg.diagnostics.layer_skip:  # every rank: FSDP gathers weights
            self.layer_skip(budget_s(self.cfg.diagnostics, self.elapsed))
        return self.result

    def _record_failure(self, reason: str) -> None:
        """status.json says `failed` and why (rank 0's), unless the run completed before; best effort (the disk
        may be what failed)."""
        if not self.dist.main or self.result is not None:
            return
        try:
            if self.run_dir.path.is_dir():
                self.run_dir.write_status("failed", step=getattr(self, "step", 0), reason=reason)
        except OSError:
            pass

    def _record_interrupted(self) -> None:
        """status.json says `interrupted` at the step reached, unless the run completed before (its end-of-run
        diagnostics were cut short); the next start resumes from the last checkpoint."""
        if not self.dist.main or self.result is not None:
            return
        try:
            if self.run_dir.path.is_dir():
                self.run_dir.write_status("interrupted", step=getattr(self, "step", 0),
                                          reason="interrupted (Ctrl-C); run again to resume from the last checkpoint")
        except OSError:
            pass

    def _note(self, message: str) -> None:
        self.notes.append(message)
        if self.on_note is not None:
            self.on_note(message)

    def _loop(self) -> float:
        """Train to the end on the one cadence (train/cadence.py); the last val loss measured (nan if none)."""
        steps = _RunSteps(self)
        stopped = self._stopped_before()
        if stopped is not None:
            return stopped
        run_cadence(self.tc, self.tc.batch_size * self.cfg.model.block_size, steps)
        return steps.val_loss

    def _stopped_before(self) -> float | None:
        """A run killed after `train.plateau_stop` stopped it (its checkpoint written) but before its status said
        so resumes at that very evaluation: it stops there again, as the uninterrupted run did; its val loss."""
        tc = self.tc
        if not (tc.plateau_stop and 0 < self.step < tc.steps and self.step % tc.eval_interval == 0
                and self.step >= tc.plateau_stop * tc.steps):
            return None
        rows = self.run_dir.metrics() if self.dist.main else []
        val = self.dist.from_main(next((r["val_loss"] for r in reversed(rows)
                                        if r.get("step") == self.step and "val_loss" in r), None))
        if val is None or not self.stop_on_plateau(val, checkpointed=True):
            return None
        return val

    def train_step(self, lr: float) -> tuple[float, float]:
        """One AdamW update on a fresh batch; raises `Diverged` on a non-finite or runaway loss."""
        tc, model = self.tc, self.model
        if not model.training:  # evaluate() puts it back; train() walks every module, so not every step
            model.train()
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        # the global batch, drawn alike on every rank (the data order does not depend on the world size); our slice
        x, y = self.objective.batch(self.corpus, "train", tc.batch_size, self.cfg.model.block_size, self.data_rng)
        x, y = self.dist.shard(x), self.dist.shard(y)
        x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
        probe = self.probe.session(self.step) if self.probe else NO_PROBE
        interval = self.cfg.diagnostics.interval
        measured = interval > 0 and self.step % interval == 0  # alike on every rank; rank 0 alone has the probe
        # a measured step runs without recomputation: the probe's hooks must see each block once
        model.checkpoint_blocks = tc.activation_checkpointing and not measured
        with probe, self.autocast():
            # measured steps run eagerly (compiled code would not see the probe's hooks); under
            # compile = true their numerics may differ from the compiled steps' in the last bits
            _, loss = (self.eager if measured else self.forward)(x, y)
        loss, loss_value = self._global_loss(loss, y)
        if not math.isfinite(loss_value) or loss_value > tc.diverge_loss:
            what = "non-finite" if not math.isfinite(loss_value) else f"above diverge_loss {tc.diverge_loss:g}"
            self._diverged(f"train loss {loss_value:.4g} at step {self.step + 1} ({what})",
                           {"lr": lr, "train_loss": loss_value}, x, y, trace=not math.isfinite(loss_value))
        loss.backward()
        probe.after_backward()
        max_norm = tc.grad_clip if tc.grad_clip > 0 else math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm).item()
        if not math.isfinite(grad_norm):
            self._diverged(f"non-finite gradient norm at step {self.step + 1}",
                           {"lr": lr, "train_loss": loss_value, "grad_norm": grad_norm}, x, y, trace=True)
        probe.before_update()
        self.optimizer.step()
        model.project_weights()  # nGPT: the weights back on the unit sphere; nothing for every other scheme
        self.optimizer.zero_grad(set_to_none=True)
        probe.after_update()
        return loss_value, grad_norm

    def _global_loss(self, loss: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, float]:
        """(the loss to differentiate, the global batch's mean loss). Alone: the loss itself. Under torchrun:
        weighted by this rank's share of the target tokens, so the gradients DDP averages are the global
        mean's; every rank gets the same logged value, so all agree on divergence."""
        if not self.dist.active:
            return loss, loss.item()
        count = (y != IGNORE).sum().to(loss.dtype)
        summed, total = self.dist.sum(torch.stack([loss.detach() * count, count]))  # one all-reduce a step
        return loss * (count * self.dist.world / total), (summed / total).item()

    def _diverged(self, reason: str, row: dict[str, Any], x: torch.Tensor, y: torch.Tensor, trace: bool):
        """Record the diverging step, find the module where a NaN/inf started, and stop the run."""
        step = self.step + 1
        self._log({"step": step, **row, "elapsed_s": self.elapsed})
        origin = None
        # the origin is found by a local forward and backward: alone only (under DDP the backward would set off the
        # gradient all-reduce on this rank alone, under FSDP the forward would gather shards without the others)
        if trace and not self.dist.active:
            self.model.zero_grad(set_to_none=True)
            with self.autocast():
                origin = find_nonfinite_origin(self.model, lambda: self.model(x, y)[1])
            if origin is not None:
                origin["step"] = step
                reason += f"; first non-finite value from {origin['module']} ({origin['phase']})"
        raise Diverged(step, reason, origin)

    def layer_skip(self, budget: float | None) -> dict[str, Any]:
        """Val loss with each block skipped (ΔL per layer, effective depth) into DIR/layer_skip.json, within
        `budget` seconds (None: all diagnostics.layer_skip_most asks for, over every val batch); status.json's
        `layer_skip` says how it went. The record; Ctrl-C keeps what was measured and re-raises."""
        ablation = LayerSkipRun(self.model.blocks, self._ablation_loss, self.tc.eval_batches,
                                self.cfg.diagnostics.layer_skip_most or None, budget, self.dist.from_main,
                                batch_s=None if self.tc.compile else self.eval_batch_s)
        save = self._save_layer_skip if self.dist.main else (lambda record: None)
        try:
            record = ablation.run(self.phases, save)
        except KeyboardInterrupt:
            self._mark_layer_skip(skip_line(ablation.saved) if ablation.saved
                                  else "skipped: interrupted before a layer was measured")
            raise
        self._mark_layer_skip(skip_line(record))
        note = skip_note(record, str(self.run_dir.path))
        if note and self.dist.main:
            self._note(note)
        return record

    def _ablation_loss(self, batches: int, on_batch: Callable[[], None]) -> float:
        return self.evaluate(eager=True, batches=batches, on_batch=on_batch)  # compiled code ignores new hooks

    def _save_layer_skip(self, record: dict[str, Any]) -> None:
        self.run_dir.write_json("layer_skip.json", record)

    def _mark_layer_skip(self, how: str) -> None:
        """status.json's `layer_skip`: complete, partial or skipped, and why."""
        status = self.run_dir.read_status() if self.dist.main else None
        if status is not None:
            info = {k: v for k, v in status.items() if k not in ("status", "updated", "phase")}
            self.run_dir.write_status(status["status"], **{**info, "layer_skip": how})

    @torch.no_grad()
    def evaluate(self, split: str = "val", eager: bool = False, batches: int | None = None,
                 on_batch: Callable[[], None] | None = None) -> float:
        """Mean loss over the first `batches` (default `eval_batches`) of the fixed batches of `split` (model in
        eval mode; `eager` bypasses compile); `on_batch` is called after each."""
        self.model.eval()
        rng = torch.Generator().manual_seed(EVAL_SEED)
        losses, started = [], time.perf_counter()
        for _ in range(batches or self.tc.eval_batches):
            x, y = self.objective.batch(self.corpus, split, self.tc.batch_size, self.cfg.model.block_size, rng)
            with self.autocast():
                _, loss = (self.model if eager else self.forward)(x.to(self.device), y.to(self.device))
            losses.append(loss.item())
            if on_batch is not None:
                on_batch()
        self.model.train()
        self.eval_batch_s = (time.perf_counter() - started) / len(losses)
        return sum(losses) / len(losses)

    def autocast(self):
        """bf16 autocast for the forward pass, or nothing for fp32."""
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.tc.precision == "bf16")

    def _log(self, row: dict[str, Any]) -> None:
        if not self.dist.main:
            return
        self.run_dir.append_metrics(row)
        if self.events is not None:
            self.events.scalars(row)
        if self.on_log is not None:
            self.on_log(row)

    def _meta(self, resumed_from: int | None) -> dict[str, Any]:
        return {
            "config_hash": self.cfg.hash(),
            "environment": environment(self.device, self.dist),
            "corpus": {"name": self.corpus.name, "tokenizer": self.corpus.tokenizer.kind,
                       "vocab_size": self.corpus.tokenizer.vocab_size,
                       "train_tokens": len(self.corpus.train), "val_tokens": len(self.corpus.val),
                       "vocab_from": self.corpus.vocab_from, "dropped_chars": self.corpus.dropped},
            "objective": self.objective.describe(),
            "init_from": self.tc.init_from,
            **({"swap": self.swap} if self.swap else {}),
            "model": {"n_params": self.model.num_params(), "scheme": self.model.scheme.describe(),
                      "final_norm": self.cfg.model.resolved_final_norm(), "init": self.model.init_record,
                      **({"admin_omega": self.profile} if self.profile else {}),
                      # which stack each diagnostics layer index belongs to (encoder blocks come first)
                      "stacks": _stacks(self.model)},
            "resumed_from_step": resumed_from,
            "notes": self.notes,
        }


def _stacks(model) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for layer in range(len(model.blocks)):
        out.setdefault(model.stack_of(layer), []).append(layer)
    return out


def _os_message(e: OSError, run_path) -> str:
    """`[Errno 28] No space left on device` → one line naming the file (or the run directory)."""
    where = e.filename or run_path
    return f"cannot write {where}: {e.strerror or e}" if e.strerror else f"{where}: {e}"


def train(cfg: RunConfig, out: str, on_log: StepCallback | None = None, fresh: bool = False,
          dist: Dist = SINGLE, events: str | Path | None = None) -> RunResult:
    """Train `cfg` into the run directory `out` (resuming it if it holds this run, interrupted); `events`: a
    directory for live TensorBoard events."""
    return Trainer(cfg, out, on_log, fresh=fresh, dist=dist, events=events).run()


def layer_skip_again(run: str | Path, device: str | None = None, on_phase: PhaseCallback | None = None
                     ) -> dict[str, Any]:
    """`normlab diagnose RUN --layer-skip`: a completed run's layer-skip ablation, whole (the blocks
    diagnostics.layer_skip_most asks for, over every val batch, no budget), into RUN/layer_skip.json, under the
    run's lock; `device`: where to measure (unset: the run's train.device). Its record."""
    rd = RunDir(run)
    if not rd.exists():
        raise ValueError(f"{str(run)!r} is not a normlab run directory: no config.toml in it")
    status = rd.read_status() or {"status": "not started"}
    if status["status"] != "completed":
        raise ValueError(f"{str(run)!r} is {status['status']} (step {status.get('step', 0)}): the layer-skip ablation "
                         "measures a completed run; finish its training first (normlab train resumes it)")
    trainer = Trainer(rd.read_config(), str(run), on_phase=on_phase)
    lock = trainer.acquire()
    try:
        trainer.device = resolve_device(device) if device else trainer.device
        trainer.model = load_model(rd, trainer.device, cfg=trainer.cfg).model
        trainer.result = RunResult("completed", status["step"], status.get("val_loss"))
        with run_threads(trainer.tc.threads):
            return trainer.layer_skip(None)
    finally:
        lock.release()


# what a swap (init_from_match by_name / by_stream) may change of the source's model: where the norms go, which
# normalizer, and the init of what the source does not hold; anything else is another model, refused
SWAPPABLE = {"scheme", "scheme_options", "norm", "norm_options", "norm_eps", "norm_affine", "norm_bias", "final_norm",
             "embed_norm", "qk_norm", "init", "init_std", "init_residual_scaling", "dropout"}


def _moved_norms(source_model, model, source: dict, ours: dict, kept: dict[str, str]) -> dict[str, str]:
    """{our norm tensor: the source's} for our stream norms that found no namesake, from the source's unused
    stream norm at the same point (models without `stream_norms`, an encoder–decoder: none)."""
    if not (hasattr(source_model, "stream_norms") and hasattr(model, "stream_norms")):
        return {}
    used = set(kept.values())
    theirs_at = {point: name for name, point in source_model.stream_norms().items()
                 if not any(k.startswith(name + ".") for k in used)}
    moved = {}
    for name, point in model.stream_norms().items():
        if any(k.startswith(name + ".") for k in kept) or point not in theirs_at:
            continue
        for suffix in ("weight", "bias"):
            mine, theirs = f"{name}.{suffix}", f"{theirs_at[point]}.{suffix}"
            if mine in ours and theirs in source and source[theirs].shape == ours[mine].shape:
                moved[mine] = theirs
    return moved
