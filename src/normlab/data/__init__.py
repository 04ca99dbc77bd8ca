"""Text corpora and tokenizers. Knows nothing of models."""
from normlab.data.corpus import (DEFAULT_CORPUS, PACKAGED, ByteTokenizer, CharTokenizer, Corpus, CorpusError,
                                 corpus_of, load_corpus)

__all__ = ["DEFAULT_CORPUS", "PACKAGED", "ByteTokenizer", "CharTokenizer", "Corpus", "CorpusError", "corpus_of",
           "load_corpus"]
