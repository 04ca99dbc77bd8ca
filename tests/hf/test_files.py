"""normlab.hf.files reads a Hugging Face directory or says in one line which file is wrong and how; through
`normlab diagnose` each bad input exits 2 with that line, no traceback, and writes nothing."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load, load_file, save_file
from typer.testing import CliRunner

from normlab.cli import app
from normlab.hf.files import HFDirError, check_weights, read_config, read_weights, weight_files

transformers = pytest.importorskip("transformers", reason="test extra: pip install -e '.[test]'")

runner = CliRunner()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A tiny random GPT-2 saved with safetensors."""
    path = tmp_path_factory.mktemp("gpt2")
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=128, n_positions=64,
                                     bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(config).save_pretrained(path, safe_serialization=True)
    return path


@pytest.fixture
def model_dir(pristine, tmp_path) -> Path:
    return Path(shutil.copytree(pristine, tmp_path / "model"))


class Planted:
    """Unpickled by a full unpickler, it would create the file it names: the test sees whether it ran."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


def no_config(d: Path) -> None:
    (d / "config.json").unlink()


def broken_json(d: Path) -> None:
    (d / "config.json").write_text('{"model_type": "gpt2", ')


def unknown_type(d: Path) -> None:
    config = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps(config | {"model_type": "not-a-family"}))


def wrong_shapes(d: Path) -> None:  # the config says width 64; the checkpoint holds width 32
    config = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps(config | {"n_embd": 64}))


def truncated(d: Path) -> None:
    data = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(data[:len(data) // 2])


def header_too_large(d: Path) -> None:  # what made safetensors raise "header too large" in a 51-line traceback
    (d / "model.safetensors").write_bytes(b"\xff" * 64)


def pickle_as_safetensors(d: Path) -> None:  # (read from bytes: load_file maps the file it would overwrite)
    torch.save(load((d / "model.safetensors").read_bytes()), d / "model.safetensors")


def planted_pickle(d: Path) -> None:
    (d / "model.safetensors").unlink()
    torch.save({"transformer.wte.weight": Planted(d.parent / "ran")}, d / "pytorch_model.bin")


BAD = {  # damage: (the file the message names, words of the problem)
    "no config.json": (no_config, ".", "no config.json"),
    "config not JSON": (broken_json, "config.json", "not valid JSON"),
    "unknown model_type": (unknown_type, "config.json", "model_type 'not-a-family' is not one transformers"),
    "shapes not the config's": (wrong_shapes, "model.safetensors", "do not match config.json's shapes"),
    "truncated safetensors": (truncated, "model.safetensors", "truncated"),
    "garbage safetensors": (header_too_large, "model.safetensors", "truncated or not safetensors"),
    "pickle as safetensors": (pickle_as_safetensors, "model.safetensors", "is a pickle"),
    "planted pickle": (planted_pickle, "pytorch_model.bin", "refused"),
}


def listing(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_one_line_naming_the_file_and_writes_nothing(model_dir, case):
    damage, file, problem = BAD[case]
    damage(model_dir)
    before = listing(model_dir.parent)
    page = model_dir.parent / "page.html"
    result = runner.invoke(app, ["diagnose", str(model_dir), "--no-skip", "--html", str(page)], terminal_width=400)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    named = model_dir if file == "." else model_dir / file
    assert len(lines) == 1 and lines[0].startswith(f"error: {named}: "), result.output
    assert problem in lines[0] and "Traceback" not in result.output
    assert listing(model_dir.parent) == before and not page.exists()
    assert not (model_dir.parent / "ran").exists()  # the planted pickle's code never ran


def test_read_weights_returns_the_checkpoint_and_names_its_files(model_dir):
    want = load_file(model_dir / "model.safetensors")
    assert read_config(model_dir)["model_type"] == "gpt2"
    assert weight_files(model_dir) == check_weights(model_dir) == [model_dir / "model.safetensors"]
    got = read_weights(model_dir)
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)


def test_shards_and_bin_files_are_read_and_a_missing_shard_is_named(model_dir):
    tensors = load_file(model_dir / "model.safetensors")
    names = sorted(tensors)
    half = len(names) // 2
    (model_dir / "model.safetensors").unlink()
    shards = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
    for shard, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, model_dir / shard)
    index = {"metadata": {}, "weight_map": {k: shard for shard, keys in shards.items() for k in keys}}
    (model_dir / "model.safetensors.index.json").write_text(json.dumps(index))
    assert [p.name for p in weight_files(model_dir)] == sorted(shards)
    got = read_weights(model_dir)
    assert got.keys() == tensors.keys() and all(torch.equal(got[k], tensors[k]) for k in tensors)
    (model_dir / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(HFDirError, match=r"model\.safetensors\.index\.json: lists model-00002-of-00002"):
        read_weights(model_dir)
    for p in list(model_dir.glob("model*")):
        p.unlink()
    torch.save(tensors, model_dir / "pytorch_model.bin")
    got = read_weights(model_dir)
    assert got.keys() == tensors.keys() and all(torch.equal(got[k], tensors[k]) for k in tensors)
    (model_dir / "pytorch_model.bin").unlink()
    with pytest.raises(HFDirError, match=r": no weights: none of model\.safetensors"):
        weight_files(model_dir)


def test_config_must_be_an_object_naming_its_family(model_dir):
    (model_dir / "config.json").write_text("[1, 2]")
    with pytest.raises(HFDirError, match=r"config\.json: holds a JSON list, not an object"):
        read_config(model_dir)
    (model_dir / "config.json").write_text('{"n_layer": 2}')
    with pytest.raises(HFDirError, match=r"config\.json: names no model_type"):
        read_config(model_dir)


def test_a_planted_pickle_is_refused_by_read_weights_too_without_running(model_dir):
    planted_pickle(model_dir)
    with pytest.raises(HFDirError, match=r"pytorch_model\.bin: refused: .* asks to call .*open") as refused:
        read_weights(model_dir)
    assert "\n" not in str(refused.value) and not (model_dir.parent / "ran").exists()


def test_a_checkpoint_missing_a_tensor_is_refused_in_one_line(tmp_path):
    """transformers fills a missing tensor at random; diagnose must not measure that half-random model."""
    from safetensors.torch import load_file, save_file
    from typer.testing import CliRunner

    from normlab.cli import app

    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path / "m")
    state = load_file(tmp_path / "m" / "model.safetensors")
    del state["transformer.h.1.mlp.c_fc.weight"]
    save_file(state, tmp_path / "m" / "model.safetensors", metadata={"format": "pt"})
    result = CliRunner().invoke(app, ["diagnose", str(tmp_path / "m"), "--no-skip"])
    assert result.exit_code == 2
    assert "h.1.mlp.c_fc.weight" in result.output and "not in the checkpoint" in result.output
    assert "Traceback" not in result.output
