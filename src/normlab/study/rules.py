"""The rules a verdict is judged by, as a report states them (`thresholds`), and their fingerprint: the claims, the
presets, the statistics and decisions, the family-wise control, the power plan, what "trained" means, how a verdict
is judged at each level, and what an outcome is.

Seeds below `presets.HELD_OUT` (every earlier held-out range among them) are for designing rules; presets run on
held-out seeds
(`presets.HELD_OUT`). A held-out verdict is only held out if its rules were frozen before it ran, so verdicts.json
records this fingerprint, and tests/test_results.py fails when a committed held-out result's fingerprint is not
the code's: a rule change moves the held-out range to fresh seeds, and CHANGELOG.md says so.

The fingerprint is a hash of each rule module's syntax tree without its docstrings (`ast.dump` drops comments),
and of the presets as data: a reworded comment or docstring leaves it as it is, a changed threshold, grid, test
or preset moves it.
"""
from __future__ import annotations

import ast
import functools
import hashlib
from importlib import resources
from typing import Any

from normlab.study.claims import Verdict, statistics

# the modules whose code decides a verdict, as package paths under normlab (a folder's every module: `folder/*.py`):
# - how a verdict is decided: the claims and their statistics and decisions, the family-wise control, the power
#   plan, how a verdict is judged at each level (judge.py: where it holds, `depends on`), what an outcome is, and
#   whether it replicates on the design seeds (design.py);
# - what a verdict sees: the study's looks, seeds, rounds and passes (spec.py, plan.py, runs.py, rounds.py's
#   `next_runs`, state.py's follow-ups), what a run's record carries (records.py) and which runs are censored (validation.py), what
#   "trained" means and the corpus estimates of its line (trained.py, data/corpus.py), the init recipes the claims
#   name (nn/init.py), the per-layer measurements the records hold (diagnostics/probe.py, stats.py, streams.py,
#   skip.py, gradients.py) and the timing and memory harness of the measured claims (bench/norms.py, steps.py,
#   timing.py, reference_gpt.py), and C9's and C16's exact checks (study/measure.py).
# The presets enter as data (`presets_data`), not as presets.py's code. Every other module is listed in
# `VERDICT_NEUTRAL` with why its code cannot change a verdict; tests/study/test_rules.py holds each module of the
# package to exactly one of the two
RULE_MODULES = ("study/claims/*.py", "study/family.py", "study/power.py", "study/trained.py", "study/judge.py",
                "report/outcome.py", "study/design.py", "study/spec.py", "study/runner.py", "study/state.py",
                "study/records.py", "study/validation.py", "data/corpus.py", "nn/init.py", "diagnostics/probe.py",
                "diagnostics/stats.py", "diagnostics/streams.py", "diagnostics/skip.py", "diagnostics/gradients.py",
                "bench/norms.py", "bench/steps.py", "bench/timing.py", "bench/reference_gpt.py", "study/measure.py",
                "study/plan.py", "study/runs.py", "study/scope.py", "study/load.py",
                "study/measuring.py", "study/rounds.py")

# every module outside the fingerprint, with why its code cannot change a verdict (a folder: `folder/*.py`, its
# modules not named in RULE_MODULES)
_MODEL = ("the model a run trains: a change there changes the runs themselves (their curves, recorded per run with "
          "their numerics and pinned by tests/nn and tests/train), never the rules they are judged by")
_TRAINER = ("the trainer: a change changes the runs (their curves and their status, which study/trained.py "
            "judges again by the study's own line), pinned by tests/train's determinism and resume tests")
VERDICT_NEUTRAL = {
    "__init__.py": "the package's entry: no code", "__main__.py": "`python -m normlab`: the command line's entry",
    "version.py": "the version string", "errors.py": "the error types of user input",
    "registry.py": "name lookups", "jsonsafe.py": "JSON-safe values", "device.py": "where a run computes",
    "compat.py": "reading what an older normlab wrote: a change there fails tests/study/test_preset_ids.py's pins",
    "config.py": "the run config's fields: a change moves run ids, which tests/study/test_preset_ids.py pins",
    "cli/*.py": "the command line: parses what a user asks and prints what the study decided",
    "data/__init__.py": "re-exports", "data/objectives.py": _MODEL,
    "data/provenance.py": "what a run keeps of its corpus (hash, vocabulary): refusals, not values",
    "data/vocab.py": "a run's vocabulary, which its config carries: a change moves run ids (pinned)",
    "nn/*.py": _MODEL, "nn/schemes/*.py": _MODEL, "nn/kernels/*.py": _MODEL,
    "diagnostics/__init__.py": "re-exports",
    "diagnostics/check.py": "`normlab check`: static checks no study reads",
    "diagnostics/diagnose.py": "`normlab diagnose` on one model: no study reads it",
    "diagnostics/nan.py": "where a diverged run's first NaN started: said in its reason, never judged",
    "diagnostics/page.py": "diagnose's page", "diagnostics/structure.py": "diagnose's reading of an HF model",
    "rundir/*.py": "a run's directory: storage and locks; what a record reads is records.py's",
    "hf/*.py": "Hugging Face import and export: no study reads them", "hf/families/*.py": "as hf/",
    "report/*.py": "renders verdicts already decided (what an outcome is: report/outcome.py, fingerprinted)",
    "train/*.py": _TRAINER,
    "bench/__init__.py": "re-exports", "bench/report.py": "`normlab bench`'s table",
    "study/__init__.py": "no code", "study/rules.py": "this fingerprint itself",
    "study/presets.py": "enters as data (`presets_data`): its settings, not its prose",
    "study/publish.py": "writes the report of what judge.py decided", "study/sections.py": "the report's general "
    "sections: descriptions, no decision", "study/ledger.py": "storage of runs and records",
    "study/jobs.py": "which executor trains a run: the same config trains the same run anywhere",
    "study/workers.py": "which process trains which run, and stacks: numerics recorded per run",
    "study/local_executor.py": "as workers.py: the worker processes on this machine",
    "study/ray_executor.py": "as workers.py, on a Ray cluster", "study/tensorboard.py": "live events for a reader",
    "study/reference.py": "a reference run's time, to state the study's cost in its units",
}

# every file the package ships that is not Python, with why its content cannot change a decision (the presets'
# settings, which can, enter the fingerprint as data: `presets_data`); tests/study/test_rules.py holds the package's
# data files to this list
DATA_FILES = {
    "data/*.txt": "the corpora runs train on: a change changes the runs themselves (each run stores its corpus's "
                  "hash, data/provenance.py, and is refused on another) and the trained line they are judged by "
                  "(data/corpus.py, fingerprinted, computes it from them)",
    "nn/kernels/*.cpp": _MODEL,
    "cli/listings.json": "the command line's help lists, written from the registries and tested against them",
    "study/measured_cost.json": "a preset's measured wall time, which its description quotes (prose, left out of "
                                "`presets_data`)",
    "study/design_verdicts.json": "the packaged design-seed record: the report's design column (design.py's "
                                  "`design_beside`) and the power plan's `sized` text read it, no decision does; "
                                  "a held-out study's report quotes it, so it changes only with a move "
                                  "(tests/test_results.py holds it to the one committed with the freeze)",
}


def _sources() -> list[tuple[str, str]]:
    root = resources.files("normlab")
    out = []
    for pattern in RULE_MODULES:
        folder, _, name = pattern.rpartition("/")
        base = root.joinpath(folder)
        names = sorted(p.name for p in base.iterdir() if p.name.endswith(".py")) if name == "*.py" else [name]
        out += [(f"{folder}/{n}", base.joinpath(n).read_text("utf-8")) for n in names]
    return out


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return tree


def fingerprint_of(sources: list[tuple[str, str]]) -> str:
    """The hash of these (name, source) modules' syntax trees, docstrings and comments left out."""
    digest = hashlib.sha256()
    for name, text in sources:
        digest.update(name.encode())
        digest.update(ast.dump(_without_docstrings(ast.parse(text))).encode())
    return digest.hexdigest()[:16]


def presets_data() -> str:
    """Every preset's settings and the trained line's share, as data: what presets.py decides of a verdict. Its prose
    (`summary`, `description`, which quote the preset's measured wall time) is left out: recording a new time
    is not a rule change."""
    import dataclasses
    import json

    from normlab.data.corpus import TRAINED_SHARE
    from normlab.study.presets import HELD_OUT, PRESETS

    prose = ("summary", "description")
    return json.dumps({"presets": {n: {k: v for k, v in dataclasses.asdict(p).items() if k not in prose}
                                   for n, p in sorted(PRESETS.items())},
                       "held_out": HELD_OUT, "trained_share": TRAINED_SHARE}, sort_keys=True, default=repr)


@functools.lru_cache(maxsize=1)
def fingerprint() -> str:
    """The fingerprint of the rules as this normlab has them."""
    return fingerprint_of(_sources() + [("presets", f"PRESETS = {presets_data()!r}")])


def rules_record() -> dict:
    """What verdicts.json records of the rules."""
    return {"fingerprint": fingerprint(), "modules": list(RULE_MODULES) + ["the presets, as data"],
            "what": "a hash of the rule modules' syntax trees without docstrings or comments, and of the presets "
                    "(study/rules.py)"}


def thresholds(verdicts: list[Verdict]) -> dict[str, Any]:
    """The rules every verdict was judged by, as the report's method section states them."""
    return {"loss_margin_nats": statistics.LOSS_MARGIN, "confidence": statistics.CONFIDENCE,
            "equivalence_tost": statistics.EQUIVALENCE, "sign_test_level": statistics.SIGN_LEVEL,
            "trains_if_seeds_at_least": statistics.TRAINS, "min_seeds": statistics.MIN_SEEDS,
            "family_wise": family_text(verdicts)}


def family_text(verdicts: list[Verdict]) -> str:
    """The family-wise control in words, for the report's method section."""
    family = next((v.family for v in verdicts if v.family), None)
    if not family:
        return "not controlled"
    return (f"{family['method']}: a claim is decided at α/(m − j), j the claims decided before it; a verdict "
            "decisive at α alone but at no step of the procedure is reported inconclusive")
