"""`normlab import-hf` writes an ordinary run directory (check, diagnose, train --set train.init_from accept
it); a by-name init_from swaps its placement; `normlab export` writes it back for transformers."""
from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

transformers = pytest.importorskip("transformers")

from normlab.cli import app  # noqa: E402
from normlab.hf.convert import import_hf  # noqa: E402

runner = CliRunner()
CHARS = sorted(set("\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"))


def _gpt2_with_tokenizer(path):
    """A tiny GPT-2 over tiny Shakespeare's characters, with a tokenizer.json, as a user's directory."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=len(CHARS) + 1, n_embd=32, n_layer=2, n_head=4, n_positions=32)
    transformers.GPT2LMHeadModel(config).save_pretrained(path)
    tok = Tokenizer(models.WordLevel({**{c: i for i, c in enumerate(CHARS)}, "<unk>": len(CHARS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>").save_pretrained(path)
    return path


def test_import_check_swap_train_and_export(tmp_path):
    source = _gpt2_with_tokenizer(tmp_path / "hf")
    run = tmp_path / "run"
    result = runner.invoke(app, ["import-hf", str(source), "--out", str(run)])
    assert result.exit_code == 0, result.output
    assert "imported GPT-2" in result.output
    assert (run / "checkpoint.pt").is_file() and (run / "tokenizer" / "tokenizer.json").is_file()
    assert runner.invoke(app, ["check", str(run)]).exit_code == 0

    # the same weights under RMSNorm: a by-name init_from keeps every tensor but the norms' biases
    swapped = tmp_path / "swapped"
    result = runner.invoke(app, ["train", str(run / "config.toml"), "-o", str(swapped), "--set",
                                 f"train.init_from={run}", "--set", "train.init_from_match=by_name", "--set",
                                 "model.norm=rmsnorm", "--set", "model.norm_bias=false", "--set", "train.steps=3",
                                 "--set", "train.warmup_steps=0",
                                 "--set", "train.eval_interval=3", "--set", "train.eval_batches=1", "--set",
                                 "train.batch_size=2", "--set", "diagnostics.interval=off", "--set",
                                 "diagnostics.layer_skip=false", "--set", "train.untrained_margin=off"])
    assert result.exit_code == 0, result.output
    swap = json.loads((swapped / "run.json").read_text())["swap"]
    assert swap["new"] == [] and len(swap["left_behind"]) == 5  # ln_1, ln_2 × 2 layers, ln_f: their biases
    assert all(k.endswith("norm.bias") for k in swap["left_behind"])

    # Pre-LN → Post-LN by the stream: each post-norm takes the gains of the pre-norm at its point
    post = tmp_path / "post"
    result = runner.invoke(app, ["train", str(run / "config.toml"), "-o", str(post), "--set", f"train.init_from={run}",
                                 "--set", "train.init_from_match=by_stream", "--set", "model.scheme=post", "--set",
                                 "model.final_norm=false", "--set", "train.steps=1", "--set", "train.warmup_steps=0",
                                 "--set", "train.eval_interval=1",
                                 "--set", "train.eval_batches=1", "--set", "train.batch_size=2", "--set",
                                 "diagnostics.interval=off", "--set", "diagnostics.layer_skip=false", "--set",
                                 "train.untrained_margin=off"])
    assert result.exit_code == 0, result.output
    swap = json.loads((post / "run.json").read_text())["swap"]
    assert swap["moved"]["blocks.0.attn.post_norm.weight"] == "blocks.0.mlp.in_norm.weight"
    assert swap["moved"]["blocks.1.mlp.post_norm.bias"] == "final_norm.bias" and len(swap["moved"]) == 8
    assert swap["left_behind"] == ["blocks.0.attn.in_norm.bias", "blocks.0.attn.in_norm.weight"]

    out = tmp_path / "exported"
    result = runner.invoke(app, ["export", str(swapped), "--format", "hf", "--out", str(out)])
    assert result.exit_code == 2 and "scheme 'pre'" in result.output and "llama" in result.output  # no such layout
    result = runner.invoke(app, ["export", str(run), "--format", "hf", "--out", str(out)])
    assert result.exit_code == 0, result.output
    hf = transformers.AutoModelForCausalLM.from_pretrained(out, local_files_only=True).eval()
    ids = torch.tensor([[3, 5, 8, 13, 21, 34]])
    with torch.no_grad():
        want = hf(input_ids=ids).logits
        got = import_hf(source).model(ids)[0]
    assert (want - got).abs().max().item() <= 1e-4
    tok = transformers.AutoTokenizer.from_pretrained(out, local_files_only=True)
    assert tok.decode(tok("To be", add_special_tokens=False)["input_ids"]) == "To be"


def test_import_refuses_a_directory_that_is_not_its_own(tmp_path):
    source = _gpt2_with_tokenizer(tmp_path / "hf")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.txt").write_text("mine")
    result = runner.invoke(app, ["import-hf", str(source), "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "not empty" in result.output
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["notes.txt"]


def test_block_size_cuts_learned_positions_exactly(tmp_path):
    source = _gpt2_with_tokenizer(tmp_path / "hf")
    result = runner.invoke(app, ["import-hf", str(source), "--out", str(tmp_path / "run"), "--block-size", "16"])
    assert result.exit_code == 0, result.output
    from normlab.rundir import load_model

    short = load_model(tmp_path / "run").model
    ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8]])
    with torch.no_grad():
        assert torch.equal(short(ids)[0], import_hf(source).model(ids)[0])
    assert short.wpe.weight.shape[0] == 16


def test_a_swap_moves_each_norm_to_the_same_point_of_the_stream():
    """Post-LN → Pre-LN: the norm after sub-layer k becomes the norm before sub-layer k + 1, the last one the
    final norm; the first sub-layer's input norm is new (Post-LN has none before it)."""
    from normlab.nn import ModelConfig, build_model
    from normlab.train.init_from import _moved_norms

    tiny = dict(vocab_size=50, block_size=16, n_layer=2, n_head=2, d_model=16, arch="encoder", bias=True)
    post = build_model(ModelConfig(**tiny, scheme="post"))
    pre = build_model(ModelConfig(**tiny, scheme="pre"))
    source, ours = post.state_dict(), pre.state_dict()
    kept = {k: k for k, v in ours.items() if k in source and source[k].shape == v.shape}
    moved = _moved_norms(post, pre, source, ours, kept)
    assert moved == {
        "blocks.0.mlp.in_norm.weight": "blocks.0.attn.post_norm.weight",
        "blocks.0.mlp.in_norm.bias": "blocks.0.attn.post_norm.bias",
        "blocks.1.attn.in_norm.weight": "blocks.0.mlp.post_norm.weight",
        "blocks.1.attn.in_norm.bias": "blocks.0.mlp.post_norm.bias",
        "blocks.1.mlp.in_norm.weight": "blocks.1.attn.post_norm.weight",
        "blocks.1.mlp.in_norm.bias": "blocks.1.attn.post_norm.bias",
        "final_norm.weight": "blocks.1.mlp.post_norm.weight",
        "final_norm.bias": "blocks.1.mlp.post_norm.bias",
    }


def test_import_hf_refuses_a_bad_directory_in_one_line_and_writes_nothing(tmp_path):
    source = _gpt2_with_tokenizer(tmp_path / "hf")
    weights = source / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])  # truncated
    result = runner.invoke(app, ["import-hf", str(source), "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "model.safetensors" in result.output and "truncated" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_from_hf_at_the_package_root(tmp_path):
    import normlab

    source = _gpt2_with_tokenizer(tmp_path / "hf")
    model = normlab.from_hf(source)
    assert model.cfg.scheme == "pre" and model.cfg.norm == "layernorm"


def test_a_parallel_blocks_norms_read_the_blocks_input():
    """GPT-NeoX's two norms both read the block's input: one point of the stream, not two."""
    from normlab.nn import ModelConfig, build_model

    model = build_model(ModelConfig(vocab_size=50, block_size=16, n_layer=2, n_head=2, d_model=16, scheme="parallel",
                                    scheme_options={"shared_norm": 0.0}))
    assert model.stream_norms() == {"blocks.0.attn.in_norm": 0, "blocks.0.mlp.in_norm": 0,
                                    "blocks.1.attn.in_norm": 2, "blocks.1.mlp.in_norm": 2, "final_norm": 4}


def test_a_swap_may_change_the_placement_not_the_model(tmp_path):
    source = _gpt2_with_tokenizer(tmp_path / "hf")
    run = tmp_path / "run"
    assert runner.invoke(app, ["import-hf", str(source), "--out", str(run)]).exit_code == 0
    result = runner.invoke(app, ["train", str(run / "config.toml"), "-o", str(tmp_path / "deeper"), "--set",
                                 f"train.init_from={run}", "--set", "train.init_from_match=by_name", "--set",
                                 "model.n_layer=3", "--set", "train.steps=1", "--set",
                                 "train.warmup_steps=0"])
    assert result.exit_code == 2 and "model.n_layer = 2 there, 3 here" in result.output


def test_init_from_match_needs_init_from():
    from normlab.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="init_from_match = 'by_stream'.*init_from, which is unset"):
        load_config(None, ["train.init_from_match=by_stream"])


def test_a_directory_without_a_tokenizer_is_said_so_on_import_and_on_diagnose(tmp_path):
    """No silent fallback: import-hf and diagnose each print one line naming the tokenizer they fell back to and
    write it (run.json's hf_import, diagnose's JSON)."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=len(CHARS), n_embd=32, n_layer=2, n_head=4, n_positions=32)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path / "hf")  # weights and config, no tokenizer
    result = runner.invoke(app, ["import-hf", str(tmp_path / "hf"), "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "note: tokenizer: none in the directory" in result.output
    record = json.loads((tmp_path / "run" / "run.json").read_text())["hf_import"]
    assert record["tokenizer"].startswith("none in the directory")
    result = runner.invoke(app, ["diagnose", str(tmp_path / "hf"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["tokenizer"].startswith("none in the directory: the text read as UTF-8 bytes")
    assert "note: tokenizer none in the directory" in result.stderr
