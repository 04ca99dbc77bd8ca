"""`normlab diagnose TARGET`: per-layer forward metrics, gradients and layer-skip ΔL of any model.

TARGET is a normlab run directory (or its checkpoint.pt), or a Hugging Face transformers
model directory, loaded locally (no network). Each model is measured on one batch of
text with its own objective:

- normlab GPT and HF causal LMs: next-token cross-entropy;
- HF masked LMs: masked-token cross-entropy (15 % of tokens, fixed seed);
- HF encoders without a head (e.g. sentence-transformers' MiniLM): in-batch InfoNCE
  between the mean-pooled embeddings of the two halves of each text window (scale 20,
  as sentence-transformers' MultipleNegativesRankingLoss), since that is how they are trained.
"""
from __future__ import annotations

import math
import os
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from normlab.data import corpus_of
from normlab.data.corpus import read_text
from normlab.data.vocab import Vocabulary
from normlab.diagnostics import stats
from normlab.diagnostics.skip import SKIP_MOST, layer_skip
from normlab.diagnostics.streams import Design, Views, design_of, measures, tapped
from normlab.diagnostics.structure import detect_placement, find_layers, find_stacks, first_tensor, layer_input
from normlab.hf.files import CONFIG, WEIGHTS, HFDirError, check_weights, read_config
from normlab.rundir import load_model

BATCH, WINDOW, MAX_CHARS = 8, 128, 200_000
MLM_FRACTION, INFONCE_SCALE = 0.15, 20.0
OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert", "longformer")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "tokenizer.model")


@dataclass
class Subject:
    """A model ready to be measured: how to run it, and its objective on one fixed batch."""

    name: str
    kind: str  # "normlab" | "hf"
    model: nn.Module
    forward: Callable[[], Any]
    loss: Callable[[], torch.Tensor]
    objective: str
    mask: torch.Tensor | None = None  # (B, T) real tokens
    known: dict[str, Any] = field(default_factory=dict)  # facts read from a config, not detected
    chance: tuple[float, str] | None = None  # the loss of a model that knows nothing: layer-skip's scale


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def load_subject(target: str | Path, text: str | None = None, init: bool = False, device: str = "cpu",
                 dtype: str = "float32") -> Subject:
    """The model TARGET names: a normlab run directory or checkpoint file, or a Hugging Face directory, on
    `device` (auto: CUDA when present) in `dtype` (float32, bfloat16, float16; statistics are taken in fp32).

    A normlab run without a checkpoint is refused unless `init` asks for its untrained model.
    """
    from normlab.device import resolve_device

    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; valid: {', '.join(DTYPES)}")
    dev, path = resolve_device(device), Path(target)
    if not path.exists():
        raise ValueError(f"{str(target)!r} does not exist")
    run_dir = path.parent if path.is_file() else path
    subject = None
    if (run_dir / "config.toml").is_file():
        subject = _normlab_subject(path, text, init, dev, DTYPES[dtype])
    elif path.is_dir() and any((path / name).is_file() for name in (CONFIG, *(n for pair in WEIGHTS for n in pair))):
        subject = _hf_subject(path, text, dev, DTYPES[dtype])
    if subject is not None:
        subject.known["device"], subject.known["dtype"] = str(dev), dtype
        return subject
    raise ValueError(f"{str(target)!r} is neither a normlab run directory (config.toml), a checkpoint file "
                     "inside one, nor a Hugging Face model directory (config.json)")


def _normlab_subject(path: Path, text: str | None, init: bool, device: torch.device, dtype: torch.dtype) -> Subject:
    loaded = load_model(path, device, require_checkpoint=not init)
    cfg, model = loaded.cfg, loaded.model.to(dtype=dtype).eval()
    kept = loaded.provenance()
    if kept is not None and cfg.data.path and kept.corpus != cfg.data.path and not Path(cfg.data.path).exists():
        # a relative corpus path read from another working directory: the run kept where its corpus is
        cfg = cfg.model_copy(update={"data": cfg.data.model_copy(update={"path": kept.corpus})})
    tokenizer = loaded.tokenizer()  # the ids as trained
    corpus = corpus_of(cfg) if text is None else None
    changed = kept.differs_from(corpus) if kept is not None and corpus is not None else None
    if changed:  # its val split would be other text, or its ids shifted: never measured silently
        raise ValueError(f"{changed}: its validation text is not the one it held out; restore the corpus, or "
                         "measure on a text of your own with --text FILE")
    ids = corpus.val if text is None else torch.tensor(tokenizer.encode(read_text(text)[1]), dtype=torch.long)
    x, y = _windows(ids, cfg.model.block_size + 1)
    objective = Vocabulary.of(tokenizer).objective(cfg.model.arch)
    if cfg.model.arch != "decoder":  # the run's own objective on the same windows (masks from a fixed seed)
        x, y = objective.corrupt(x, torch.Generator().manual_seed(0))
    x, y = x.to(device), y.to(device)
    known = {"placement": cfg.model.scheme, "normalizer": cfg.model.norm, "final_norm": cfg.model.resolved_final_norm(),
             "architecture": cfg.model.arch, "step": loaded.step,
             "weights": f"{loaded.checkpoint.path.name} (step {loaded.step})" if loaded.checkpoint
             else f"untrained: the init of seed {cfg.train.seed} (--init)"}
    what = "next-token cross-entropy" if cfg.model.arch == "decoder" else f"{objective.name} cross-entropy"
    vocab = tokenizer.vocab_size
    return Subject(str(path), "normlab", model, lambda: model(x), lambda: model(x, y)[1], what, known=known,
                   chance=(math.log(vocab), f"uniform over {vocab} tokens"))


def _windows(ids: torch.Tensor, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """BATCH evenly spaced windows of `length` tokens → (inputs, next-token targets)."""
    if len(ids) < length + BATCH:
        raise ValueError(f"the text has {len(ids)} tokens; at least {length + BATCH} are needed")
    starts = torch.linspace(0, len(ids) - length, BATCH).long()
    w = torch.stack([ids[s:s + length] for s in starts])
    return w[:, :-1], w[:, 1:]


def _hf_subject(path: Path, text: str | None, device: torch.device, dtype: torch.dtype) -> Subject:
    # the directory is checked before transformers reads it: a missing or broken config.json, a truncated or
    # foreign weight file, a planted pickle, each end in one line naming the file
    model_type = read_config(path)["model_type"]
    weights = check_weights(path)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import transformers
    except ImportError:
        raise ValueError("diagnosing a Hugging Face model needs `transformers`: pip install -e '.[hf]'") from None
    # transformers' own progress bars, notices and tokenizer warnings stay out of normlab's output
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    # never run code from a directory a user points at: no remote code, even where transformers would ask
    config = _hf_config(transformers, path, model_type)
    arch = (config.architectures or [""])[0]
    if arch.endswith("ForCausalLM") or arch.endswith("LMHeadModel"):
        auto, objective = transformers.AutoModelForCausalLM, "causal"
    elif arch.endswith("ForMaskedLM"):
        auto, objective = transformers.AutoModelForMaskedLM, "masked"
    elif arch.endswith("ForConditionalGeneration") and not getattr(config, "is_encoder_decoder", False):
        auto, objective = transformers.AutoModelForImageTextToText, "causal"  # a text+vision LM: GLM-5-Next
    elif arch.endswith("ForConditionalGeneration"):  # T5, BART: an encoder–decoder
        auto, objective = transformers.AutoModelForSeq2SeqLM, "seq2seq"
    else:
        auto, objective = transformers.AutoModel, "infonce"
    model = _hf_model(auto, path, weights).to(device, dtype).eval()
    text_config = config.get_text_config()  # a text+vision model keeps its LM's sizes there (GLM-5-Next)
    ids, special, read_as = _hf_ids(path, text_config, text)
    length = min(WINDOW, getattr(text_config, "max_position_embeddings", None)
                 or getattr(text_config, "n_positions", WINDOW))
    if config.model_type in OFFSET_POSITIONS:  # positions start after the padding index (RoBERTa: 514 = 512 + 2)
        length = min(length, config.max_position_embeddings - config.pad_token_id - 1)
    inputs, _ = _windows(ids, length - len(special) + 1)
    if special:  # e.g. [CLS] … [SEP] for BERT
        inputs = torch.cat([torch.full((BATCH, 1), special[0]), inputs, torch.full((BATCH, 1), special[-1])], 1)
    inputs = inputs.contiguous().to(device)  # a slice of the windows; HF's seq2seq loss views its labels flat
    mask = torch.ones_like(inputs)
    loss = _hf_objective(model, objective, inputs, mask, config)
    forward = loss if objective == "seq2seq" else (lambda: model(input_ids=inputs, attention_mask=mask))
    described = {"causal": "next-token cross-entropy", "masked": "masked-token cross-entropy (15 %)",
                 "seq2seq": "cross-entropy of reconstructing each window from itself (source = target)",
                 "infonce": "in-batch InfoNCE between mean-pooled halves of each window (scale 20)"}[objective]
    chance = ((math.log(BATCH), f"one right pair of {BATCH}") if objective == "infonce" else
              (math.log(text_config.vocab_size), f"uniform over {text_config.vocab_size} tokens"))
    return Subject(str(path), "hf", model, forward, loss, described, mask=mask,
                   known={"architecture": arch or type(model).__name__, "model_type": config.model_type,
                          "tokenizer": read_as},
                   chance=chance)


def _hf_config(transformers, path: Path, model_type: str):
    """The directory's config, read by transformers from its own classes only (a model_type it does not know
    would need the directory's code, which normlab never runs)."""
    file = path / CONFIG
    if model_type not in transformers.CONFIG_MAPPING:
        raise HFDirError(file, f"model_type {model_type!r} is not one transformers {transformers.__version__} "
                               "knows, and normlab never runs a directory's own code")
    try:
        return transformers.AutoConfig.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    except (ValueError, KeyError, TypeError, AttributeError, OSError) as e:
        raise HFDirError(file, f"transformers cannot read it ({_first_line(e)})") from None


def _hf_model(auto, path: Path, weights: list[Path]) -> nn.Module:
    """The model with its checkpoint loaded; a tensor whose shape is not the config's is refused in one line
    (transformers would raise pointing at a report it logs, which normlab keeps quiet)."""
    where = weights[0] if len(weights) == 1 else path
    try:
        model, info = auto.from_pretrained(path, local_files_only=True, trust_remote_code=False,
                                           output_loading_info=True, ignore_mismatched_sizes=True)
    except (RuntimeError, ValueError, KeyError, TypeError, OSError) as e:
        raise HFDirError(where, f"transformers cannot load it ({_first_line(e)})") from None
    mismatched = sorted(info.get("mismatched_keys") or [])
    if mismatched:
        name, found, wanted = mismatched[0]
        raise HFDirError(where, f"{len(mismatched)} tensor(s) do not match {CONFIG}'s shapes: {name} is "
                                f"{list(found)} in the checkpoint, {list(wanted)} by the config")
    missing = sorted(info.get("missing_keys") or [])
    if missing:  # transformers would draw them at random and measure that: never a silent half-model
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise HFDirError(where, f"{len(missing)} tensor(s) the {CONFIG} model needs are not in the checkpoint "
                                f"(transformers would draw them at random): {missing[0]}{more}")
    return model


def _first_line(e: Exception) -> str:
    return next((line.strip() for line in str(e).splitlines() if line.strip()), type(e).__name__)


NO_TOKENIZER = "none in the directory: the text read as UTF-8 bytes modulo the vocabulary ({vocab})"


def _hf_ids(path: Path, config, text: str | None) -> tuple[torch.Tensor, list[int], str]:
    """Token ids of the text with the model's tokenizer, its special ids, and how the text was read: the
    directory's tokenizer, or, where it has none, bytes modulo the vocabulary (`NO_TOKENIZER`, said in the output
    and in what diagnose writes, never silent)."""
    import transformers

    _, body = read_text(text)
    body = body[-MAX_CHARS:] if text is None else body[:MAX_CHARS]  # default: the val end of tiny Shakespeare
    has_tokenizer = any((path / f).is_file() for f in TOKENIZER_FILES)
    tok = (transformers.AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=False)
           if has_tokenizer else None)
    if tok is None:
        return (torch.tensor(list(body.encode("utf-8")), dtype=torch.long) % config.vocab_size, [],
                NO_TOKENIZER.format(vocab=config.vocab_size))
    ids = tok(body, add_special_tokens=False)["input_ids"]
    special = [t for t in (tok.cls_token_id, tok.sep_token_id) if t is not None]
    return torch.tensor(ids, dtype=torch.long), special if len(special) == 2 else [], "the directory's own"


def _hf_objective(model, objective: str, inputs, mask, config) -> Callable[[], torch.Tensor]:
    if objective == "seq2seq":  # the decoder reads the labels shifted right, after the model's start token
        start = _decoder_start(config)
        shifted = torch.cat([torch.full_like(inputs[:, :1], start), inputs[:, :-1]], 1)
        return lambda: model(input_ids=inputs, attention_mask=mask, decoder_input_ids=shifted, labels=inputs).loss
    if objective == "causal":
        return lambda: model(input_ids=inputs, attention_mask=mask, labels=inputs).loss
    if objective == "masked":
        g = torch.Generator().manual_seed(0)
        chosen = (torch.rand(inputs.shape, generator=g) < MLM_FRACTION).to(inputs.device)
        chosen[:, 0] = chosen[:, -1] = False
        labels = torch.where(chosen, inputs, torch.full_like(inputs, -100))
        mask_id = getattr(config, "mask_token_id", None) or 0  # a config without a tokenizer may name none
        masked = torch.where(chosen, torch.full_like(inputs, mask_id), inputs)
        return lambda: model(input_ids=masked, attention_mask=mask, labels=labels).loss

    def infonce() -> torch.Tensor:
        hidden = model(input_ids=inputs, attention_mask=mask).last_hidden_state  # (B, T, C)
        half = hidden.shape[1] // 2
        a = F.normalize(hidden[:, :half].mean(1), dim=-1)
        b = F.normalize(hidden[:, half:].mean(1), dim=-1)
        return F.cross_entropy(INFONCE_SCALE * a.float() @ b.float().T, torch.arange(len(a), device=a.device))
    return infonce


def _decoder_start(config) -> int:
    """The decoder's start token: the config's, else its pad token (T5 starts from pad; a minimal T5Config names
    no decoder_start_token_id, and HF's own shift then fails), else 0."""
    for name in ("decoder_start_token_id", "pad_token_id"):
        value = getattr(config, name, None)
        if value is not None:
            return int(value)
    return 0


def diagnose(subject: Subject, skip: bool = True) -> dict[str, Any]:
    """Placement, normalizer, and per-layer residual RMS, contribution, angular distance, BI, grads, ΔL."""
    model = subject.model
    (layers_name, layers), running = _stacks_that_run(model, subject.forward)
    structure = detect_placement(model, subject.forward, (layers_name, layers))
    design = design_of(model, getattr(model, "config", None))
    io, inputs, loss, taps = _layer_io(subject, layers, design)
    rows = _layer_rows(layers, io, subject.mask)
    model.zero_grad(set_to_none=True)
    result: dict[str, Any] = {
        "target": subject.name, "kind": subject.kind, **subject.known,
        "placement": subject.known.get("placement", structure["placement"]),
        "normalizer": subject.known.get("normalizer", structure["normalizer"]),
        "final_norm": subject.known.get("final_norm", structure["final_norm"]),
        "qk_norm": structure["qk_norm"],
        **({"placement_seen": structure["placement_seen"]}
           if "placement" not in subject.known and "placement_seen" in structure else {}),
        "detected": {k: structure[k] for k in ("placement", "normalizer", "final_norm", "embed_norm", "qk_norm")},
        "n_layer": len(layers), "layers_module": layers_name,
        "objective": subject.objective, "loss": loss.item(),
        "final_stream_rms": stats.rms(io[len(layers) - 1][1], subject.mask),
        "residual": measures(design, taps, inputs),
        "layers": rows,
    }
    stacks = [s for s in find_stacks(model) if s in running]  # not a vision tower a text pass never runs
    if len(stacks) > 1:  # an encoder–decoder: each stack's placement on its own (the rows above are the longest's)
        result["stacks"] = {name: {k: v for k, v in detect_placement(model, subject.forward, (name, layers)).items()
                                   if k in ("placement", "placement_seen", "normalizer", "final_norm",
                                            "embed_norm", "qk_norm", "n_layer")}
                            for name, layers in stacks}
    if skip:
        with torch.no_grad():
            ablation = layer_skip(layers, lambda: subject.loss().item(), chance=subject.chance, most=SKIP_MOST)
        for row, delta in zip(rows, ablation["delta_loss"]):
            row["skip_delta_loss"] = delta
        result["effective_depth"] = {k: ablation[k] for k in ("effective_depth", "effective_depth_fraction",
                                                               "threshold", "relative_to", "judged")}
    return result


@torch.no_grad()
def _stacks_that_run(model: nn.Module, forward: Callable[[], Any]):
    """The stack to measure, and every stack the objective's forward pass runs (a text pass never runs a vision
    tower). The one measured is the longest (`find_layers`), unless the pass never runs it (a vision tower deeper
    than the language model): then the longest that runs."""
    chosen = find_layers(model)
    ran: set[int] = set()
    stacks = [chosen, *find_stacks(model)]
    with ExitStack() as hooks:
        for _, stack in stacks:
            hooks.callback(stack[0].register_forward_hook(lambda m, a, o: ran.add(id(m))).remove)
        forward()
    running = [s for s in stacks if id(s[1][0]) in ran]
    if not running:
        raise ValueError(f"{type(model).__name__}: the forward pass of its objective runs none of its stacks of layers")
    return (chosen if chosen in running else max(running, key=lambda s: len(s[1]))), running


def _layer_io(subject: Subject, layers, design: Design):
    """Each layer's input and output in one forward pass of the subject's loss, as the one stream they stand for
    (`streams.Views`: n streams or a stack of sources summed), each layer's raw input, the loss after its
    backward pass (the layers' gradients are left in place for `_layer_rows`), and what the residual mixing
    showed (`streams.Taps`)."""
    model, views = subject.model, Views(design)
    io: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    inputs: dict[int, torch.Tensor] = {}
    with ExitStack() as hooks:
        for i, layer in enumerate(layers):
            def tap(mod, args, kwargs, out, i=i):
                x = layer_input(args, kwargs).detach()
                inputs[i] = x
                io[i] = tuple(v.detach() for v in views(mod, args, kwargs, x, first_tensor(out).detach()))
            hooks.callback(layer.register_forward_hook(tap, with_kwargs=True).remove)
        taps = hooks.enter_context(tapped(model, design))
        model.zero_grad(set_to_none=True)
        loss = subject.loss()
        loss.backward()
    return io, inputs, loss, taps


def _layer_rows(layers, io: dict[int, tuple[torch.Tensor, torch.Tensor]], m) -> list[dict[str, Any]]:
    """One row per layer: the stream's RMS into it, what it adds, how far it turns the stream, its gradient."""
    rows = []
    for i, layer in enumerate(layers):
        x, out = io[i]
        grads = [p.grad.float().pow(2).sum() for p in layer.parameters() if p.grad is not None]
        rows.append({
            "layer": i,
            "residual_rms": stats.rms(x, m),
            "contribution_ratio": stats.norm_ratio(out - x, x, m),
            "cosine": stats.mean_cosine(x, out, m),
            "angular_distance": stats.angular_distance(x, out, m),
            "block_influence": stats.block_influence(x, out, m),
            "grad_norm": torch.stack(grads).sum().sqrt().item() if grads else None,
        })
    return rows
