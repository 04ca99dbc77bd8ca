"""The training loop: nanoGPT's recipe, with checkpoints that resume the same curve bit for bit.

A run knows nothing of the study around it. It reads a `RunConfig`, trains, and reports each logged step to an
optional callback (the CLI's progress bar); its directory (lock, config, status, checkpoints, events, resume) is
kept by `RunLifecycle` (train/lifecycle.py), and a fine-tune's first weights come from train/init_from.py.
"""
from __future__ import annotations

import contextlib
import math
import time
from pathlib import Path
from typing import Any, Callable

import torch

from normlab.config import RunConfig
from normlab.data import Corpus, corpus_of
from normlab.data.vocab import Vocabulary, with_vocab
from normlab.device import resolve_device
from normlab.diagnostics import LayerProbe, find_nonfinite_origin
from normlab.diagnostics.probe import NO_PROBE
from normlab.nn.kernels import get_norm_impl
from normlab.nn.schemes import calibrate
from normlab.rundir import Checkpoint, RunDir, load_model
from normlab.train.cadence import run_cadence
from normlab.train.distributed import SINGLE, Dist, check_settings, global_loss, wrap
from normlab.train.end_of_run import LayerSkipRun, PhaseCallback, Phases, budget_s, skip_line, skip_note
from normlab.train.init_from import init_from
from normlab.train.lifecycle import FAILED_TO_TRAIN, TRAINED, Diverged, RunLifecycle, RunResult
from normlab.train.optim import build_optimizer, learning_rate

EVAL_SEED = 0x5EED_0E7A  # val batches are the same at every evaluation and in every run

StepCallback = Callable[[dict[str, Any]], None]
NoteCallback = Callable[[str], None]


@contextlib.contextmanager
def run_threads(threads: int | None):
    """torch's intra-op thread count for the body (None: leave it as it is), restored after."""
    before = torch.get_num_threads()
    if threads is not None:
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
        self.trainer.log({**row, "elapsed_s": self.trainer.elapsed})

    def checkpoint(self) -> None:
        if self.step < self.trainer.tc.steps:
            self.trainer.checkpoint()
            return
        with self.trainer.phases.phase("checkpoint", 1, "file",
                                       expected_s=self.trainer.lifecycle.checkpoint_s) as phase:
            self.trainer.checkpoint()
            phase.advance()

    def stop_on_plateau(self, checkpointed: bool) -> None:
        self.trainer.stop_on_plateau(self.val_loss, checkpointed)


def judge_training(val_loss: float | None, plateau: float, margin: float | None,
                   what: str = "corpus's unigram cross-entropy") -> tuple[str, str | None]:
    """A completed run trained, or failed to train: it ended within `margin` nats of the unigram cross-entropy
    (a model that learned token frequencies and nothing else), or with no finite val loss. `margin` None: not
    judged (`train.untrained_margin = "off"`)."""
    if margin is None:
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
        check_settings(cfg, dist, fresh)
        self.dist = dist  # one of torchrun's processes (distributed.py), or the only one
        self.on_log = on_log
        self.device = dist.device or resolve_device(cfg.train.device)
        self.corpus: Corpus = corpus or corpus_of(cfg)
        vocab = Vocabulary.of(self.corpus.tokenizer)
        self.cfg = with_vocab(cfg, vocab)
        self.tc = self.cfg.train
        self.objective = vocab.objective(self.cfg.model.arch)
        self.lifecycle = RunLifecycle(out, self.cfg, self.corpus, self.objective, self.device, dist=dist,
                                      fresh=fresh, events=events, on_note=on_note)
        self.phases = Phases(self.lifecycle.run_dir, on_phase, writes=dist.main)  # the work after the last step
        self.step, self.elapsed = 0, 0.0
        self.stopped_at: int | None = None  # the step `train.plateau_stop` finished it at, still on the plateau
        self.eval_batch_s: float | None = None  # a val batch's time in the last evaluation (the ablation's plan)

    @property
    def result(self) -> RunResult | None:
        """Set once the run is completed (before its end-of-run diagnostics, which cannot undo that)."""
        return self.lifecycle.result

    # -- the run: claim the directory, start, loop, finish ----------------------------------
    def run(self) -> RunResult:
        """Train (or resume) under the directory's lock; a reason the user can act on raises `RunError`."""
        with self.lifecycle.claimed(), run_threads(self.tc.number("threads")):
            return self.guarded(self._run)

    def guarded(self, fn: Callable[[], Any]) -> Any:
        """Call `fn`; a failure or Ctrl-C is recorded in status.json at the step reached (`RunLifecycle.guarded`)."""
        return self.lifecycle.guarded(fn, lambda: self.step)

    def _run(self) -> RunResult:
        done = self.start()
        if done is not None:
            return done
        try:
            val_loss = self._loop()
        except Diverged as d:
            return self.lifecycle.diverged(d)
        return self.finish(val_loss)

    def start(self) -> RunResult | None:
        """Ready the model, optimizer and data position (resuming a checkpoint); a finished run's result."""
        get_norm_impl()  # a bad NORMLAB_NORM_IMPL fails the run now, not at the first norm's forward
        done = self.lifecycle.open()
        if done is not None:
            return done
        checkpoint = self._build()
        self.step, self.elapsed = self.lifecycle.resume(checkpoint, self.optimizer, self.data_rng)
        store = self.lifecycle.begin(self.model)
        # rank 0 alone records diagnostics, of its own slice of the batch (the gradients are the global ones)
        self.probe = LayerProbe(self.model, store, self.cfg.diagnostics.number("interval")) if store else None
        return None

    def _build(self) -> Checkpoint | None:
        """The model (with the checkpoint's weights, if any), its compiled form and optimizer, the data order;
        the checkpoint to resume from."""
        loaded = load_model(self.lifecycle.run_dir, self.device, cfg=self.cfg, require_checkpoint=False)
        self.model = loaded.model
        if loaded.checkpoint is None and self.tc.init_from:  # a fine-tune's first start: the source's weights
            self.lifecycle.swap = init_from(self.model, self.cfg, self.device, self.lifecycle.note)
        elif loaded.checkpoint is None:  # the schemes' set-up pass (`calibrate`), on one batch of its own generator
            self.lifecycle.calibration = calibrate(self.model, self._profiling_forward)
        self.eager = wrap(self.model, self.dist)  # what a step calls: the model, or its DDP / FSDP form
        self.forward = torch.compile(self.eager) if self.tc.compile else self.eager
        self.optimizer = build_optimizer(self.model, self.tc, self.device.type)
        self.data_rng = torch.Generator().manual_seed(self.tc.seed)
        return loaded.checkpoint

    def _profiling_forward(self) -> None:
        """One forward on a batch drawn from its own generator (the run's data order is left untouched)."""
        rng = torch.Generator().manual_seed(self.tc.seed)
        x, y = self.objective.batch(self.corpus, "train", self.tc.batch_size, self.cfg.model.block_size, rng)
        self.model(x.to(self.device), y.to(self.device))

    def _loop(self) -> float:
        """Train to the end on the one cadence (train/cadence.py); the last val loss measured (nan if none)."""
        steps = _RunSteps(self)
        stopped = self._stopped_before()
        if stopped is not None:
            return stopped
        run_cadence(self.tc, self.tc.batch_size * self.cfg.model.block_size, steps)
        return steps.val_loss

    def finish(self, val_loss: float) -> RunResult:
        """`completed`, with its outcome (trained, or failed to train), then the layer-skip ablation: a run cut
        short in its ablation stays completed (train/end_of_run.py)."""
        plateau = self.objective.plateau(self.corpus)
        outcome, reason = judge_training(val_loss, plateau, self.tc.number("untrained_margin"),
                                         self.objective.plateau_what)
        if self.stopped_at is not None:
            reason = (f"stopped at step {self.stopped_at} of {self.tc.steps} (train.plateau_stop = "
                      f"{self.tc.plateau_stop:g}): {reason}")
        result = self.lifecycle.completed(self.step, val_loss, self.elapsed, outcome, reason, plateau)
        if self.cfg.diagnostics.layer_skip:  # every rank: FSDP gathers weights
            self.layer_skip(budget_s(self.cfg.diagnostics, self.elapsed))
        return result

    # -- one step ---------------------------------------------------------------------------
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
        interval = self.cfg.diagnostics.number("interval")
        measured = interval is not None and self.step % interval == 0  # alike on every rank; rank 0 alone has the probe
        # a measured step runs without recomputation: the probe's hooks must see each block once
        model.checkpoint_blocks = tc.activation_checkpointing and not measured
        with probe, self.autocast():
            # measured steps run eagerly (compiled code would not see the probe's hooks); under
            # compile = true their numerics may differ from the compiled steps' in the last bits
            _, loss = (self.eager if measured else self.forward)(x, y)
        loss, loss_value = global_loss(loss, y, self.dist)
        if not math.isfinite(loss_value) or loss_value > tc.diverge_loss:
            what = "non-finite" if not math.isfinite(loss_value) else f"above diverge_loss {tc.diverge_loss:g}"
            self._diverged(f"train loss {loss_value:.4g} at step {self.step + 1} ({what})",
                           {"lr": lr, "train_loss": loss_value}, x, y, trace=not math.isfinite(loss_value))
        loss.backward()
        probe.after_backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), tc.number("grad_clip") or math.inf).item()
        if not math.isfinite(grad_norm):
            self._diverged(f"non-finite gradient norm at step {self.step + 1}",
                           {"lr": lr, "train_loss": loss_value, "grad_norm": grad_norm}, x, y, trace=True)
        probe.before_update()
        self.optimizer.step()
        model.project_weights()  # a scheme on the sphere: the weights back on it; nothing for every other scheme
        self.optimizer.zero_grad(set_to_none=True)
        probe.after_update()
        return loss_value, grad_norm

    def _diverged(self, reason: str, row: dict[str, Any], x: torch.Tensor, y: torch.Tensor, trace: bool):
        """Record the diverging step, find the module where a NaN/inf started, and stop the run."""
        step = self.step + 1
        self.log({"step": step, **row, "elapsed_s": self.elapsed})
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

    def log(self, row: dict[str, Any]) -> None:
        """One metrics row: into the run directory, and to the progress display (rank 0)."""
        self.lifecycle.log(row)
        if self.on_log is not None and self.dist.main:
            self.on_log(row)

    def checkpoint(self) -> None:
        self.lifecycle.save_checkpoint(self.model, self.optimizer, self.data_rng, self.step, self.elapsed)

    # -- the plateau stop -------------------------------------------------------------------
    def stop_on_plateau(self, val_loss: float, checkpointed: bool) -> bool:
        """`train.plateau_stop`: is the run still on the unigram plateau at this evaluation? Then it stops here
        (checkpointed, so its directory holds the state it was judged in) and `finish` records it as failed to
        train. Under torchrun rank 0 decides for every rank."""
        plateau = self.objective.plateau(self.corpus)
        stuck = judge_training(val_loss, plateau, self.tc.number("untrained_margin"))[0] != TRAINED
        if not self.dist.from_main(stuck):  # rank 0's call on every rank: a last-bit difference must not split them
            return False
        self.stopped_at = self.step
        if not checkpointed:
            self.checkpoint()
        return True

    def _stopped_before(self) -> float | None:
        """A run killed after `train.plateau_stop` stopped it (its checkpoint written) but before its status said
        so resumes at that very evaluation: it stops there again, as the uninterrupted run did; its val loss."""
        tc = self.tc
        start = tc.number("plateau_stop")
        if not (start is not None and 0 < self.step < tc.steps and self.step % tc.eval_interval == 0
                and self.step >= start * tc.steps):
            return None
        val = self.lifecycle.logged_val_loss(self.step)
        if val is None or not self.stop_on_plateau(val, checkpointed=True):
            return None
        return val

    # -- after the last step ----------------------------------------------------------------
    def layer_skip(self, budget: float | None) -> dict[str, Any]:
        """Val loss with each block skipped (ΔL per layer, effective depth) into DIR/layer_skip.json, within
        `budget` seconds (None: all diagnostics.layer_skip_most asks for, over every val batch); status.json's
        `layer_skip` says how it went. The record; Ctrl-C keeps what was measured and re-raises."""
        ablation = LayerSkipRun(self.model.blocks, self._ablation_loss, self.tc.eval_batches,
                                self.cfg.diagnostics.number("layer_skip_most"), budget, self.dist.from_main,
                                batch_s=None if self.tc.compile else self.eval_batch_s)
        try:
            record = ablation.run(self.phases, self.lifecycle.save_layer_skip)
        except KeyboardInterrupt:
            self.lifecycle.mark_layer_skip(skip_line(ablation.saved) if ablation.saved
                                           else "skipped: interrupted before a layer was measured")
            raise
        self.lifecycle.mark_layer_skip(skip_line(record))
        note = skip_note(record, str(self.lifecycle.run_dir.path))
        if note and self.dist.main:
            self.lifecycle.note(note)
        return record

    def _ablation_loss(self, batches: int, on_batch: Callable[[], None]) -> float:
        return self.evaluate(eager=True, batches=batches, on_batch=on_batch)  # compiled code ignores new hooks


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
    with trainer.lifecycle.claimed():
        trainer.device = resolve_device(device) if device else trainer.device
        trainer.model = load_model(rd, trainer.device, cfg=trainer.cfg).model
        with run_threads(trainer.tc.number("threads")):
            return trainer.layer_skip(None)
