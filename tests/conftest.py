"""Shared fixtures: tiny configs that train in a second or two on 2 CPU cores."""
from __future__ import annotations

import os
import signal

import pytest
import torch

from normlab.config import RunConfig, validate_config

# a study times one reference run at its start (study/reference.py, ~10 s): the suite's tiny studies skip it, and
# tests/study/test_reference.py times it where it is the subject
os.environ.setdefault("NORMLAB_REFERENCE_RUN", "off")


def tiny_config(**sections) -> RunConfig:
    """A 2-layer, 32-wide char model on the packaged corpus; override with model={...}, train={...}."""
    raw = {
        "model": {"block_size": 16, "n_layer": 2, "n_head": 2, "d_model": 32},
        "train": {"steps": 30, "batch_size": 4, "lr": 3e-3, "warmup_steps": 5, "eval_interval": 10,
                  "eval_batches": 2, "ckpt_interval": 10, "log_interval": 1, "device": "cpu"},
    }
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return validate_config(raw)


def judged_study(spec, out, outcome) -> tuple:
    """How far a study `run_study` trained in `out` got (`Completion`), and its verdicts, as it judged them when it
    ended (what the report renders); checked against judging its ledger afresh."""
    from normlab.study.judge import judge_study
    from normlab.study.ledger import Ledger
    from normlab.study.measuring import measure_claims
    from normlab.study.state import completion

    judged, ledger = outcome.judged, Ledger(out)
    again = judge_study(judged.plan, ledger, list(judged.ids), completion(judged.plan, ledger, list(judged.ids),
                                                                         measure_claims(judged.plan, ledger, False)))
    assert again.status == judged.status and [v.to_dict() for v in again.verdicts] == \
        [v.to_dict() for v in judged.verdicts], "the study's judgement differs from its ledger's"
    return judged.status, list(judged.verdicts)


@pytest.fixture
def tiny():
    return tiny_config


@pytest.fixture
def one_torch_thread():
    """Tiny models run fastest, and steadiest on a shared 2-core machine, on one thread."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def ctrl_c_reaches_children():
    """Children started in the test take Ctrl-C. A shell's background job (`make test &`, nohup) starts with SIGINT
    ignored, and an ignored signal stays ignored through exec: Python would then never raise KeyboardInterrupt,
    and a test of what Ctrl-C does would fail (or pass) for the launcher's sake, not normlab's."""
    before = signal.getsignal(signal.SIGINT)
    if before == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a handler resets to default across exec
    yield
    signal.signal(signal.SIGINT, before)
