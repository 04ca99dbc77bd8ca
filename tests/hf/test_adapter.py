"""One adapter per Hugging Face family: a toy family declared once, in this file, is imported and exported
with no other edit (CONTRIBUTING's recipe), every map reads back what it writes, and the CLI's help and
import's refusals come from the registry."""
from __future__ import annotations

import contextlib
import re
import json
from pathlib import Path

import pytest
import torch
import typer
from safetensors.torch import load_file

from normlab.cli import app
from normlab.hf.adapter import (ADAPTERS, CONV1D, GATE_UP, NEOX_QKV, ONE_PLUS, QKV, SAME, Adapter, Map, adapter,
                                exportable_text, importable_text, same)
from normlab.hf.convert import MISSING, UnsupportedModel, import_hf
from normlab.hf.export import export_hf, layout_for
from normlab.hf.families import by_model_type
from normlab.nn import ModelConfig, build_model

TINY = dict(vocab_size=71, block_size=32, n_layer=2, n_head=4, d_model=32)


class ToyConfig(dict):
    """What export needs of a transformers config: save_pretrained(directory) writes config.json."""

    def save_pretrained(self, directory):
        (Path(directory) / "config.json").write_text(json.dumps(self))


class Toy(Adapter):
    """A Pre-LN RMSNorm decoder with learned positions and a GELU MLP, a layout no real family has, under
    tensor names of its own."""

    family, model_types, exportable = "Toy", ("toy_rms",), True
    summary = "Pre-LN RMSNorm decoder, learned positions, GELU MLP (a test's toy)"
    facts = dict(arch="decoder", scheme="pre", norm="rmsnorm", positions="learned", mlp="gelu", final_norm=True,
                 norm_bias=False, bias=False)
    embedding, prefixes, block = "tok.weight", ("net.", ""), "layer.{}."

    def settings(self, hf, heads_in_checkpoint):
        return dict(vocab_size=hf.get("vocab"), block_size=hf.get("context"), n_layer=hf.get("layers"),
                    n_head=hf.get("heads"), d_model=hf.get("width"), tie_weights=hf.get("tied"))

    def hf_config(self, cfg, tied, **special):
        return ToyConfig(model_type="toy_rms", vocab=cfg.vocab_size, context=cfg.block_size, layers=cfg.n_layer,
                         heads=cfg.n_head, width=cfg.d_model, tied=tied, **special)

    def tensor_map(self, cfg):
        return [*same("wte", "tok"), *same("wpe", "pos"), *same("final_norm", "norm")]

    def block_map(self, cfg):
        return [*same("attn.in_norm", "norm1"), *same("mlp.in_norm", "norm2"),
                Map("attn.sublayer.qkv.weight", ("q.weight", "k.weight", "v.weight"), QKV), *same("attn.sublayer.proj", "o"),
                *same("mlp.sublayer.fc", "up", CONV1D), *same("mlp.sublayer.proj", "down")]


@contextlib.contextmanager
def registered(cls):
    adapter(cls)
    try:
        yield
    finally:
        ADAPTERS.unregister(cls.model_types[0])


def _toy_model():
    torch.manual_seed(0)
    model = build_model(ModelConfig(**TINY, scheme="pre", norm="rmsnorm")).eval()
    with torch.no_grad():  # norms off their init, so that a swapped one would show
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    return model


def test_a_family_declared_in_one_place_is_imported_and_exported(tmp_path):
    model = _toy_model()
    with pytest.raises(ValueError, match="no Hugging Face layout"):
        layout_for(model.cfg)
    with registered(Toy):
        assert layout_for(model.cfg).name == "toy_rms"
        assert "Toy (toy_rms)" in importable_text() and "Toy" in exportable_text()
        export_hf(model, model.cfg, tmp_path / "toy")
        saved = set(load_file(tmp_path / "toy" / "model.safetensors"))
        assert {"net.tok.weight", "net.layer.1.q.weight", "net.layer.1.up.weight"} <= saved
        imported = import_hf(tmp_path / "toy")
        assert imported.family == "Toy" and set(imported.used) == saved and not imported.ignored
        ids = torch.randint(0, 71, (2, 20), generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            assert torch.allclose(imported.model(ids)[0], model(ids)[0], atol=1e-6)
    assert "toy_rms" not in by_model_type() and "Toy" not in importable_text()
    with pytest.raises(UnsupportedModel, match="model_type 'toy_rms' cannot be imported"):
        import_hf(tmp_path / "toy")


@pytest.mark.parametrize("codec", [SAME, CONV1D, ONE_PLUS, QKV, GATE_UP, NEOX_QKV],
                         ids=["same", "conv1d", "one_plus", "qkv", "gate_up", "neox_qkv"])
def test_each_codec_reads_back_what_it_writes(codec):
    """Import reads a map forward and export backward: the two must be inverses, for the families import
    only (GPT-NeoX's head regrouping) as for the ones export writes."""
    cfg = ModelConfig(**TINY, n_kv_head=2, d_head=16, mlp="swiglu")
    rows = {QKV: (4 + 2 + 2) * 16, NEOX_QKV: 3 * 4 * 16}.get(codec, 48)
    ours = torch.randn(rows, 32, generator=torch.Generator().manual_seed(0))
    parts = codec.write(ours, cfg)
    assert torch.allclose(codec.read(parts, cfg), ours, rtol=0, atol=1e-6)  # (1 + w) − 1 rounds in fp32
    assert [p.shape for p in codec.write(codec.read(parts, cfg), cfg)] == [p.shape for p in parts]


def test_the_cli_help_names_every_family_from_the_registry():
    command = typer.main.get_command(app)
    importing, exporting = command.commands["import-hf"].help, command.commands["export"].help
    for _, each in ADAPTERS.items():
        assert each.family in importing and all(f"{t}" in importing for t in each.model_types)
        assert (each.family in exporting) == each.exportable


def test_what_is_missing_names_no_family_that_is_read():
    """A model type gets an adapter: its entry in MISSING must go (else the refusal would outlive the fix)."""
    assert not set(MISSING) & set(by_model_type())


def test_refusals_are_derived_from_the_facts():
    """No adapter writes a refusal: a setting its facts fix is refused at any other value, one its config
    carries (`free`) at none, and every other optional setting only away from its plain value."""
    llama = ADAPTERS.get("llama")
    cfg = ModelConfig(**TINY, scheme="pre", norm="rmsnorm", positions="rope", mlp="swiglu")
    assert llama.refusal(cfg) is None
    assert llama.refusal(cfg.model_copy(update={"n_kv_head": 2})) is None  # free
    assert llama.refusal(cfg.model_copy(update={"scheme": "sandwich"})) == "scheme = 'sandwich' (it needs 'pre')"
    assert llama.refusal(cfg.model_copy(update={"attn_softcap": 5.0})) == "attn_softcap = 5.0 (it needs None)"
    assert llama.refusal(cfg.model_copy(update={"bias": True})) == "bias = true (the Llama layout has no biases)"


def test_contributings_recipe_names_files_that_exist():
    """The recipe's "Files touched" line names real files (a family module stands for its folder)."""
    root = Path(__file__).resolve().parents[2]
    text = (root / "CONTRIBUTING.md").read_text().split("## A new Hugging Face family")[1].split("\n## ")[0]
    files = re.findall(r"`((?:src|tests)/[^`]+)`", text.split("```")[0])
    assert "src/normlab/hf/families/<family>.py" in files and "tests/hf/test_import.py" in files
    for path in files:
        assert (root / path.replace("<family>.py", "")).exists(), path


def test_the_export_refusal_names_every_difference_from_the_nearest_layout():
    """Old: only the first difference was named, so fixing it met the next refusal."""
    from normlab.nn import ModelConfig

    cfg = ModelConfig(vocab_size=50, d_model=32, n_head=4, n_layer=2, block_size=16, scheme="pre", arch="encoder",
                      norm="rmsnorm", positions="rope")
    with pytest.raises(ValueError) as info:
        layout_for(cfg)
    said = str(info.value)
    assert "nearest, xlm, differs in 5:" in said
    for difference in ("scheme = 'pre' (it needs 'post')", "norm = 'rmsnorm' (it needs 'layernorm')",
                       "positions = 'rope' (it needs 'learned')", "final_norm = True (it needs False)",
                       "embed_norm = False (it needs True)"):
        assert difference in said
