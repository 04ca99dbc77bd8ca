"""Load a UTF-8 text, tokenize it (characters or bytes), split 90/10, sample batches.

The default corpus is tiny Shakespeare (public domain, 1,115,394 characters),
shipped inside the package so that nothing is fetched, as is a second one for
transfer: Milton's *Paradise Lost* (public domain, 465,072 characters).
"""
from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import torch

from normlab.errors import CorpusError

DEFAULT_CORPUS = "tinyshakespeare"
PACKAGED = {"tinyshakespeare": "tinyshakespeare.txt", "paradise_lost": "paradise_lost.txt"}  # data.path names
TRAIN_FRACTION = 0.9  # first 90 % train, the rest val (as nanoGPT)


class CharTokenizer:
    """One token per distinct character of the corpus, ids in sorted character order (as nanoGPT)."""

    kind = "char"
    mask_id = None  # a masked LM's MASK is added after the vocabulary (normlab.data.objectives)

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        # code point → id (−1: not in the vocabulary): a whole corpus is encoded by one lookup, not a Python loop
        # per character, which every run of a study paid (benchmarks/cpu_step_costs.py times the two)
        self._table = torch.full((max(map(ord, self.chars), default=-1) + 1,), -1, dtype=torch.long)
        self._table[[ord(c) for c in self.chars]] = torch.arange(len(self.chars))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def _ids(self, text: str) -> torch.Tensor:
        """Each character's id, −1 where the vocabulary lacks it."""
        if not text:
            return torch.zeros(0, dtype=torch.long)
        codes = torch.frombuffer(bytearray(text.encode("utf-32-le", "surrogatepass")), dtype=torch.int32).long()
        if not len(self._table):  # an empty vocabulary knows no character
            return torch.full_like(codes, -1)
        return torch.where(codes < len(self._table), self._table[codes.clamp(max=len(self._table) - 1)], -1)

    def encode(self, text: str) -> list[int]:
        ids = self._ids(text)
        missing = (ids < 0).nonzero()
        if len(missing):
            raise ValueError(f"character {text[missing[0].item()]!r} is not in this corpus's vocabulary")
        return ids.tolist()

    def encode_known(self, text: str) -> tuple[torch.Tensor, int]:
        """The ids of the characters this vocabulary has, and how many characters it had to drop."""
        ids = self._ids(text)
        kept = ids[ids >= 0]
        return kept, len(ids) - len(kept)

    def decode(self, ids: list[int]) -> str:
        return "".join(self.chars[i] for i in ids)


class ByteTokenizer:
    """The 256 byte values of the UTF-8 encoding: any text, fixed vocabulary."""

    kind = "byte"
    mask_id = None
    vocab_size = 256

    def __init__(self, text: str = ""):
        pass

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        return bytes(ids).decode("utf-8", errors="replace")

    def encode_known(self, text: str) -> tuple[list[int], int]:
        return self.encode(text), 0  # every text is bytes


TOKENIZERS = {"char": CharTokenizer, "byte": ByteTokenizer}


class HFTokenizer:
    """A Hugging Face fast tokenizer: the tokenizer.json of a model directory, read by the `tokenizers`
    library (a JSON description of the vocabulary and rules; nothing in it runs). An imported model keeps its
    own tokens (`normlab import-hf` copies the file into the run directory's `tokenizer/`), and a masked LM
    its own mask token."""

    kind = "hf"
    MASKS = ("[MASK]", "<mask>")

    def __init__(self, directory: str | Path):
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise CorpusError("data.tokenizer = 'hf' needs the `tokenizers` package: pip install -e '.[hf]'") from None
        file = Path(directory) / "tokenizer.json"
        if not file.is_file():
            raise CorpusError(f"data.tokenizer = 'hf': no tokenizer.json in {str(directory)!r} (data.tokenizer_dir; "
                              "if the imported run moved, point it at the run's tokenizer/)")
        try:
            self.tok = Tokenizer.from_file(str(file))
        except Exception as e:  # the library's own error types; one line either way
            raise CorpusError(f"{file}: not a tokenizer the `tokenizers` library reads ({str(e).splitlines()[0]})") from None
        self.tok.no_truncation()  # a corpus is one long text: a model's saved max_length must not cut it
        self.tok.no_padding()
        self.mask_id = next((i for i in map(self.tok.token_to_id, self.MASKS) if i is not None), None)

    @property
    def vocab_size(self) -> int:
        return self.tok.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False).ids

    def encode_known(self, text: str) -> tuple[list[int], int]:
        return self.encode(text), 0  # an unknown character becomes the tokenizer's own unknown token

    def decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids)


@dataclass
class Corpus:
    """A tokenized text split into train and val token streams."""

    name: str
    tokenizer: CharTokenizer | ByteTokenizer
    train: torch.Tensor  # (N_train,) int64
    val: torch.Tensor  # (N_val,) int64
    vocab_from: str | None = None  # the corpus whose vocabulary encodes this one (fine-tuning), if not itself
    dropped: int = 0  # characters of the text outside that vocabulary, left out
    sha256: str = ""  # of the text (normlab.data.provenance: a run keeps it, and refuses text that changed)

    def unigram_cross_entropy(self) -> float:
        """Cross-entropy (nats/token) of the val tokens under the train tokens' frequencies (add-one smoothed).

        The loss a model reaches by learning token frequencies and nothing else: a run that ends near it has
        failed to train, whatever its status says (tiny Shakespeare, char level: 3.34 nats).
        """
        vocab = self.tokenizer.vocab_size
        counts = torch.bincount(self.train, minlength=vocab).double() + 1.0
        log_p = counts.log() - counts.sum().log()
        return float(-log_p[self.val].mean())

    def bigram_cross_entropy(self) -> float:
        """Cross-entropy (nats/token) of the val tokens under the train tokens' bigram frequencies (add-one
        smoothed): what a model reaches that predicts each token from the one before it and nothing more (tiny
        Shakespeare, char level: 2.48 nats)."""
        vocab = self.tokenizer.vocab_size
        # the seen pairs only (sparse): a dense vocab × vocab table would not fit a 150k-token vocabulary
        pairs, counts = torch.unique(self.train[:-1] * vocab + self.train[1:], return_counts=True)  # sorted
        rows = torch.bincount(self.train[:-1], minlength=vocab).double() + vocab  # each row's total, add-one
        wanted = self.val[:-1] * vocab + self.val[1:]
        at = torch.searchsorted(pairs, wanted).clamp(max=len(pairs) - 1)
        seen = torch.where(pairs[at] == wanted, counts[at].double(), torch.zeros((), dtype=torch.float64)) + 1.0
        return float(-(seen.log() - rows[self.val[:-1]].log()).mean())

    def batch(self, split: str, batch_size: int, block_size: int, generator: torch.Generator):
        """Random windows of `block_size` tokens and their next-token targets, (B, T) each."""
        data = self.train if split == "train" else self.val
        starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
        offsets = torch.arange(block_size)
        x = data[starts[:, None] + offsets]  # (B, T)
        y = data[starts[:, None] + offsets + 1]  # (B, T)
        return x, y


def read_text(path: str | None) -> tuple[str, str]:
    """(name, text) of the corpus at `path`, of a packaged one by name, or of the packaged default (None)."""
    name = DEFAULT_CORPUS if path is None else path
    if name in PACKAGED:
        return name, resources.files("normlab.data").joinpath(PACKAGED[name]).read_text("utf-8")
    p = Path(path).expanduser()
    if not p.is_file():
        raise CorpusError(f"corpus file {str(p)!r} does not exist (or is not a file); give a UTF-8 text file, "
                          f"a packaged corpus ({', '.join(PACKAGED)}), or leave data.path unset for {DEFAULT_CORPUS}")
    try:
        text = p.read_text("utf-8")
    except UnicodeDecodeError as e:
        raise CorpusError(f"corpus file {str(p)!r} is not valid UTF-8 ({e.reason} at byte {e.start})") from None
    return str(p), text


def load_corpus(path: str | None = None, tokenizer: str = "char", block_size: int = 256,
                vocab_from: str | None = None, tokenizer_dir: str | None = None) -> Corpus:
    """Read, tokenize and split a corpus; refuse one too short for `block_size`.

    `vocab_from` names another corpus whose vocabulary tokenizes this one (a model fine-tuned on this
    text keeps the tokens it was trained with); characters that vocabulary lacks are dropped and counted.
    """
    _check_tokenizer(tokenizer, vocab_from, tokenizer_dir)
    name, text = read_text(path)
    if not text:
        raise CorpusError(f"corpus {name!r} is empty")
    source = None if vocab_from is None else read_text(vocab_from)
    tok = _tokenizer(tokenizer, text if source is None else source[1], tokenizer_dir)
    encoded, dropped = tok.encode_known(text)
    if not len(encoded):
        raise CorpusError(f"corpus {name!r} has no character in the vocabulary of {source[0]!r}")
    ids = torch.as_tensor(encoded, dtype=torch.long)
    n_train = int(TRAIN_FRACTION * len(ids))
    train, val = ids[:n_train], ids[n_train:]
    shortest = min(len(train), len(val))
    if shortest <= block_size:
        need = (block_size + 1) / (1 - TRAIN_FRACTION)
        raise CorpusError(f"corpus {name!r} is too short: {len(ids)} tokens give a {shortest}-token split, "
                          f"and block_size {block_size} needs more than {block_size}; "
                          f"use at least {int(need) + 1} tokens or a smaller block_size")
    return Corpus(name=name, tokenizer=tok, train=train, val=val,
                  vocab_from=None if source is None else source[0], dropped=dropped,
                  sha256=hashlib.sha256(text.encode("utf-8")).hexdigest())


def corpus_tokenizer(path: str | None = None, tokenizer: str = "char", vocab_from: str | None = None,
                     tokenizer_dir: str | None = None) -> CharTokenizer | ByteTokenizer | HFTokenizer:
    """The tokenizer `load_corpus` reads this corpus with, without encoding the text: what a study needs to
    know each run's vocabulary when it starts (the text of the vocabulary's source is read, nothing more)."""
    _check_tokenizer(tokenizer, vocab_from, tokenizer_dir)
    if tokenizer == "hf":
        return HFTokenizer(tokenizer_dir)
    name, text = read_text(path if vocab_from is None else vocab_from)
    if not text:
        raise CorpusError(f"corpus {name!r} is empty")
    return _tokenizer(tokenizer, text, tokenizer_dir)


def _check_tokenizer(tokenizer: str, vocab_from: str | None, tokenizer_dir: str | None) -> None:
    if tokenizer not in (*TOKENIZERS, "hf"):
        raise CorpusError(f"unknown tokenizer {tokenizer!r}; valid: {', '.join(TOKENIZERS)}, hf")
    if tokenizer == "hf" and not tokenizer_dir:
        raise CorpusError("data.tokenizer = 'hf' needs data.tokenizer_dir: the directory of its tokenizer.json")
    if tokenizer == "hf" and vocab_from is not None:
        raise CorpusError(f"data.vocab_from = {vocab_from!r} is for the char and byte tokenizers; an 'hf' tokenizer "
                          "has its own vocabulary")


def _tokenizer(tokenizer: str, vocabulary_text: str, tokenizer_dir: str | None):
    return HFTokenizer(tokenizer_dir) if tokenizer == "hf" else TOKENIZERS[tokenizer](vocabulary_text)


# A run has trained when its final val loss is below the line TRAINED_SHARE of the way from the corpus's unigram
# cross-entropy (token frequencies, nothing more) down to its bigram cross-entropy (each token from the one
# before). Why halfway, chosen on the design ledgers (benchmarks/trained_line.py): runs end in two modes, stuck
# near the unigram loss or well below the bigram's, and the few between (runs that left the plateau late) had
# learned less than half of what a bigram table knows; the old line, 0.1 nats under the unigram loss, counted a
# run at 3.24 as trained beside runs at 2.40
TRAINED_SHARE = 0.5


def trained_line(unigram: float, bigram: float) -> float:
    """The val loss below which a run has trained (`TRAINED_SHARE` of the way from unigram to bigram)."""
    return unigram - TRAINED_SHARE * (unigram - bigram)


def corpus_of(cfg) -> Corpus:
    """The corpus a RunConfig trains on (its data section and block size), its train split cut to
    `data.train_tokens` where that is set."""
    corpus = load_corpus(cfg.data.path, cfg.data.tokenizer, cfg.model.block_size, cfg.data.vocab_from,
                         cfg.data.tokenizer_dir)
    return first_tokens(corpus, cfg.data.train_tokens, cfg.model.block_size)


def first_tokens(corpus: Corpus, n: int | None, block_size: int) -> Corpus:
    """The corpus with only the first `n` tokens of its train split (None: all of them): one window of
    `block_size` + 1 tokens at least, and no more than the split holds."""
    if n is None:
        return corpus
    if not block_size + 1 < n <= len(corpus.train):
        raise CorpusError(f"data.train_tokens = {n} is outside what corpus {corpus.name!r} can give at block_size "
                          f"{block_size}: valid are {block_size + 2} to {len(corpus.train)} (its train split), or "
                          "unset for all of it")
    return dataclasses.replace(corpus, train=corpus.train[:n])
