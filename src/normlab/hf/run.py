"""An imported Hugging Face model as an ordinary normlab run directory, and a run written back out.

`normlab import-hf PATH --out RUN` writes RUN as a run that has finished at step 0: config.toml (the
model as normlab reads it, its tokenizer), run.json (what the import used and left out), checkpoint.pt
(the weights) and tokenizer/ (the model's own tokenizer files). `normlab train --set train.init_from=RUN`
fine-tunes it, `diagnose` and `check` read it as any run. `normlab export RUN --format hf --out DIR` writes
a run (imported or trained here) back in its Hugging Face layout.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import torch

from normlab.version import __version__
from normlab.config import RunConfig
from normlab.hf.convert import import_hf
from normlab.hf.export import TOKENIZER_FILES, byte_vocab, export_hf
from normlab.rundir import load_model
from normlab.rundir.layout import RunDir

TOKENIZER_DIR = "tokenizer"


def import_run(source: str | Path, out: str | Path, block_size: int | None = None) -> tuple[RunDir, dict]:
    """Write the normlab run of the Hugging Face directory `source` into the new run directory `out`.

    `block_size` shortens a model's context (learned positions past it are dropped; rotary ones need none):
    a sequence no longer than it is computed exactly as before, and a CPU fine-tune fits in memory.
    """
    source, run = Path(source), RunDir(out)
    imported = import_hf(source)
    cfg, state = imported.config, imported.model.state_dict()
    if block_size is not None:
        if not 1 <= block_size <= cfg.block_size:
            raise ValueError(f"--block-size {block_size} must be between 1 and the model's {cfg.block_size}")
        cfg = cfg.model_copy(update={"block_size": block_size})
        if "wpe.weight" in state:
            state = {**state, "wpe.weight": state["wpe.weight"][:block_size]}
    if run.exists():
        raise ValueError(f"{str(out)!r} already holds a run; choose a new directory")
    has_tokenizer = (source / "tokenizer.json").is_file()
    data = {"tokenizer": "hf", "tokenizer_dir": str((run.path / TOKENIZER_DIR).resolve())} if has_tokenizer else {}
    config = RunConfig.model_validate({"model": cfg.model_dump(), "data": data})
    run.create()
    if has_tokenizer:
        (run.path / TOKENIZER_DIR).mkdir(exist_ok=True)
        for name in TOKENIZER_FILES:
            if (source / name).is_file():
                shutil.copyfile(source / name, run.path / TOKENIZER_DIR / name)
    record = {"imported_from": str(source.resolve()), **imported.record()}
    record["tokenizer"] = ("the directory's own (tokenizer/)" if has_tokenizer else
                           "none in the directory (no tokenizer.json): the run reads text with normlab's character "
                           "vocabulary, which is not the model's; give the directory its tokenizer.json to keep its own")
    if not has_tokenizer:  # a fallback is said, never silent: in the output and in run.json
        record["notes"] = [*record.get("notes", []), f"tokenizer: {record['tokenizer']}"]
    run.write_config(config)
    run.write_meta({"config_hash": config.hash(), "normlab": __version__, "hf_import": record,
                    "model": {"n_params": sum(p.numel() for p in imported.model.parameters())}})
    run.save_checkpoint({"model": {k: v.contiguous() for k, v in state.items()}, "step": 0})
    run.write_status("completed", step=0, reason=f"imported from {source}")
    return run, record


def export_run(target: str | Path, out: str | Path) -> Path:
    """Write the run directory (or checkpoint) `target` as a Hugging Face directory `out`."""
    loaded = load_model(target, "cpu")
    data = loaded.cfg.data
    tokenizer_from = Path(data.tokenizer_dir) if data.tokenizer == "hf" and data.tokenizer_dir else None
    own = loaded.run.path / TOKENIZER_DIR if loaded.run else None
    if tokenizer_from is not None and not tokenizer_from.is_dir() and own is not None and own.is_dir():
        tokenizer_from = own  # an imported run that moved: its config's absolute path is gone, its tokenizer/ is here
    if tokenizer_from is not None and not (tokenizer_from / "tokenizer.json").is_file():
        raise ValueError(f"the run's tokenizer ({tokenizer_from / 'tokenizer.json'}) is gone: export would write a "
                         "model without one; if the run moved, point data.tokenizer_dir in its config.toml at its tokenizer/")
    if data.tokenizer == "hf" and tokenizer_from is not None:
        loaded.tokenizer()  # refuses a tokenizer.json that is not the one the run trained with (corpus.json)
    chars, mask = None, None
    if data.tokenizer == "byte":  # id b is byte b: a byte-level tokenizer of the 256 bytes
        chars = byte_vocab()
    if data.tokenizer == "char":
        tok = loaded.tokenizer()  # the characters as trained (corpus.json), not as the corpus file has them now
        chars = [tok.decode([i]) for i in range(tok.vocab_size)]
    if chars is not None and loaded.cfg.model.arch == "encoder":  # the masked LM's MASK follows the text's tokens
        chars, mask = chars + ["[MASK]"], "[MASK]"
    with torch.no_grad():
        return export_hf(loaded.model.eval(), loaded.cfg.model, out, tokenizer_from=tokenizer_from,
                         char_vocab=chars, mask_token=mask, byte_level=data.tokenizer == "byte")
