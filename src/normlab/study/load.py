"""A study as the user asks for it, planned: what they asked is read and checked (`spec.read_study`), the power
plan is sized on the design seeds' record (`power.plan`, `design.design_record`), and the plan is built from both
(`plan.plan_study`), every run validated. Each step is one call to the module that owns it, in that order, so
nothing is asked of a module before it can answer.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from normlab.config import ConfigError
from normlab.study import power
from normlab.study.design import design_record
from normlab.study.plan import StudyPlan, plan_study
from normlab.study.runs import RunBuilder
from normlab.study.spec import StudySpec, read_study


def load_study(preset: str = "standard", study_file: str | Path | None = None, claims: list[str] | None = None,
               seeds: list[int] | None = None, overrides: list[str] | None = None,
               axes: dict[str, list[Any]] | None = None, robustness: bool = False,
               init_pass: bool | None = None, vary: list[str] | None = None) -> StudyPlan:
    """The plan of a preset, or of a user's study TOML (`spec.read_study` reads and checks what is asked).
    Everything is validated here, every run included, so a bad study fails before anything is written."""
    spec = read_study(preset, study_file, claims, seeds, overrides, axes, robustness, init_pass, vary)
    design = design_record(spec.preset.name)  # the design seeds' verdicts, read once: the power plan sizes on them
    plan = plan_study(spec, power.plan(spec, design), design)
    judged_along = {axis.key for p in plan.plans.values() for axis in p.axes}  # `varies_axis`, per claim
    for key in spec.axes:
        if key not in judged_along:
            raise ConfigError(f"study axis {key!r}: no claim of the study can be judged along it (claims "
                              f"{', '.join(spec.claims)}: each sets {key} in its own runs, or trains nothing); "
                              "give an axis a claim's runs leave to the base")
    plan.runs  # noqa: B018: every run built and validated, every corpus they read resolved
    return plan


def plan_of(spec: StudySpec, claim_seeds: dict[str, list[int]] | None = None,
            builder: RunBuilder | None = None) -> StudyPlan:
    """The plan of a spec already read (a preset changed in a test or a benchmark), sized as `load_study` sizes."""
    design = design_record(spec.preset.name)
    return plan_study(spec, power.plan(spec, design), design, claim_seeds, builder)
