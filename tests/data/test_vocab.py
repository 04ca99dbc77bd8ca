"""A run's vocabulary, resolved in one place (normlab.data.vocab): the tokenizer's tokens plus the objective's."""
import pytest

from normlab.config import validate_config
from normlab.data import corpus_of
from normlab.data.vocab import Vocabulary, vocabulary, with_vocab


def test_each_architecture_adds_its_objectives_special_tokens_after_the_text():
    vocab = Vocabulary(65)
    assert [vocab.size(arch) for arch in ("decoder", "encoder", "encoder-decoder")] == [65, 66, 67]
    # a tokenizer with its own MASK: the masked LM uses it and adds nothing
    assert Vocabulary(100, mask_id=3).size("encoder") == 100


def test_the_vocabulary_of_a_data_section_is_its_corpus_tokenizers():
    cfg = validate_config({})
    assert vocabulary(cfg.data) == Vocabulary.of(corpus_of(cfg).tokenizer) == Vocabulary(65)
    assert vocabulary(cfg.data) is vocabulary(cfg.data)  # read once per corpus per process


def test_with_vocab_fills_an_unset_vocabulary_and_checks_a_set_one():
    cfg = validate_config({"model": {"arch": "encoder"}})
    assert with_vocab(cfg).model.vocab_size == 66
    assert with_vocab(cfg, Vocabulary(10)).model.vocab_size == 11
    wrong = validate_config({"model": {"arch": "encoder", "vocab_size": 65}})
    with pytest.raises(ValueError, match=r"model.vocab_size = 65, but the char tokenizer of this corpus has 65 "
                                         r"tokens \(\+ 1 special\); leave model.vocab_size unset"):
        with_vocab(wrong, Vocabulary(65))
    assert with_vocab(wrong) is wrong  # a set vocabulary without a tokenizer to check it against stays
