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
    above it did not train. The line's ends come from `lines` (the study's, stored at its start: `StudySpec.lines`);
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


def above_line(record, line: float):
    """The record as failed to train when it completed above the trained line, saying by how much; a run whose
    config says never to judge it (`train.untrained_margin = "off"`) is left as it is."""
    if record.status != "completed" or record.val_loss is None or record.val_loss <= line \
            or record.get("train.untrained_margin") in ("off", 0, 0.0):
        return record
    return dataclasses.replace(record, status="failed_to_train", reason=(
        f"did not train: final val loss {record.val_loss:.4f} is above {line:.4f}, the line halfway from the "
        "corpus's unigram to its bigram cross-entropy"))
