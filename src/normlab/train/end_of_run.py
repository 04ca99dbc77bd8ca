"""After a run's last step: each phase shown as it goes, and the layer-skip ablation fitted into a share of the
run's own training time, cut short without losing the trained run.

    last step ─► final evaluation ─► checkpoint ─► status `completed` ─► layer-skip ablation (budgeted)
                 └──────────── each a `Phase`: a progress bar (CLI), status.json's `phase` (a study's lines)

The run is `completed` before the ablation starts: Ctrl-C or SIGTERM there leaves it completed, with its
checkpoint and metrics, and layer_skip.json `partial` (or no layer_skip.json, when nothing was measured yet);
`normlab diagnose RUN --layer-skip` measures it later. Why the budget: a 10-step 1,000-layer DeepNorm run trained
in 2 minutes, then spent 26 in its ablation (100 sampled blocks, each a full evaluation), silent
(benchmarks/end_of_run_phases.py times each phase).
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from torch import nn

from normlab.config import DiagnosticsConfig
from normlab.diagnostics.skip import SkipPlan, plan_layer_skip, sampled_layers, skipped, spread, summarize
from normlab.rundir import RunDir

# below this, a budget is not worth cutting the ablation for: a run of seconds (a smoke run, a test) keeps it whole
BUDGET_FLOOR_S = 5.0
# the share of the budget a plan fills: the one val batch it is timed on may run faster than the rest (a busy
# machine), and a plan filled to the brim would be cut at its last layer
PLAN_SHARE = 0.8
STATUS_EVERY_S = 1.0  # status.json's `phase` is rewritten at most this often (a study polls it)
AGAIN = "`normlab diagnose {run} --layer-skip` measures it whole"


@dataclass
class Phase:
    """One piece of work after the last training step, as a progress display shows it."""

    name: str  # "final evaluation", "checkpoint", "layer-skip ablation"
    total: int
    unit: str
    note: str = ""
    expected_s: float | None = None  # known before any unit is done (the last checkpoint's time), else None
    done: int = 0
    ended: bool = False
    started: float = field(default_factory=time.perf_counter)
    show: Callable[["Phase"], None] = lambda phase: None

    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self.started

    def left_s(self) -> float | None:
        """Seconds left at the pace so far (or from `expected_s` before the first unit)."""
        if self.done:
            return self.elapsed_s / self.done * max(self.total - self.done, 0)
        return None if self.expected_s is None else max(self.expected_s - self.elapsed_s, 0.0)

    def advance(self, units: int = 1) -> None:
        self.done += units
        self.show(self)

    def progress_text(self) -> str:
        """`layer-skip ablation 7/19 val batches, ~12 s left`."""
        left = self.left_s()
        return f"{self.name} {self.done}/{self.total} {self.unit}" + ("" if left is None else f", ~{left:.0f} s left")


PhaseCallback = Callable[[Phase], None]


class Phases:
    """Shows each phase to a callback (the CLI's bars) and, on the writing rank, in DIR/status.json's `phase`,
    which a study's progress lines read (study/state.py's `active_runs`)."""

    def __init__(self, run_dir: RunDir, on_phase: PhaseCallback | None, writes: bool):
        self.run_dir, self.on_phase, self.writes = run_dir, on_phase, writes
        self.written = 0.0

    @contextlib.contextmanager
    def phase(self, name: str, total: int, unit: str, note: str = "", expected_s: float | None = None
              ) -> Iterator[Phase]:
        current = Phase(name, total, unit, note, expected_s, show=self.show)
        self.show(current)
        try:
            yield current
        finally:
            current.ended = True
            self.show(current)

    def show(self, phase: Phase) -> None:
        if self.on_phase is not None:
            self.on_phase(phase)
        now = time.perf_counter()
        if self.writes and (phase.ended or phase.done == 0 or now - self.written >= STATUS_EVERY_S):
            self.written = now
            self._write(None if phase.ended else phase.progress_text())

    def _write(self, text: str | None) -> None:
        status = self.run_dir.read_status()
        if status is None:
            return
        info = {k: v for k, v in status.items() if k not in ("status", "updated", "phase")}
        self.run_dir.write_status(status["status"], **info, **({"phase": text} if text else {}))


def budget_s(dc: DiagnosticsConfig, training_s: float) -> float | None:
    """Seconds the end-of-run diagnostics may take (`diagnostics.end_of_run_budget`); None: no budget binds them."""
    if not dc.layer_skip_budgeted:
        return None
    if dc.end_of_run_budget == 0:
        return 0.0
    return max(dc.end_of_run_budget * training_s, BUDGET_FLOOR_S)


Evaluate = Callable[[int, Callable[[], None]], float]  # (val batches, called after each) → mean val loss


@dataclass
class LayerSkipRun:
    """One layer-skip ablation on a trained model, measured a layer at a time so that one cut short still says
    what it measured. `agree` hands rank 0's value to every rank under torchrun (plans and stops must match)."""

    blocks: Sequence[nn.Module]
    evaluate: Evaluate
    eval_batches: int
    most: int | None
    budget: float | None  # seconds; None: everything `most` asks for, over every val batch
    agree: Callable[[Any], Any] = lambda value: value
    batch_s: float | None = None  # one val batch's time, when known (the final evaluation's); else timed here
    saved: dict[str, Any] | None = None  # the record last saved: what an interruption leaves behind

    def run(self, phases: Phases, save: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Plan, measure, and `save` the record as it grows (status `partial`, then `complete`); a record without
        `delta_loss`, never saved, when nothing could be measured (`skipped`). Ctrl-C saves what was measured and
        re-raises."""
        if self.budget == 0:
            return {"status": "skipped", "plan": "diagnostics.end_of_run_budget = 0", "seconds": 0.0}
        timed = self.budget is not None and self.batch_s is None
        with phases.phase("layer-skip ablation", 1, "val batches", "timing one val batch" if timed else "") as phase:
            started = time.perf_counter()
            first = self.evaluate(1, phase.advance) if timed else None
            plan = self.agree(self._plan(len(self.blocks), self.batch_s or time.perf_counter() - started,
                                         time.perf_counter() - started))
            if not plan.layers:
                return {"status": "skipped", "plan": plan.why, "budget_s": self.budget,
                        "seconds": time.perf_counter() - started}
            reuse = first is not None and plan.batches == 1  # the timed batch is the full model's one batch
            phase.total = phase.done + (0 if reuse else plan.batches) + len(plan.layers) * plan.batches
            phase.note = plan.why
            record = Record(len(self.blocks), plan, self.budget, started)
            try:
                record.base = first if reuse else self.evaluate(plan.batches, phase.advance)
                self._measure(plan, record, phase, lambda: self._save(record, save))
            except KeyboardInterrupt:
                record.stopped = "interrupted"
                if record.measured:
                    self._save(record, save)
                raise
        return self._save(record, save)

    def _save(self, record: "Record", save: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        self.saved = record.to_dict()
        save(self.saved)
        return self.saved

    def _plan(self, n: int, batch_s: float, spent_s: float) -> SkipPlan:
        if self.budget is None:
            layers = sampled_layers(n, self.most)
            return SkipPlan(spread(layers), self.eval_batches, f"whole (no budget): {len(layers)} of {n} layers "
                                                                f"over {self.eval_batches} val batches", whole=True)
        return plan_layer_skip(n, self.most, self.eval_batches, batch_s, PLAN_SHARE * self.budget - spent_s)

    def _measure(self, plan: SkipPlan, record: "Record", phase: Phase, save: Callable[[], Any]) -> None:
        saved = time.perf_counter()
        for index in plan.layers:
            evaluation = time.perf_counter()
            with skipped(self.blocks[index]):
                record.deltas[index] = self.evaluate(plan.batches, phase.advance) - record.base
            record.measured += 1
            now = time.perf_counter()
            # measured time may outrun the plan's estimate (a busy machine): stop before the next one overdraws
            over = self.budget is not None and now - record.started + (now - evaluation) > self.budget
            if self.agree(over) and record.measured < len(plan.layers):
                record.stopped = "budget"
                return
            if now - saved >= STATUS_EVERY_S:
                saved = now
                save()


@dataclass
class Record:
    """What layer_skip.json holds: the effective-depth summary of the layers measured, with the plan."""

    n_layer: int
    plan: SkipPlan
    budget: float | None
    started: float
    base: float | None = None
    measured: int = 0
    stopped: str | None = None  # None: not (yet) stopped early; "interrupted"; "budget"
    deltas: list[float | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.deltas = [None] * self.n_layer

    def to_dict(self) -> dict[str, Any]:
        complete = self.measured == len(self.plan.layers)
        why = {"interrupted": f"interrupted after {self.measured} of {len(self.plan.layers)} layers",
               "budget": f"out of budget after {self.measured} of {len(self.plan.layers)} layers"}
        return {**summarize(self.base, self.deltas), "status": "complete" if complete else "partial",
                **({"stopped": why[self.stopped]} if self.stopped and not complete else {}),
                "sampled_layers": sorted(self.plan.layers), "eval_batches": self.plan.batches, "plan": self.plan.why, "whole": self.plan.whole,
                "budget_s": self.budget, "seconds": time.perf_counter() - self.started}


def skip_line(record: dict[str, Any]) -> str:
    """status.json's `layer_skip`: `complete`, or complete, partial or skipped with why."""
    why = record.get("stopped") or ("" if record.get("whole") else record["plan"])
    return record["status"] + (f": {why}" if why else "")


def skip_note(record: dict[str, Any], run: str) -> str | None:
    """One line for the user when the ablation was not whole (cut to its budget, interrupted, left out), else
    None."""
    if record.get("whole") and record["status"] == "complete":
        return None
    budget = "" if record.get("budget_s") is None else f" (its budget: {record['budget_s']:.0f} s)"
    return f"layer-skip ablation {skip_line(record)}{budget}; {AGAIN.format(run=run)}"
