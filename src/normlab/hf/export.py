"""A normlab model written back as a Hugging Face directory: `normlab export RUN_DIR --format hf --out DIR`.

DIR gets config.json, generation_config.json (a decoder) and model.safetensors in the layout of the family
adapter that holds the model (`normlab.hf.families`; `normlab export --help` lists them), which
`transformers.AutoModel*.from_pretrained(DIR)` loads with no remote code, and the run's tokenizer: the one an
imported model came with, or normlab's character vocabulary as a `tokenizers` word-level tokenizer over single
characters. config.json's bos/eos/pad ids are the ones that tokenizer defines as special tokens, null where it
has none: never a config class's defaults, which in a character vocabulary are characters. The adapter's
tensor map is read backward (normlab → checkpoint), and its `refusal`, derived from its facts, says why a
model does not fit. A placement with no Hugging Face layout (Post-LN decoder, DeepNorm, Mix-LN, ...) is
refused in one line naming the layouts there are.

What a layout lacks is written so that the function is the same: a bias the normlab model does not have
is written as zeros, and a token embedding scaled in the forward pass (√d under the `xiong` init) is
written pre-scaled, with the head untied where it was tied, so both keep their values.

A character vocabulary gains two tokens after the model's own ids, so that the tokenizer serves ordinary use:
`[UNK]` (a character the corpus never had; normlab's own encoder refuses it) and `[PAD]` (a batch of prompts
of unequal length). Their embedding rows are zeros, so no text without them computes differently; a
masked LM's head gives them a bias of −1e4 and a decoder's generation config suppresses them, so neither is
ever predicted. It has no bos or eos: normlab trains on one stream of characters with no document marks, and
a token the model never saw would mean nothing to it. The tokenizer's `model_max_length` is the block size the
model was trained at; the generation config names no `max_length` (`generation_config`).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from normlab.hf.adapter import Adapter
from normlab.hf.families import export_layouts
from normlab.hf.files import HFDirError
from normlab.nn.config import ModelConfig

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "vocab.json",
                   "merges.txt", "tokenizer.model")
UNK, PAD = "[UNK]", "[PAD]"  # what a character vocabulary gains on export, in this order after the model's ids
ADDED = (UNK, PAD)
NEVER = -1e4  # a masked LM's head bias at an added token: its logit never wins


def layout_for(cfg: ModelConfig) -> Adapter:
    """The Hugging Face layout that holds this model, or a one-line refusal naming the layouts there are: the
    nearest is the layout of the model's arch that differs in the fewest settings."""
    layouts = export_layouts()
    reasons = {a.name: a.refusals(cfg) for a in layouts}
    for adapter in layouts:
        if not reasons[adapter.name]:
            return adapter
    nearest = min(layouts, key=lambda a: (a.facts.get("arch") != cfg.arch, len(reasons[a.name])))
    differences = reasons[nearest.name]  # every one: fixing the first alone would only meet the next
    raise ValueError(f"scheme {cfg.scheme!r} ({cfg.arch}, {cfg.norm}) has no Hugging Face layout "
                     f"(nearest, {nearest.name}, differs in {len(differences)}: {'; '.join(differences)}); exportable: "
                     + "; ".join(f"{a.name} ({a.summary})" for a in layouts))


def hf_tensors(cfg: ModelConfig, state: dict[str, torch.Tensor], adapter: Adapter) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors: each map of the adapter read backward. A bias the model lacks is written as
    zeros (as many as its weight's rows), which computes the same."""
    base, out = adapter.base(cfg), {}
    for m in adapter.maps(cfg):
        ours = state.get(m.ours)
        if ours is None and m.ours.endswith(".bias"):
            ours = torch.zeros(state[m.ours.removesuffix(".bias") + ".weight"].shape[0])
        prefix = base if m.in_base else ""
        out.update({prefix + name: part for name, part in zip(m.theirs, m.codec.write(ours, cfg), strict=True)})
    return out


def hf_state(model: nn.Module, cfg: ModelConfig, layout: Adapter) -> tuple[dict[str, torch.Tensor], bool]:
    """The model's tensors in fp32, and whether its head stays tied: where the model scales its token
    embedding by another factor than the layout does, the embedding is stored rescaled (the layout's factor
    then gives the model's), and a tied head is stored apart with the embedding as it was."""
    state = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    tied = cfg.tie_weights
    theirs = cfg.d_model ** 0.5 if layout.scales_embedding else 1.0
    scale = float(getattr(model, "embed_scale", 1.0)) / theirs
    if scale != 1.0:
        if tied:
            state["lm_head.weight"], tied = state["wte.weight"].clone(), False
        state["wte.weight"] = state["wte.weight"] * scale
        if cfg.embed_scale_positions and "wpe.weight" in state:  # Derf's (wte + wpe)·s: the positions too
            state["wpe.weight"] = state["wpe.weight"] * scale * theirs
    return state, tied


def export_hf(model: nn.Module, cfg: ModelConfig, out: str | Path, tokenizer_from: Path | None = None,
              char_vocab: list[str] | None = None, mask_token: str | None = None, byte_level: bool = False) -> Path:
    """Write `model` (of `cfg`) to the new directory `out` in its Hugging Face layout (see the module doc).
    `byte_level`: `char_vocab` is the 256 bytes (`byte_vocab()`), and text is read as its UTF-8 bytes."""
    layout = layout_for(cfg)
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"{str(out)!r} exists and is not empty: export writes only into a new directory")
    from safetensors.torch import save_file

    state, tied = hf_state(model, cfg, layout)
    own_tokenizer = tokenizer_from is not None and has_tokenizer(tokenizer_from)
    chars = None if own_tokenizer or char_vocab is None else list(char_vocab)
    if chars is not None:
        state, cfg = with_added_tokens(state, cfg, layout)
        chars += ADDED
    tensors = {k: v.contiguous() for k, v in hf_tensors(cfg, state, layout).items()}
    if not tied and cfg.arch == "decoder":
        tensors[layout.head] = state["lm_head.weight"].contiguous()
    elif not tied:
        raise ValueError(f"an encoder whose head is not tied to its embedding has no place in the {layout.family} layout")
    out.parent.mkdir(parents=True, exist_ok=True)  # as `normlab train --out a/b` does
    tmp = Path(tempfile.mkdtemp(prefix=".normlab-export-", dir=out.parent))
    try:
        if own_tokenizer:
            for name in TOKENIZER_FILES:
                if (tokenizer_from / name).is_file():
                    shutil.copyfile(tokenizer_from / name, tmp / name)
            _fit_tokenizer_config(tmp, layout, cfg)
        elif chars is not None:
            _char_tokenizer(tmp, chars, mask_token, cfg, byte_level)
        # the tokenizer's special tokens, not the config class's defaults: those name characters here
        special = special_token_ids(tmp)
        layout.hf_config(cfg, tied, **special).save_pretrained(tmp)
        if cfg.arch == "decoder":  # the added tokens are the last ids
            added = list(range(cfg.vocab_size - len(ADDED), cfg.vocab_size)) if chars is not None else []
            generation_config(cfg, special, added).save_pretrained(tmp)
        save_file(tensors, tmp / "model.safetensors", metadata={"format": "pt"})
        with_umask(tmp)
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def with_added_tokens(state: dict[str, torch.Tensor], cfg: ModelConfig,
                      layout: Adapter) -> tuple[dict[str, torch.Tensor], ModelConfig]:
    """The state and config with `ADDED`'s rows after the model's own: zero embedding (and untied head) rows,
    and where the layout writes a head bias (a masked LM's), −1e4 there, so that an added token is never
    predicted and every other logit is unchanged."""
    n, rows = len(ADDED), cfg.vocab_size
    grown = dict(state)
    for key in ("wte.weight", "lm_head.weight"):
        if key in grown:
            grown[key] = torch.cat([grown[key], grown[key].new_zeros(n, grown[key].shape[1])])
    if cfg.arch == "encoder" and any(m.ours == "lm_head.bias" for m in layout.maps(cfg)):
        bias = grown.get("lm_head.bias", torch.zeros(rows))
        grown["lm_head.bias"] = torch.cat([bias, bias.new_full((n,), NEVER)])
    return grown, cfg.model_copy(update={"vocab_size": rows + n})


def generation_config(cfg: ModelConfig, special: dict[str, int | None], suppress: list[int]) -> Any:
    """A decoder's generation defaults: the tokenizer's special ids, and the added tokens suppressed. No
    `max_length`: with one, transformers 5 warns at every generate(max_new_tokens=…) that both are set; without
    it a generate() that names no length gives transformers' 20 new tokens, capped at the model's positions
    (max_position_embeddings, the block size it was trained at)."""
    from transformers import GenerationConfig

    return GenerationConfig(suppress_tokens=suppress or None, **special)


def has_tokenizer(directory: Path) -> bool:
    """Whether the directory holds a tokenizer's files (an imported model's, or an export's)."""
    return any((directory / f).is_file() for f in TOKENIZER_FILES)


def with_umask(directory: Path) -> None:
    """Give the export the user's umask, as a run directory has: `mkdtemp` makes its directory private (0700), so a
    server running as another user could not read the model."""
    mask = os.umask(0)
    os.umask(mask)
    directory.chmod(0o777 & ~mask)
    for path in directory.rglob("*"):
        path.chmod((0o777 if path.is_dir() else 0o666) & ~mask)


SPECIAL_TOKENS = ("bos", "eos", "pad")


def special_token_ids(directory: Path) -> dict[str, int | None]:
    """`bos_token_id`, `eos_token_id` and `pad_token_id` as the directory's tokenizer defines them, None where it
    has no such token (normlab's character vocabulary has [PAD] only). A config class's defaults (Llama's bos 1
    and eos 2, Gemma-2's pad 0, eos 1, bos 2) would name characters of the text: generate() would stop at a space."""
    none = {f"{name}_token_id": None for name in SPECIAL_TOKENS}
    if not has_tokenizer(directory):
        return none
    tok = read_tokenizer(directory)
    return {key: getattr(tok, key) for key in none}


def read_tokenizer(directory: Path):
    """The directory's tokenizer, read by transformers from its files (no remote code)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(directory, local_files_only=True, trust_remote_code=False)


def _fit_tokenizer_config(out: Path, layout: Adapter, cfg: ModelConfig) -> None:
    """A copied tokenizer made to fit the layout it now serves: it sends only the inputs the model reads (a BERT
    tokenizer's token_type_ids into XLM's forward, which embeds them as tokens, moved MiniLM's embeddings by up to
    2.7), a class name transformers 4 and 5 both load, the block size as its longest input (a BPE tokenizer's
    1e30 let a batch run past the model's positions), and a pad token where it has none (its end-of-text token, on
    the left of a decoder's prompts), so batches pad."""
    path = out / "tokenizer_config.json"
    saved = json.loads(path.read_text("utf-8")) if path.is_file() else {}
    inputs = [name for name in saved.get("model_input_names") or layout.model_inputs if name in layout.model_inputs]
    fitted = {**saved, "model_input_names": inputs, "model_max_length": cfg.block_size}
    tok = read_tokenizer(out)
    if tok.pad_token is None and (tok.eos_token or tok.unk_token) is not None:
        fitted["pad_token"] = tok.eos_token or tok.unk_token
        if cfg.arch == "decoder":
            fitted["padding_side"] = "left"
    if saved.get("tokenizer_class") == "TokenizersBackend":
        fitted["tokenizer_class"] = "PreTrainedTokenizerFast"
    path.write_text(json.dumps(fitted, indent=2, ensure_ascii=False), "utf-8")


def byte_vocab() -> list[str]:
    """The 256 bytes as the characters a byte-level tokenizer writes them with (GPT-2's bytes_to_unicode: the
    printable bytes as themselves, the rest shifted past 255), in byte order: id b is byte b, as normlab's
    byte tokenizer reads text."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = iter(range(256, 512))
    return [chr(b) if b in printable else chr(next(shifted)) for b in range(256)]


def _char_tokenizer(out: Path, chars: list[str], mask_token: str | None, cfg: ModelConfig,
                    byte_level: bool = False) -> None:
    """normlab's characters (and `ADDED`) as a word-level tokenizer: every character alone, one unknown to the
    vocabulary as [UNK]; [PAD] on the left of a decoder's prompt (where generate() continues), a masked LM's
    mask token (the last id of its own) special. No token_type_ids: a layout that embeds them as tokens (XLM)
    would add one. `byte_level`: the text is first written as its UTF-8 bytes' characters (`byte_vocab`), and
    decoded back from them. The tokenizer class saved is PreTrainedTokenizerFast, which transformers 4 and 5 both
    load (5 writes its own name, TokenizersBackend, which 4.x does not know)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {ch: i for i, ch in enumerate(chars)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    every = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # every character alone
    if byte_level:
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                              use_regex=False), every])
        tok.decoder = decoders.ByteLevel()
    else:
        tok.pre_tokenizer = every
        tok.decoder = decoders.Fuse()  # characters join with nothing between them
    PreTrainedTokenizerFast(tokenizer_object=tok, mask_token=mask_token, unk_token=UNK, pad_token=PAD,
                            model_max_length=cfg.block_size, model_input_names=["input_ids", "attention_mask"],
                            padding_side="left" if cfg.arch == "decoder" else "right").save_pretrained(out)
    config = out / "tokenizer_config.json"
    saved = json.loads(config.read_text("utf-8"))
    config.write_text(json.dumps({**saved, "tokenizer_class": "PreTrainedTokenizerFast"}, indent=2), "utf-8")


__all__ = ["HFDirError", "export_hf", "layout_for", "special_token_ids"]
