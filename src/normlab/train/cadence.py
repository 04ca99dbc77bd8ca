"""The training cadence, written once: step, evaluate, log, checkpoint, and the tokens/s window, for a single run
(`Trainer`) and for a stack of runs trained as one (`group._Stack`). What differs between them is how a step is
taken, evaluated, logged and saved, which each supplies as `Steps`; when those happen is decided here alone."""
from __future__ import annotations

import time
from typing import Protocol

from normlab.config import TrainConfig


class Steps(Protocol):
    """What a trainer supplies to the cadence."""

    step: int  # optimizer steps completed (the stack's: every member's)

    def active(self) -> bool:
        """Is anything left to train (a stack whose members all diverged has nothing)?"""

    def evaluate(self) -> None:
        """Measure the val loss now (each member's own, in a stack)."""

    def take_step(self) -> None:
        """One optimizer update; afterwards `step` is one more (members that diverged have left a stack)."""

    def start_clock(self) -> None:
        """Training (re)starts now: elapsed time counts on from what the run directory held."""

    def tick_clock(self) -> None:
        """Bring each run's `elapsed` up to now."""

    def log(self, step: int, tokens_per_s: float | None, evaluated: bool) -> None:
        """Write the metrics row of `step` (step 0: the val loss of the untrained model alone)."""

    def checkpoint(self) -> None:
        """Save a checkpoint at the current step."""

    def stop_on_plateau(self, checkpointed: bool) -> None:
        """Finish, as failed to train, each run whose val loss just measured is still on the unigram plateau
        (`train.plateau_stop`); `checkpointed`: this step's checkpoint is already written."""


def run_cadence(tc: TrainConfig, tokens_per_step: int, steps: Steps) -> None:
    """Train to `tc.steps`: the untrained model's val loss at step 0, then per step: evaluate every
    `eval_interval` steps and at the end, log every `log_interval` (tokens/s over the training steps since the
    last row, evaluations excluded), checkpoint every `ckpt_interval` and at the end. From `plateau_stop` of the
    budget on, a run still on the unigram plateau at an evaluation is finished there, as failed to train."""
    if steps.step == 0:
        steps.evaluate()
        steps.log(0, None, True)
    steps.start_clock()
    window_start, window_steps = time.perf_counter(), 0
    while steps.active() and steps.step < tc.steps:
        steps.take_step()
        if not steps.active():
            break
        step, window_steps = steps.step, window_steps + 1
        last = step == tc.steps
        log, evaluate = step % tc.log_interval == 0 or last, step % tc.eval_interval == 0 or last
        speed = tokens_per_step * window_steps / (time.perf_counter() - window_start) if log else None
        if evaluate:
            steps.evaluate()
        steps.tick_clock()
        if log or evaluate:
            steps.log(step, speed, evaluate)
        checkpointed = step % tc.ckpt_interval == 0 or last
        if checkpointed:
            steps.checkpoint()
        if evaluate and not last and tc.number("plateau_stop") is not None and step >= tc.number("plateau_stop") * tc.steps:
            steps.stop_on_plateau(checkpointed)
        if log or evaluate:
            window_start, window_steps = time.perf_counter(), 0
