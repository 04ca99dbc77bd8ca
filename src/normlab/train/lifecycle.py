"""A run's directory from claim to end: what a run writes beside its training, so that the trainer need not.

    claimed()    the directory made (or adopted, or cleared with --fresh) and locked to this process
    open()       a finished run's result, or the directory checked to hold this run, its config written
    resume()     what was logged after the checkpoint dropped, the optimizer and random generators restored
    begin()      run.json (environment, corpus, model facts), status `running`, live TensorBoard events
    log(), save_checkpoint()             while it trains
    diverged(), completed(), guarded()   how it ended: diverged, completed, failed or interrupted

Under torchrun rank 0 alone writes the directory; where its finding decides what every rank does (the lock
refused, the run finished, the step to resume at), every rank learns it from rank 0.
"""
from __future__ import annotations

import contextlib
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from normlab.config import RunConfig
from normlab.data import Corpus
from normlab.data.objectives import Objective
from normlab.data.provenance import FILE as CORPUS_FILE, Provenance
from normlab.device import cpu_model
from normlab.nn.kernels import get_norm_impl
from normlab.rundir import Checkpoint, RunDir, RunDirError, RunLock, RunLockedError
from normlab.rundir.diagnostics_store import DiagnosticsStore
from normlab.rundir.events import EventLog
from normlab.train.distributed import SINGLE, Dist, full_state, shard_optimizer_state
from normlab.version import __version__

TRAINED, FAILED_TO_TRAIN = "trained", "failed_to_train"


class RunError(ValueError):
    """A run that cannot start or go on, for a reason the user can act on; the message is one line."""


class RunConflictError(RunError):
    """The output directory holds a different run."""


class Diverged(Exception):
    """The run diverged at `step`: why, and the module where its first non-finite value came from, if found."""

    def __init__(self, step: int, reason: str, origin: dict | None = None):
        super().__init__(reason)
        self.step, self.reason, self.origin = step, reason, origin


@dataclass
class RunResult:
    status: str
    step: int
    val_loss: float | None
    reason: str | None = None
    outcome: str | None = None  # completed runs: TRAINED or FAILED_TO_TRAIN


def environment(device: torch.device, dist: Dist = SINGLE) -> dict[str, Any]:
    """What decides a run's numerics beyond its config: versions, CPU, threads, norm kernels, processes."""
    env = {
        "normlab": __version__, "torch": torch.__version__, "python": sys.version.split()[0],
        "platform": platform.platform(), "device": str(device), "torch_threads": torch.get_num_threads(),
        "cpu": cpu_model(), "norm_impl": get_norm_impl(), **dist.record(),
    }
    if device.type == "cuda":
        env["device_name"] = torch.cuda.get_device_name(device)
    return env


class RunLifecycle:
    """One run's directory: its lock, config, run.json, status, metrics, checkpoints and events (see the module)."""

    def __init__(self, out: str | Path, cfg: RunConfig, corpus: Corpus, objective: Objective, device: torch.device,
                 dist: Dist = SINGLE, fresh: bool = False, events: str | Path | None = None,
                 on_note: Callable[[str], None] | None = None):
        self.run_dir = RunDir(out)
        self.cfg, self.corpus, self.objective, self.device, self.dist = cfg, corpus, objective, device, dist
        self.fresh, self.on_note = fresh, on_note
        self.events_dir, self.events = events, None  # live TensorBoard events (rundir/events.py), when asked
        self.notes: list[str] = []  # what the user should be told (e.g. a damaged checkpoint passed over)
        self.swap: dict[str, Any] | None = None  # what a swap kept and moved (train/init_from.py); kept on resume
        self.calibration: dict[str, Any] = {}  # what the schemes' set-up pass set, when this start ran it
        self.resumed_from: int | None = None  # the checkpoint's step this start resumed from
        self.checkpoint_s: float | None = None  # how long the last checkpoint took to write
        self.result: RunResult | None = None  # set once the run is completed: what follows cannot undo that

    # -- claim ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def claimed(self) -> Iterator[None]:
        """The directory locked for the body (a `RunError` if another process holds it); events still open at the
        end (a run stopped early) are closed. Under torchrun rank 0 takes the lock and every rank learns whether
        it could."""
        lock, refused = None, None
        if self.dist.main:
            try:
                lock = self._acquire()
            except RunError as e:
                refused = str(e)
        refused = self.dist.from_main(refused)
        if refused is not None:
            raise RunError(refused)
        try:
            yield
        finally:
            self.close_events()
            if lock is not None:
                lock.release()

    def _acquire(self) -> RunLock:
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

    def guarded(self, fn: Callable[[], Any], step: Callable[[], int]) -> Any:
        """Call `fn`; config, checkpoint and disk errors are recorded in status.json (at `step()`, the step reached)
        and raised as `RunError`; Ctrl-C is recorded as `interrupted`."""
        try:
            return fn()
        except RunError:  # e.g. the directory holds another run: its status is not ours to write
            raise
        except (ValueError, OSError) as e:
            message = _os_message(e, self.run_dir.path) if isinstance(e, OSError) else str(e)
            self._record_stop("failed", step(), message)
            raise RunError(message) from None
        except KeyboardInterrupt:  # Ctrl-C (or a study stopping its workers): resumable, not a failure
            self._record_stop("interrupted", step(),
                              "interrupted (Ctrl-C); run again to resume from the last checkpoint")
            raise
        except BaseException as e:
            self._record_stop("failed", step(), f"{type(e).__name__}: {e}")
            raise

    # -- start ----------------------------------------------------------------------------
    def open(self) -> RunResult | None:
        """The result of a run this directory already finished (completed or diverged); else None, the directory
        checked to hold this run (or nothing yet) and its config written. Under torchrun rank 0 looks, and every
        rank learns what it found."""
        done, problem = None, None
        if self.dist.main:
            try:
                done = self._finished()
                if done is None:
                    self._prepare()
            except (ValueError, OSError) as e:
                if not self.dist.active:
                    raise
                problem = _os_message(e, self.run_dir.path) if isinstance(e, OSError) else str(e)
        done, problem = self.dist.from_main((done, problem))
        if problem is not None:
            raise RunError(problem)
        return done

    def _finished(self) -> RunResult | None:
        rd = self.run_dir
        status = rd.read_status() if rd.exists() else None
        if status and status["status"] in ("completed", "diverged") and rd.read_config().hash() == self.cfg.hash():
            return RunResult(status["status"], status["step"], status.get("val_loss"), status.get("reason"),
                             status.get("outcome"))
        return None

    def _prepare(self) -> None:
        rd = self.run_dir
        if not rd.exists():
            rd.write_config(self.cfg)
            rd.write_json(CORPUS_FILE, Provenance.of(self.corpus, self.cfg.data).record())  # what its ids mean
            return
        if (rd.path / CORPUS_FILE).is_file():  # first: a changed corpus also changes the config's vocabulary size
            why = Provenance.from_record(rd.read_json(CORPUS_FILE)).differs_from(self.corpus)
            if why:
                raise RunError(f"{why}: resuming would train on other text, or a char vocabulary's ids shifted; "
                               "restore the text, or pass --fresh to start over on it")
        old = rd.read_config()
        if old.hash() != self.cfg.hash():
            raise RunConflictError(
                f"{rd.path} holds another run (config {old.hash()}, this one is {self.cfg.hash()}); "
                "choose another output directory, or pass --fresh to start over")

    def resume(self, checkpoint: Checkpoint | None, optimizer: torch.optim.Optimizer, data_rng: torch.Generator
               ) -> tuple[int, float]:
        """Continue from `checkpoint` (None: from the start): drop what was logged after it, restore the optimizer
        and the random generators, and make sure every rank resumes at the same step. (step, elapsed seconds)."""
        if checkpoint is not None and self.run_dir.meta_path.is_file():
            self.swap = self.run_dir.read_meta().get("swap")
        if checkpoint is not None and checkpoint.note():
            self.note(checkpoint.note())
        if self.dist.main:
            self._rewind(checkpoint.step if checkpoint else None)
        step, elapsed = 0, 0.0
        if checkpoint is not None:
            step, elapsed = self._restore(checkpoint.state, optimizer, data_rng)
            if self.dist.main:
                self.note(f"resuming from step {step} (its last checkpoint)")
            self.resumed_from = step
        if self.dist.active:  # every rank resumes from rank 0's step, or none goes on (else their collectives hang)
            apart = self.dist.from_main(step) != step
            if self.dist.sum(torch.tensor(float(apart), device=self.device)).item():
                raise RunError(f"the ranks resume at different steps (this one, rank {self.dist.rank}, at {step}): "
                               f"they see different checkpoints in {self.run_dir.path}; run torchrun where every "
                               "rank sees the same run directory")
        return step, elapsed

    def _rewind(self, step: int | None) -> None:
        """Drop what was logged after the checkpoint's `step` (None: everything)."""
        self.run_dir.truncate_metrics(-1 if step is None else step)
        if (self.run_dir.path / DiagnosticsStore.FILENAME).is_file():
            DiagnosticsStore(self.run_dir.path).truncate(-1 if step is None else step - 1)

    def _restore(self, state: dict[str, Any], optimizer: torch.optim.Optimizer, data_rng: torch.Generator
                 ) -> tuple[int, float]:
        optimizer.load_state_dict(state["optimizer"])
        shard_optimizer_state(optimizer, self.dist)
        # RNG states are CPU byte tensors, whatever map_location moved them to
        data_rng.set_state(state["data_rng"].cpu())
        torch.set_rng_state(state["torch_rng"].cpu())
        if self.device.type == "cuda" and state.get("cuda_rng") is not None:
            torch.cuda.set_rng_state(state["cuda_rng"].cpu(), self.device)
        return state["step"], state["elapsed"]

    def begin(self, model: torch.nn.Module) -> DiagnosticsStore | None:
        """run.json and status `running` written, live events opened (rank 0); the store the per-layer probe writes
        to (rank 0, when diagnostics.interval asks for one), else None."""
        if not self.dist.main:
            return None
        store = DiagnosticsStore(self.run_dir.path) if self.cfg.diagnostics.number("interval") is not None else None
        self.write_meta(model)
        self.run_dir.write_status("running", step=self.resumed_from or 0)
        if self.events_dir is not None:  # from what the run kept (rewound to its checkpoint), then live
            self.events = EventLog(self.events_dir, self.run_dir, self.cfg.to_dict())
            if store is not None:
                store.on_write = self.events.layers
        return store

    def write_meta(self, model: torch.nn.Module, **extra: Any) -> None:
        """run.json: what decides the run beyond its config, how its weights started, where it resumed, its notes."""
        corpus = self.corpus
        self.run_dir.write_meta({
            "config_hash": self.cfg.hash(),
            "environment": environment(self.device, self.dist),
            "corpus": {"name": corpus.name, "tokenizer": corpus.tokenizer.kind,
                       "vocab_size": corpus.tokenizer.vocab_size,
                       "train_tokens": len(corpus.train), "val_tokens": len(corpus.val),
                       "vocab_from": corpus.vocab_from, "dropped_chars": corpus.dropped},
            "objective": self.objective.record(),
            "init_from": self.cfg.train.init_from,
            **({"swap": self.swap} if self.swap else {}),
            "model": {"n_params": model.num_params(), "scheme": model.scheme.record(),
                      "final_norm": self.cfg.model.resolved_final_norm(), "init": model.init_record,
                      **self.calibration,  # nn.schemes.calibrate
                      # which stack each diagnostics layer index belongs to (encoder blocks come first)
                      "stacks": _stacks(model)},
            "resumed_from_step": self.resumed_from,
            "notes": self.notes,
            **extra,
        })

    # -- while it trains ------------------------------------------------------------------
    def log(self, row: dict[str, Any]) -> None:
        """One metrics row into metrics.jsonl and the live events (rank 0)."""
        if not self.dist.main:
            return
        self.run_dir.append_metrics(row)
        if self.events is not None:
            self.events.scalars(row)

    def save_checkpoint(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, data_rng: torch.Generator,
                        step: int, elapsed: float) -> None:
        """What `resume` needs to go on bit for bit: in one process's format whatever the engine (FSDP's shards
        gathered by every rank), written by rank 0."""
        started = time.perf_counter()
        model_state = full_state(model.state_dict(), self.dist)
        optimizer_state = full_state(optimizer.state_dict(), self.dist)
        if not self.dist.main:
            return
        self.run_dir.save_checkpoint({
            "model": model_state, "optimizer": optimizer_state,
            "data_rng": data_rng.get_state(), "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None,
            "step": step, "elapsed": elapsed, "config_hash": self.cfg.hash(),
        })
        self.checkpoint_s = time.perf_counter() - started

    def logged_val_loss(self, step: int) -> float | None:
        """The val loss metrics.jsonl holds for `step` (rank 0's, on every rank), else None."""
        rows = self.run_dir.metrics() if self.dist.main else []
        return self.dist.from_main(next((r["val_loss"] for r in reversed(rows)
                                         if r.get("step") == step and "val_loss" in r), None))

    def note(self, message: str) -> None:
        """Tell the user (and run.json's notes)."""
        self.notes.append(message)
        if self.on_note is not None:
            self.on_note(message)

    # -- how it ended ---------------------------------------------------------------------
    def diverged(self, d: Diverged) -> RunResult:
        self.close_events("diverged")
        if self.dist.main:
            self.run_dir.write_status("diverged", step=d.step, reason=d.reason, val_loss=None, nan_origin=d.origin)
        return RunResult("diverged", d.step, None, d.reason)

    def completed(self, step: int, val_loss: float, elapsed: float, outcome: str, reason: str | None,
                  unigram_ce: float) -> RunResult:
        """status `completed`, with its outcome (trained, or failed to train) and why; what follows (the end-of-run
        diagnostics) cannot undo it."""
        if self.dist.main:
            self.close_events(outcome if outcome == FAILED_TO_TRAIN else "completed", val_loss)
            self.run_dir.write_status("completed", step=step, val_loss=val_loss, elapsed_s=elapsed,
                                      outcome=outcome, reason=reason, unigram_ce=unigram_ce)
        self.result = RunResult("completed", step, val_loss, reason, outcome)
        return self.result

    def save_layer_skip(self, record: dict[str, Any]) -> None:
        if self.dist.main:
            self.run_dir.write_json("layer_skip.json", record)

    def mark_layer_skip(self, how: str) -> None:
        """status.json's `layer_skip`: complete, partial or skipped, and why."""
        status = self.run_dir.read_status() if self.dist.main else None
        if status is not None:
            info = {k: v for k, v in status.items() if k not in ("status", "updated", "phase")}
            self.run_dir.write_status(status["status"], **{**info, "layer_skip": how})

    def close_events(self, status: str | None = None, val_loss: float | None = None) -> None:
        if self.events is not None:
            self.events.close(status, val_loss)
            self.events = None

    def _record_stop(self, status: str, step: int, reason: str) -> None:
        """status.json says the run stopped (`failed`, or `interrupted` and resumable from its last checkpoint) at
        the step reached, and why (rank 0's); not for a run that completed before (its end-of-run diagnostics were
        cut short). Best effort: the disk may be what failed."""
        if not self.dist.main or self.result is not None:
            return
        try:
            if self.run_dir.path.is_dir():
                self.run_dir.write_status(status, step=step, reason=reason)
        except OSError:
            pass


def _stacks(model) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for layer in range(len(model.blocks)):
        out.setdefault(model.stack_of(layer), []).append(layer)
    return out


def _os_message(e: OSError, run_path) -> str:
    """`[Errno 28] No space left on device` → one line naming the file (or the run directory)."""
    where = e.filename or run_path
    return f"cannot write {where}: {e.strerror or e}" if e.strerror else f"{where}: {e}"
