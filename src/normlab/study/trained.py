"""What "trained" means when a study judges its runs: below the line halfway from the corpus's unigram to its bigram
cross-entropy (`data.corpus.trained_line`), each corpus's two ends read once per process (`corpus_lines`) and
stored with the study, so that `normlab report` reads no corpus."""
from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any

from normlab.config import RunConfig
from normlab.data.corpus import first_tokens, load_corpus, trained_line


def corpus_key(config: RunConfig | dict[str, Any]) -> str:
    """What names a run's tokens: its data section (the corpus, its tokenizer, a vocabulary it borrows); a config
    or a record's config dict."""
    data = config.data.model_dump(mode="json", exclude_none=True) if isinstance(config, RunConfig) else \
        {k: v for k, v in (config.get("data") or {}).items() if v is not None}
    return json.dumps(data, sort_keys=True)


@functools.lru_cache(maxsize=32)
def corpus_ends(key: str, block_size: int) -> tuple[float, float]:
    """The unigram and bigram cross-entropies of the corpus a `corpus_key` names, read once per process."""
    data = json.loads(key)
    corpus = load_corpus(data.get("path"), data.get("tokenizer", "char"), block_size, data.get("vocab_from"),
                         data.get("tokenizer_dir"))
    # the text a run trains on: a run on the first N tokens (`data.train_tokens`) is judged against what those
    # tokens can teach (their unigram and bigram tables), as its trainer judges it
    corpus = first_tokens(corpus, data.get("train_tokens"), block_size)
    return corpus.unigram_cross_entropy(), corpus.bigram_cross_entropy()


def corpus_lines(config: RunConfig) -> tuple[float, float]:
    """A run's corpus's unigram and bigram cross-entropies (nats/token), read once per corpus per process: the two
    ends of the line a run must end below to have trained (`data.corpus.trained_line`)."""
    return corpus_ends(corpus_key(config), config.model.block_size)


def judge_trained(records: list, lines: dict[str, list]) -> list:
    """The records with "trained" decided by the study's one line (`data.corpus.trained_line`): a run that completed
    above it did not train. The line's ends come from `lines` (the study's, stored at its start: `StudyPlan.lines`);
    a study stored before them reads its corpus once (and adds it to `lines`), and where it cannot, its runs keep
    the status they trained with."""
    out = []
    for r in records:
        ends = lines.get(corpus_key(r.config))
        if ends is None:
            try:
                ends = lines[corpus_key(r.config)] = list(corpus_ends(corpus_key(r.config), r.get("model.block_size")))
            except Exception:  # the corpus moved away: this run keeps its own judgement
                out.append(r)
                continue
        out.append(above_line(r, trained_line(*ends)))
    return out


def has_trained(status: str, val_loss: float | None, line: float) -> bool:
    """The one definition of "trained" that every output counts by (verdicts, the report's counts, cost.json, the
    plateau validation, the make-run record): the run completed and its final val loss is at or below the study's
    line (`data.corpus.trained_line`). A run that merely left the unigram plateau (the trainer's own judgement,
    `train.untrained_margin`) has not trained by it."""
    return status == "completed" and val_loss is not None and val_loss <= line


def line_of(config: RunConfig) -> float:
    """The trained line of a run's corpus (its own tokens: `data.train_tokens` included)."""
    return trained_line(*corpus_lines(config))


def trained_counts(records: list) -> dict[str, int]:
    """How many of these judged records (`judge_trained`) trained, did not train (failed to train or diverged),
    were censored by the plateau stop, or failed to run: the study's counts in the one meaning of each word."""
    out = {"trained": 0, "did not train": 0, "censored": 0, "failed": 0}
    for r in records:
        key = ("censored" if r.censored else "did not train" if r.did_not_train else
               "trained" if r.status == "completed" else "failed")
        out[key] += 1
    return out


def study_counts(records: list, unfinished: dict[str, int]) -> dict[str, int]:
    """A study's runs counted in the one meaning of each word (`trained_counts` of its judged records), and those
    not finished (`unfinished`: pending, running, failed to run); a word no run has is left out."""
    return {k: v for k, v in {**trained_counts(records), **unfinished}.items() if v}


def above_line(record, line: float):
    """The record as failed to train when it completed above the trained line, saying by how much; a run whose
    config says never to judge it (`train.untrained_margin = "off"`) is left as it is."""
    if record.status != "completed" or has_trained(record.status, record.val_loss, line) \
            or record.get("train.untrained_margin") in ("off", 0, 0.0):
        return record
    return dataclasses.replace(record, status="failed_to_train", reason=(
        f"did not train: final val loss {record.val_loss:.4f} is above {line:.4f}, the line halfway from the "
        "corpus's unigram to its bigram cross-entropy"))
