"""Text corpora and tokenizers. Knows nothing of models."""
from normlab.data.corpus import (DEFAULT_CORPUS, ByteTokenizer, CharTokenizer, Corpus, CorpusError,
                                 load_corpus)

__all__ = ["DEFAULT_CORPUS", "ByteTokenizer", "CharTokenizer", "Corpus", "CorpusError", "load_corpus"]
