"""The corpus: packaged default, tokenizers, the 90/10 split, batches, and the errors."""
from __future__ import annotations

import torch
import pytest

from normlab.data import ByteTokenizer, CharTokenizer, CorpusError, load_corpus


def test_packaged_tinyshakespeare_is_complete_and_split_90_10():
    corpus = load_corpus()
    assert corpus.tokenizer.vocab_size == 65
    n = len(corpus.train) + len(corpus.val)
    assert n == 1_115_394
    assert len(corpus.train) == int(0.9 * n)
    assert corpus.tokenizer.decode(corpus.train[:14].tolist()) == "First Citizen:"


def test_char_and_byte_tokenizers_round_trip():
    text = "héllo, wörld\n"
    char = CharTokenizer(text)
    assert char.decode(char.encode(text)) == text
    assert char.chars == sorted(set(text))
    byte = ByteTokenizer()
    assert byte.encode("é") == [0xC3, 0xA9] and byte.decode(byte.encode(text)) == text
    with pytest.raises(ValueError, match="'z'"):
        char.encode("z")


def test_char_ids_are_the_per_character_lookup_of_the_vocabulary():
    """The corpus is encoded by one table lookup: the same ids, in order, as looking each character up, with the
    characters the vocabulary lacks (accents, an emoji beyond the table, a lone surrogate) dropped and counted."""
    text = "First Citizen:\nbefore we proceed"
    tok = CharTokenizer(text)
    other = "Fïrst €😀 zebra\ud800!"
    ids, dropped = tok.encode_known(other)
    assert ids.tolist() == [tok.stoi[c] for c in other if c in tok.stoi]
    assert dropped == sum(c not in tok.stoi for c in other) == 6  # ï € 😀 a, a lone surrogate, !
    assert tok.encode(text) == [tok.stoi[c] for c in text]
    with pytest.raises(ValueError, match="'ï'"):  # the first character it lacks, named
        tok.encode(other)
    assert tok.encode("") == [] and CharTokenizer("").encode_known("ab")[1] == 2


def test_user_file_byte_level(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("ünïcode text " * 100, "utf-8")
    corpus = load_corpus(str(path), "byte", block_size=8)
    assert corpus.tokenizer.vocab_size == 256 and corpus.name == str(path)


def test_batches_are_shifted_windows_and_reproducible():
    corpus = load_corpus()
    x, y = corpus.batch("train", 4, 32, torch.Generator().manual_seed(0))
    x2, _ = corpus.batch("train", 4, 32, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (4, 32) and torch.equal(x, x2)
    assert torch.equal(x[:, 1:], y[:, :-1])


@pytest.mark.parametrize("content, match", [(None, "does not exist"), ("", "empty"), ("abc" * 10, "too short")])
def test_bad_files_are_clear_errors(tmp_path, content, match):
    path = tmp_path / "c.txt"
    if content is not None:
        path.write_text(content)
    with pytest.raises(CorpusError, match=match):
        load_corpus(str(path), block_size=64)


def test_non_utf8_file(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("café".encode("latin-1") * 1000)
    with pytest.raises(CorpusError, match="not valid UTF-8"):
        load_corpus(str(path))
    with pytest.raises(CorpusError, match="unknown tokenizer 'bpe'.*char, byte"):
        load_corpus(None, "bpe")


def test_unigram_cross_entropy_matches_a_hand_count():
    import collections
    import math

    from normlab.data import load_corpus

    c = load_corpus()
    counts = collections.Counter(c.train.tolist())
    total = len(c.train) + c.tokenizer.vocab_size  # add-one smoothing
    expected = -sum(math.log((counts[t] + 1) / total) for t in c.val.tolist()) / len(c.val)
    assert c.unigram_cross_entropy() == pytest.approx(expected, rel=1e-9)
    assert 3.34 < c.unigram_cross_entropy() < 3.35  # tiny Shakespeare, characters


@pytest.mark.parametrize("path, tokenizer, vocab_from", [(None, "char", None), ("paradise_lost", "char", None),
                                                         ("paradise_lost", "char", "tinyshakespeare"),
                                                         (None, "byte", None)])
def test_corpus_tokenizer_is_the_one_load_corpus_reads_with(path, tokenizer, vocab_from):
    """What a study reads at its start to know each run's vocabulary, without encoding the text."""
    from normlab.data.corpus import corpus_tokenizer

    alone = corpus_tokenizer(path, tokenizer, vocab_from)
    loaded = load_corpus(path, tokenizer, 64, vocab_from).tokenizer
    assert (alone.vocab_size, alone.mask_id) == (loaded.vocab_size, loaded.mask_id)
    assert alone.encode("ROMEO: and yet") == loaded.encode("ROMEO: and yet")


def test_corpus_tokenizer_refuses_what_load_corpus_refuses(tmp_path):
    from normlab.data.corpus import corpus_tokenizer

    with pytest.raises(CorpusError, match="unknown tokenizer 'bpe'; valid: char, byte, hf"):
        corpus_tokenizer(None, "bpe")
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(CorpusError, match="is empty"):
        corpus_tokenizer(str(tmp_path / "empty.txt"))
    with pytest.raises(CorpusError, match="does not exist"):
        corpus_tokenizer(str(tmp_path / "gone.txt"))


def test_the_bigram_cross_entropy_is_a_dense_add_one_table_and_the_trained_line_lies_halfway():
    import torch

    from normlab.data.corpus import load_corpus, trained_line

    c = load_corpus(block_size=32)
    v = c.tokenizer.vocab_size
    table = torch.zeros(v, v, dtype=torch.float64)
    table.index_put_((c.train[:-1], c.train[1:]), torch.ones(len(c.train) - 1, dtype=torch.float64), accumulate=True)
    table += 1
    dense = -(table.log() - table.sum(1, keepdim=True).log())[c.val[:-1], c.val[1:]].mean()
    assert c.bigram_cross_entropy() == pytest.approx(float(dense), rel=1e-12)
    unigram, bigram = c.unigram_cross_entropy(), c.bigram_cross_entropy()
    assert bigram < unigram and trained_line(unigram, bigram) == pytest.approx((unigram + bigram) / 2)


def test_train_tokens_cuts_the_train_split_only_and_keeps_the_run_id_of_a_config_without_it():
    from normlab.data.corpus import corpus_of
    from tests.conftest import tiny_config

    whole, cut = corpus_of(tiny_config()), corpus_of(tiny_config(data={"train_tokens": 5000}))
    assert torch.equal(cut.train, whole.train[:5000]) and torch.equal(cut.val, whole.val)
    assert cut.tokenizer.vocab_size == whole.tokenizer.vocab_size and cut.sha256 == whole.sha256
    windows = {tuple(w) for w in cut.train.unfold(0, 16, 1).tolist()}
    x, _ = cut.batch("train", 64, 16, torch.Generator().manual_seed(0))
    assert all(tuple(row) in windows for row in x.tolist())  # every window from the first 5,000 tokens
    # a field added with None left out of the id: every earlier run keeps its directory
    assert tiny_config().hash() == tiny_config(data={"train_tokens": None}).hash() != \
        tiny_config(data={"train_tokens": 5000}).hash()


@pytest.mark.parametrize("n", [3, 10**9])
def test_train_tokens_outside_the_split_is_refused_naming_the_value_and_the_range(n):
    from normlab.data.corpus import corpus_of
    from tests.conftest import tiny_config

    with pytest.raises(CorpusError, match=rf"data.train_tokens = {n} .*valid are \d+ to \d+"):
        corpus_of(tiny_config(data={"train_tokens": n}))
