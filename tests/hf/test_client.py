"""What a user of transformers meets: a run trained here, `normlab export`ed, then read with AutoTokenizer,
AutoModelForCausalLM.generate() and pipeline(). For every exportable decoder layout greedy generate() gives
exactly the text of `normlab sample --greedy`, a batch of prompts padded to one length gives each row its own
text, and generate() with no length stops at the block size; for the encoder layouts (BERT with its head
transform, XLM without) pipeline("fill-mask") gives normlab's argmax at the exported [MASK]. Any text
encodes. Tiny runs trained in the test; nothing is downloaded (HF_HUB_OFFLINE)."""
from __future__ import annotations

import json
import os
import warnings

import pytest
import torch
from typer.testing import CliRunner

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers reads it: a local directory, never the Hub
transformers = pytest.importorskip("transformers")

from normlab.cli import app  # noqa: E402
from normlab.data import corpus_of  # noqa: E402
from normlab.hf.export import layout_for  # noqa: E402
from normlab.hf.run import export_run  # noqa: E402
from normlab.rundir import load_model  # noqa: E402
from normlab.train import train  # noqa: E402
from tests.conftest import tiny_config  # noqa: E402
from tests.hf.layouts import ENCODERS, LAYOUTS  # noqa: E402

PROMPT, NEW, STEPS = "ROMEO:", 30, 300
SPECIAL_IDS = ("bos_token_id", "eos_token_id", "pad_token_id")


def _trained_and_exported(tmp_path, layout: str):
    """A run of `layout`'s settings and its export, which must land in that layout and name no character as a
    special token. 300 steps: greedy text then reads "The the the" (after 80 it was spaces or newlines only,
    which a generate() stopping at its first space, as with the Gemma-2 defaults, could still have matched)."""
    cfg = tiny_config(model={**LAYOUTS[layout][0], "block_size": 48},
                      train={"steps": STEPS, "lr": 1e-2, "batch_size": 16, "eval_interval": STEPS,
                             "ckpt_interval": STEPS, "untrained_margin": "off"},
                      diagnostics={"interval": "off", "layer_skip": False})
    assert layout_for(cfg.model).name == layout
    run = tmp_path / "run"
    assert train(cfg, str(run)).status == "completed"
    out = export_run(run, tmp_path / "hf")
    config = json.loads((out / "config.json").read_text())
    # a character run has no bos or eos; its pad is the [PAD] the export adds after [UNK], past the model's ids
    assert {k: config[k] for k in SPECIAL_IDS} == {**dict.fromkeys(SPECIAL_IDS), "pad_token_id": load_model(run).cfg.model.vocab_size + 1}
    return run, out


@pytest.mark.parametrize("layout", [name for name in LAYOUTS if name not in ENCODERS])
def test_generate_and_the_pipeline_continue_as_normlab_sample_does(tmp_path, layout, one_torch_thread):
    run, out = _trained_and_exported(tmp_path, layout)
    result = CliRunner().invoke(app, ["sample", str(run), "--prompt", PROMPT, "--greedy", "--max-new-tokens", str(NEW)])
    assert result.exit_code == 0, result.output
    ours = result.output.removesuffix("\n")
    assert ours.startswith(PROMPT) and len(ours) == len(PROMPT) + NEW
    assert " " in ours[len(PROMPT):] and len(set(ours[len(PROMPT):])) >= 4  # words: the check can fail

    tok = transformers.AutoTokenizer.from_pretrained(out, local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(out, local_files_only=True, trust_remote_code=False)
    with torch.no_grad():
        ids = model.generate(**tok(PROMPT, return_tensors="pt"), max_new_tokens=NEW, do_sample=False)
    assert ids.shape[1] == len(PROMPT) + NEW  # no token of the text stopped it
    assert tok.decode(ids[0]) == ours

    pipe = transformers.pipeline("text-generation", model=str(out), tokenizer=str(out))
    assert pipe(PROMPT, max_new_tokens=NEW, do_sample=False)[0]["generated_text"] == ours

    # a batch of prompts of unequal length, padded on the left with the real [PAD]: each row its text alone
    prompts = [PROMPT, "JULIET: O", "Be"]
    alone = [pipe(p, max_new_tokens=NEW, do_sample=False)[0]["generated_text"] for p in prompts]
    batch = tok(prompts, return_tensors="pt", padding=True)
    assert (batch["attention_mask"] == 0).any()  # the check can fail: there is padding
    with torch.no_grad():
        rows = model.generate(**batch, max_new_tokens=NEW, do_sample=False)
    assert tok.batch_decode(rows, skip_special_tokens=True) == alone
    assert [r[0]["generated_text"] for r in pipe(prompts, max_new_tokens=NEW, do_sample=False, batch_size=3)] == alone

    # no length given: transformers' 20 new tokens, never past the block size the model was trained at
    assert tok.model_max_length == 48 and model.generation_config.max_length is None  # no max_length, no warning
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers' advice to name max_new_tokens
        assert model.generate(**tok(PROMPT, return_tensors="pt"), do_sample=False).shape[1] == len(PROMPT) + 20
        assert model.generate(**tok(PROMPT * 5, return_tensors="pt"), do_sample=False).shape[1] == 48
    # any text encodes: a character the corpus never had is [UNK], which generation never produces
    unk = tok("ROMEO: 2024 ☃")["input_ids"]
    assert tok.unk_token_id in unk and tok.unk_token_id not in rows


@pytest.mark.parametrize("layout", ENCODERS)
def test_fill_mask_on_an_encoder_export_gives_normlabs_argmax(tmp_path, layout, one_torch_thread):
    run, out = _trained_and_exported(tmp_path, layout)
    loaded = load_model(run)
    chars, mask_id = corpus_of(loaded.cfg).tokenizer, loaded.cfg.model.vocab_size - 1  # MASK follows the text's
    text, at = "ROMEO: What is", 3
    ids = chars.encode(text)
    with torch.no_grad():
        ours = loaded.model.eval()(torch.tensor([ids[:at] + [mask_id] + ids[at + 1:]]))[0][0, at].argmax().item()

    pipe = transformers.pipeline("fill-mask", model=str(out), tokenizer=str(out), top_k=1)
    assert pipe.tokenizer.mask_token == "[MASK]" and pipe.tokenizer.mask_token_id == mask_id
    (best,) = pipe(text[:at] + "[MASK]" + text[at + 1:])
    assert best["token"] == ours and best["token_str"] == chars.decode([ours])
