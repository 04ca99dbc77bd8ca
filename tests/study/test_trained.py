"""What "trained" means when a study judges its runs (study/trained.py): a completed run above the line halfway
from its corpus's unigram to its bigram cross-entropy did not train; a run the plateau stop ended stays censored;
a run whose config never judges it is left as it is; a corpus that cannot be read leaves its runs' own status."""
from __future__ import annotations

import pytest

from normlab.data.corpus import trained_line
from normlab.study.trained import above_line, corpus_key, judge_trained
from tests.study.scenarios import PLATEAU, changed, rec, runs

ENDS = [3.35, 2.48]  # unigram, bigram: the line is 2.915
LINE = trained_line(*ENDS)


def test_a_completed_run_above_the_line_did_not_train_and_one_below_it_did():
    below, above = rec(val_loss=LINE - 0.01), rec(val_loss=LINE + 0.01)
    assert above_line(below, LINE) is below and not below.did_not_train
    judged = above_line(above, LINE)
    assert judged.failed_to_train and not judged.censored and "above 2.9150" in judged.reason
    assert not above.did_not_train  # the record itself is left as it was


def test_a_censored_run_stays_censored_and_a_run_never_judged_is_left_alone():
    stopped = runs([PLATEAU])[0]
    assert above_line(stopped, LINE) is stopped and stopped.censored
    off = changed(rec(val_loss=3.3), {"train.untrained_margin": "off"})
    assert above_line(off, LINE) is off


def test_the_study_reads_each_corpus_line_it_stored_and_keeps_a_run_it_cannot_judge():
    r = rec(val_loss=3.1)
    assert judge_trained([r], {corpus_key(r.config): ENDS})[0].failed_to_train
    away = changed(rec(val_loss=3.1), {"data.path": "/nonexistent/corpus.txt", "data.tokenizer": "char"})
    assert judge_trained([away], {})[0] is away  # its corpus moved away: its own status stands
    assert judge_trained([r], {})[0].failed_to_train  # the packaged corpus is read once when not stored


@pytest.mark.parametrize("loss, trained", [(2.40, True), (2.91, True), (2.92, False), (3.24, False)])
def test_the_old_knife_edge_reads_as_the_modes_do(loss, trained):
    # 3.24 counted as trained under the old line (0.1 nats under the unigram loss); it is barely off the plateau
    assert (not above_line(rec(val_loss=loss), LINE).did_not_train) == trained


def test_a_run_on_fewer_tokens_is_judged_against_what_those_tokens_can_teach():
    """`data.train_tokens`: the trained line from the unigram and bigram tables of the first N tokens (val split
    unchanged), as docs/training.md quotes it for 4,096 tokens and for the whole corpus."""
    from pathlib import Path

    from normlab.data.corpus import trained_line
    from normlab.study.trained import corpus_lines
    from tests.conftest import tiny_config

    whole = trained_line(*corpus_lines(tiny_config()))
    few = trained_line(*corpus_lines(tiny_config(data={"train_tokens": 4096})))
    assert few > whole + 0.1  # a bigram table of 4,096 tokens knows less
    docs = (Path(__file__).parents[2] / "docs" / "training.md").read_text("utf-8")
    assert f"({few:.2f} nats for the first 4,096 tokens of tiny Shakespeare, {whole:.2f}" in " ".join(docs.split())
