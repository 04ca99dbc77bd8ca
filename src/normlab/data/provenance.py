"""What a run trained on, kept in its directory (`corpus.json`): the corpus (its name or absolute path and the
SHA-256 of its text), and the vocabulary its ids mean (a char tokenizer's characters in id order; a byte
tokenizer's 256 bytes; a Hugging Face tokenizer's directory and the SHA-256 of its tokenizer.json).

Why: a char vocabulary is the corpus's sorted characters, so a corpus edited after training (one tab appended)
shifts every id, and a tool that rebuilt the vocabulary from the file as it is now (`sample`, `export`,
`diagnose`, a resumed run) would read the model with the wrong ids, silently. With the record they read the ids
as trained, and refuse text that changed where they need the text itself.
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from normlab.data.corpus import PACKAGED, ByteTokenizer, CharTokenizer, Corpus, HFTokenizer, read_text
from normlab.errors import CorpusError

FILE = "corpus.json"


def where(path: str | None) -> str | None:
    """A corpus named as the run can find it from anywhere: a packaged corpus by its name, a file by its
    absolute path (a relative path means another file once the working directory changes)."""
    if path is None or path in PACKAGED:
        return path
    return str(Path(path).expanduser().resolve())


@dataclass(frozen=True)
class Provenance:
    """A run's corpus and vocabulary as it trained."""

    corpus: str  # a packaged corpus's name, or the file's absolute path
    sha256: str  # of the corpus text
    tokenizer: str  # char | byte | hf
    chars: list[str] | None = None  # char: the vocabulary, in id order
    vocab_from: str | None = None  # the corpus whose characters are the vocabulary (a fine-tune), if another
    tokenizer_sha256: str | None = None  # hf: of its tokenizer.json

    @classmethod
    def of(cls, corpus: Corpus, data) -> Provenance:
        """The record of `corpus`, loaded from the data section `data` (the tokenizer is the corpus's own)."""
        tok = corpus.tokenizer
        hf_file = Path(data.tokenizer_dir) / "tokenizer.json" if tok.kind == "hf" else None
        return cls(corpus=where(data.path) or corpus.name, sha256=corpus.sha256, tokenizer=tok.kind,
                   chars=list(tok.chars) if tok.kind == "char" else None, vocab_from=where(data.vocab_from),
                   tokenizer_sha256=hashlib.sha256(hf_file.read_bytes()).hexdigest() if hf_file else None)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Provenance:
        return cls(**{k: record.get(k) for k in cls.__dataclass_fields__})

    def record(self) -> dict[str, Any]:
        return asdict(self)

    def read_tokenizer(self, tokenizer_dir: str | Path | None = None):
        """The tokenizer whose ids the run trained with: from the record (char, byte), or the Hugging Face
        tokenizer at `tokenizer_dir`, refused if its tokenizer.json is not the one the run trained with."""
        if self.tokenizer == "char":
            return CharTokenizer("".join(self.chars or []))
        if self.tokenizer == "byte":
            return ByteTokenizer()
        tok = HFTokenizer(tokenizer_dir)
        now = hashlib.sha256((Path(tokenizer_dir) / "tokenizer.json").read_bytes()).hexdigest()
        if self.tokenizer_sha256 and now != self.tokenizer_sha256:
            raise CorpusError(f"{Path(tokenizer_dir) / 'tokenizer.json'} is not the tokenizer this run trained with "
                              f"(sha256 {self.tokenizer_sha256[:12]}…, now {now[:12]}…): its ids would mean other "
                              "tokens; restore the file the run was trained with")
        return tok

    def differs_from(self, corpus: Corpus) -> str | None:
        """Why `corpus`, as loaded now, is not what this run trained on (None: it is): other text, or a char
        vocabulary read from a corpus (`vocab_from`) whose characters changed."""
        if corpus.sha256 != self.sha256:
            return (f"the corpus {corpus.name!r} changed since this run trained on it (sha256 {self.sha256[:12]}…, "
                    f"now {corpus.sha256[:12]}…)")
        now = getattr(corpus.tokenizer, "chars", None)
        if self.chars is not None and now is not None and list(now) != self.chars:
            return (f"the corpus {self.vocab_from or corpus.name!r} its vocabulary is read from changed since this "
                    f"run trained ({len(self.chars)} characters then, {len(now)} now, or others)")
        return None

    def changed(self, path: str | None) -> str | None:
        """Why the corpus at `path` is not the text this run trained on (None: it is)."""
        try:
            name, text = read_text(path)
        except CorpusError as e:
            return str(e)
        now = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if now == self.sha256:
            return None
        return (f"the corpus {name!r} changed since this run trained on it (sha256 {self.sha256[:12]}…, now "
                f"{now[:12]}…)")
