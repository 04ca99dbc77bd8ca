"""Many small runs trained as one: a group of same-shape runs stepped together as a `StackedGPT`.

Each member is an ordinary run: its own `Trainer` (run directory, lock, config, data order,
lr schedule, clipping, checkpoints, diagnostics, status), so a member's directory is the same
as if it had been trained alone, and a member can be resumed alone or in any group. Only the
step is shared: one batched forward and backward for all members, then one `StackedAdamW`
update with each member's own lr and weight decay, after each member's own gradient clip.

A member whose loss or gradient turns non-finite (or runaway) is recorded as diverged, exactly
as alone, and dropped from the stack; the others go on untouched (members never share an op's
row, so a NaN cannot cross; a test checks the others stay bit-identical to a group without it).
"""
from __future__ import annotations

import math
import time
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Callable

import torch

from normlab.config import RunConfig, config_hash
from normlab.data import corpus_of
from normlab.diagnostics.probe import NO_PROBE
from normlab.nn.stacked import StackedGPT
from normlab.train.cadence import run_cadence
from normlab.train.lifecycle import Diverged, RunError, RunResult
from normlab.train.loop import EVAL_SEED, Trainer, run_threads
from normlab.train.optim import StackedAdamW, clip_stacked_grads, learning_rate

# What members may differ in: everything else fixes a shape or the shared cadence of the loop.
MEMBER_KEYS = ("seed", "lr", "min_lr", "schedule", "warmup_steps", "decay_steps", "weight_decay", "grad_clip",
               "diverge_loss")


def group_key(cfg: RunConfig) -> str:
    """Runs with equal keys can be trained as one group (`normlab study` groups by it)."""
    shared = cfg.to_dict()
    shared["train"] = {k: v for k, v in shared["train"].items() if k not in MEMBER_KEYS}
    return config_hash(shared)  # a key, never a config: nothing to validate


def groupable(cfg: RunConfig) -> bool:
    """torch.compile compiles one model's graph, and StackedGPT stacks decoder-only GPTs of schemes whose
    parameters all live in Linear/Embedding/Norm leaves: others train alone."""
    return alone_because(cfg) is None


def alone_because(cfg: RunConfig) -> str | None:
    """Why a run cannot be a member of a stack (it trains alone), in words; None: it can."""
    if cfg.train.compile or cfg.train.activation_checkpointing:
        return "train.compile and train.activation_checkpointing work on one model's graph"
    if cfg.model.arch != "decoder":
        return f"a stack holds decoders, and this is an {cfg.model.arch}"
    if cfg.train.weight_decay_on != "matrices":
        return "a stack's optimizer decays matrices only (train.weight_decay_on = 'matrices')"
    if not cfg.model.scheme_type.facts.stackable:
        return (f"scheme {cfg.model.scheme!r} keeps parameters outside the Linear, Embedding and Norm leaves a "
                "stack holds")
    if not cfg.model.stackable:  # a setting of the run
        m = cfg.model
        held = [f"{k} = {v!r}" for k, v in (("positions", m.positions), ("head_transform", m.head_transform),
                                             ("head_bias", m.head_bias), ("logit_softcap", m.logit_softcap))
                if (k == "positions" and v not in ("learned", "rope")) or (k != "positions" and v)]
        return (f"its embedding or head is more than a stack carries ({', '.join(held)}; ModelConfig.stackable "
                "says what a stack holds)")
    return None


@dataclass
class _Slot:
    """A member being trained: its trainer, its index among the members, and this step's numbers."""

    index: int
    trainer: Trainer
    lr: float = math.nan
    loss: float = math.nan
    grad_norm: float = math.nan
    val_loss: float = math.nan
    clock_from: float = 0.0  # elapsed_s = trainer's elapsed at the window start + (now − clock_from)
    elapsed_from: float = 0.0


class GroupTrainer:
    """Train the runs `[(config, run directory), ...]` as one stack (or as few stacks as resuming needs)."""

    def __init__(self, runs: list[tuple[RunConfig, str]], on_log: Callable[[int, dict], None] | None = None,
                 events: list[str | None] | None = None):
        if not runs:
            raise ValueError("a group needs at least one run")
        keys = {group_key(cfg) for cfg, _ in runs}
        if len(keys) != 1:
            raise ValueError(f"runs of one group must share every setting but train.{', train.'.join(MEMBER_KEYS)}")
        why = alone_because(runs[0][0])
        if why:
            raise ValueError(f"these runs train alone, not as a group: {why}")
        first = runs[0][0]
        corpus = corpus_of(first)
        events = events or [None] * len(runs)  # each member's live TensorBoard directory, if any
        self.trainers = [Trainer(cfg, out, corpus=corpus, events=ev) for (cfg, out), ev in zip(runs, events)]
        for i, t in enumerate(self.trainers):
            t.on_log = (lambda row, i=i: on_log(i, row)) if on_log else None
        self.results: dict[int, RunResult] = {}

    def run(self) -> list[RunResult]:
        """Every member's result, in the order given; a member that fails is `failed`, the others go on."""
        with ExitStack() as locks:
            ready = []
            for i, t in enumerate(self.trainers):
                try:
                    locks.enter_context(t.lifecycle.claimed())  # a member that ended early still closes its events
                    done = t.guarded(t.start)
                except RunError as e:
                    self.results[i] = RunResult("failed", t.step, None, str(e))
                    continue
                if done is not None:
                    self.results[i] = done
                else:
                    ready.append(_Slot(i, t))
            by_step: dict[int, list[_Slot]] = {}
            for slot in ready:  # members resumed from different checkpoints train as separate stacks
                by_step.setdefault(slot.trainer.step, []).append(slot)
            for slots in by_step.values():
                with run_threads(slots[0].trainer.tc.number("threads")):  # shared: part of the group key
                    _Stack(slots, self.results).train()
        return [self.results[i] for i in range(len(self.trainers))]


class _Stack:
    """One stack of members at the same step, trained to the end."""

    def __init__(self, slots: list[_Slot], results: dict[int, RunResult]):
        self.slots, self.results = slots, results
        lead = slots[0].trainer
        self.tc, self.cfg, self.device, self.corpus = lead.tc, lead.cfg, lead.device, lead.corpus
        self.model = StackedGPT([s.trainer.model for s in slots])
        self.optimizer = StackedAdamW(self.model.pairs(), self.tc.beta1, self.tc.beta2)
        self.optimizer.load_members([s.trainer.optimizer for s in slots])
        for s in slots:
            s.trainer.lifecycle.write_meta(s.trainer.model, group={"size": len(slots), "trainer": "stacked"})

    @property
    def step(self) -> int:
        return self.slots[0].trainer.step

    # -- members come and go ----------------------------------------------------------------
    def _each(self, fn: Callable[[_Slot], Any]) -> None:
        """Run `fn` for every member; a member whose own I/O fails (e.g. a full disk) is failed and dropped."""
        failed = []
        for slot in self.slots:
            try:
                slot.trainer.guarded(lambda: fn(slot))
            except RunError as e:
                self.results[slot.index] = RunResult("failed", slot.trainer.step, None, str(e))
                failed.append(slot)
        self._drop(failed)

    def _drop(self, gone: list[_Slot]) -> None:
        if not gone:
            return
        keep = [k for k, s in enumerate(self.slots) if s not in gone]
        self.slots = [self.slots[k] for k in keep]
        if keep:
            self.model.keep(keep)
            self.optimizer.keep(keep)

    def _diverge(self, slot: _Slot, raise_diverged: Callable[[], None]) -> None:
        """Record a member as diverged: its trainer logs the step, finds the NaN's origin, writes the status."""
        try:
            slot.trainer.guarded(raise_diverged)
        except Diverged as d:
            self.results[slot.index] = slot.trainer.lifecycle.diverged(d)
        except RunError as e:
            self.results[slot.index] = RunResult("failed", slot.trainer.step, None, str(e))

    # -- the loop -------------------------------------------------------------------------
    def train(self) -> None:
        """Train every member to the end on the one cadence (train/cadence.py), as one stacked step."""
        run_cadence(self.tc, self.tc.batch_size * self.cfg.model.block_size, self)
        self._each(lambda s: self.results.__setitem__(s.index, s.trainer.finish(s.val_loss)))

    # -- the cadence's `Steps` ------------------------------------------------------------
    def active(self) -> bool:
        return bool(self.slots)  # members that diverged or failed have left

    def evaluate(self) -> None:
        self._evaluate()

    def take_step(self) -> None:
        self._train_step()
        for s in self.slots:
            s.trainer.step += 1

    def start_clock(self) -> None:
        self._start_clocks()

    def tick_clock(self) -> None:
        self._tick_clocks()

    def log(self, step: int, tokens_per_s: float | None, evaluated: bool) -> None:
        if step == 0:
            self._log(lambda s: {"step": 0, "val_loss": s.val_loss})
            return
        self._log(lambda s: {"step": step, "lr": s.lr, "train_loss": s.loss, "grad_norm": s.grad_norm,
                             **({"tokens_per_s": tokens_per_s} if tokens_per_s is not None else {}),
                             **({"val_loss": s.val_loss} if evaluated else {})})

    def checkpoint(self) -> None:
        self._each(self._checkpoint)

    def stop_on_plateau(self, checkpointed: bool) -> None:
        """Members still on the plateau finish here, as a single run would (`Trainer.stop_on_plateau`)."""
        stalled = []

        def check(s: _Slot) -> None:
            if s.trainer.stop_on_plateau(s.val_loss, checkpointed=True):  # the stack saves its members itself
                if not checkpointed:
                    self._checkpoint(s)
                self.results[s.index] = s.trainer.finish(s.val_loss)
                stalled.append(s)
        self._each(check)
        self._drop(stalled)

    def _start_clocks(self) -> None:
        now = time.perf_counter()
        for s in self.slots:
            s.clock_from, s.elapsed_from = now, s.trainer.elapsed

    def _tick_clocks(self) -> None:
        now = time.perf_counter()
        for s in self.slots:
            s.trainer.elapsed = s.elapsed_from + now - s.clock_from

    def _log(self, row: Callable[[_Slot], dict]) -> None:
        self._each(lambda s: s.trainer.log({**row(s), "elapsed_s": s.trainer.elapsed}))

    def _checkpoint(self, slot: _Slot) -> None:
        for group in slot.trainer.optimizer.param_groups:  # as a single run's optimizer would hold it
            group["lr"] = slot.lr
        self.optimizer.store_member(self.slots.index(slot), slot.trainer.optimizer)
        slot.trainer.checkpoint()

    # -- one step -------------------------------------------------------------------------
    def _train_step(self) -> None:
        tc, model = self.tc, self.model
        if not model.training:
            model.train()
        for s in self.slots:
            s.lr = learning_rate(self.step, s.trainer.tc)
        batches = [self.corpus.batch("train", tc.batch_size, self.cfg.model.block_size, s.trainer.data_rng)
                   for s in self.slots]
        x = torch.stack([b[0] for b in batches]).to(self.device)  # (K, B, T)
        y = torch.stack([b[1] for b in batches]).to(self.device)
        sessions = self._measure_members(x, y)
        with self.slots[0].trainer.autocast():
            _, losses = model(x, y)  # (K,)
        for s, value in zip(self.slots, losses.tolist()):
            s.loss = value
        gone = self._diverged_losses(x, y)
        keep = [k for k, s in enumerate(self.slots) if s not in gone]
        if keep:
            losses[keep].sum().backward()  # members' graphs are disjoint: each gets its own gradient
        self._drop(gone)
        if not self.slots:
            return
        max_norms = [s.trainer.tc.number("grad_clip") or math.inf for s in self.slots]  # inf: `off`
        norms = clip_stacked_grads([stack for stack, _ in model.pairs()], max_norms)
        for s, n in zip(self.slots, norms.tolist()):
            s.grad_norm = n
        self._drop(self._diverged_grads(x, y, keep))
        if not self.slots:
            return
        self.optimizer.step([s.lr for s in self.slots], [s.trainer.tc.weight_decay for s in self.slots])
        model.zero_grad(set_to_none=True)
        for s in self.slots:
            sessions[s.index].after_update()

    def _measure_members(self, x: torch.Tensor, y: torch.Tensor) -> dict[int, Any]:
        """On a measured step, each member's probe sees its own eager forward and backward (alone, as a
        single run's probe would); the stack's step then does the update the probe measures."""
        sessions = {}
        for k, s in enumerate(self.slots):
            t = s.trainer
            session = sessions[s.index] = t.probe.session(t.step) if t.probe else NO_PROBE
            if session is NO_PROBE:
                continue
            with session, t.autocast():
                _, loss = t.model(x[k], y[k])
            loss.backward()
            session.after_backward()
            session.before_update()
            t.model.zero_grad(set_to_none=True)
        return sessions

    def _diverged_losses(self, x: torch.Tensor, y: torch.Tensor) -> list[_Slot]:
        gone = []
        for k, s in enumerate(self.slots):
            limit = s.trainer.tc.diverge_loss
            if math.isfinite(s.loss) and s.loss <= limit:
                continue
            what = "non-finite" if not math.isfinite(s.loss) else f"above diverge_loss {limit:g}"
            self._diverge(s, lambda s=s, k=k, what=what: s.trainer._diverged(
                f"train loss {s.loss:.4g} at step {s.trainer.step + 1} ({what})", {"lr": s.lr, "train_loss": s.loss},
                x[k], y[k], trace=not math.isfinite(s.loss)))
            gone.append(s)
        return gone

    def _diverged_grads(self, x: torch.Tensor, y: torch.Tensor, rows: list[int]) -> list[_Slot]:
        gone = []
        for k, s in zip(rows, self.slots):  # rows: each remaining member's row in this step's batch
            if math.isfinite(s.grad_norm):
                continue
            self._diverge(s, lambda s=s, k=k: s.trainer._diverged(
                f"non-finite gradient norm at step {s.trainer.step + 1}",
                {"lr": s.lr, "train_loss": s.loss, "grad_norm": s.grad_norm}, x[k], y[k], trace=True))
            gone.append(s)
        return gone

    @torch.no_grad()
    def _evaluate(self) -> None:
        """Every member's mean loss over the same fixed val batches as `Trainer.evaluate`."""
        tc = self.tc
        self.model.eval()
        rng = torch.Generator().manual_seed(EVAL_SEED)
        totals = [[] for _ in self.slots]
        for _ in range(tc.eval_batches):
            x, y = self.corpus.batch("val", tc.batch_size, self.cfg.model.block_size, rng)
            K = len(self.slots)
            with self.slots[0].trainer.autocast():
                _, losses = self.model(x.expand(K, *x.shape).to(self.device), y.expand(K, *y.shape).to(self.device))
            for acc, value in zip(totals, losses.tolist()):
                acc.append(value)
        self.model.train()
        for s, acc in zip(self.slots, totals):
            s.val_loss = sum(acc) / len(acc)
