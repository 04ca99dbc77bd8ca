"""`export_hf`: a normlab model of each exportable layout written as a Hugging Face directory, loaded by
`transformers.AutoModel*.from_pretrained` (no remote code), must give normlab's logits within 1e-4; the
placements with no layout are refused in one line."""
from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from normlab.hf.convert import import_hf  # noqa: E402
from normlab.hf.export import export_hf, layout_for  # noqa: E402
from normlab.nn import ModelConfig, build_model  # noqa: E402
from tests.hf.layouts import LAYOUTS  # noqa: E402

TOL = 1e-4
TINY = dict(vocab_size=71, block_size=32, n_layer=2, n_head=4, d_model=32)
# each layout (tests/hf/layouts.py), and variants of three: Xiong's √d-scaled embedding, Gemma-2 at its default
# attention scale, XLM's head with a bias
LAYOUTS = {**LAYOUTS,
           "gpt2-xiong": (dict(scheme="pre", norm="layernorm", init="xiong"), "AutoModelForCausalLM"),
           "gemma2-unscaled": (dict(scheme="sandwich", norm="rmsnorm", positions="rope", mlp="geglu"),
                               "AutoModelForCausalLM"),
           "xlm-head-bias": (dict(arch="encoder", scheme="post", norm="layernorm", embed_norm=True, bias=True,
                                  head_bias=True), "AutoModelForMaskedLM")}


def _model(settings):
    torch.manual_seed(0)
    model = build_model(ModelConfig(**TINY, **settings)).eval()
    with torch.no_grad():  # move norms and biases off their init, so that a swapped one would show
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    return model


@pytest.mark.parametrize("case", list(LAYOUTS))
def test_transformers_loads_the_export_with_the_same_logits(tmp_path, case):
    """The model's own ids give its logits; the two ids a character vocabulary gains ([UNK], [PAD]) come
    after them, and a masked LM never predicts them."""
    settings, auto = LAYOUTS[case]
    model = _model(settings)
    assert layout_for(model.cfg).name == case.split("-")[0]
    export_hf(model, model.cfg, tmp_path / "out", char_vocab=[chr(32 + i) for i in range(71)])
    hf = getattr(transformers, auto).from_pretrained(tmp_path / "out", local_files_only=True,
                                                     trust_remote_code=False).eval()
    assert hf.config.vocab_size == 71 + 2
    ids = torch.randint(0, 71, (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = hf(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
        got = model(ids)[0]
    assert (got - out[..., :71]).abs().max().item() <= TOL
    if model.cfg.arch == "encoder":
        assert out[..., 71:].max().item() <= -1e3
    # and back: the exported directory imports to the same function
    back = import_hf(tmp_path / "out").model
    with torch.no_grad():
        again = back(ids)[0]
    assert (again[..., :71] - got).abs().max().item() <= TOL


def test_the_character_vocabulary_travels_as_a_tokenizer(tmp_path):
    model = _model(LAYOUTS["gpt2"][0])
    chars = ["\n", " ", "!"] + [chr(c) for c in range(ord("A"), ord("A") + 68)]
    export_hf(model, model.cfg, tmp_path / "out", char_vocab=chars)
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "out", local_files_only=True)
    ids = tok("AB C!\nA", add_special_tokens=False)["input_ids"]
    assert ids == [chars.index(c) for c in "AB C!\nA"]
    assert tok.decode(ids) == "AB C!\nA"
    # any text encodes: a character the corpus never had is [UNK], a token the vocabulary has
    assert tok.unk_token == "[UNK]" and tok("A2é")["input_ids"] == [chars.index("A"), 71, 71]
    assert (tok.pad_token, tok.pad_token_id, tok.model_max_length) == ("[PAD]", 72, 32)
    assert tok.bos_token is None and tok.eos_token is None  # one stream of characters: no document marks


def test_a_masked_lms_mask_token_travels_with_its_id(tmp_path):
    model = _model(LAYOUTS["bert"][0])
    chars = [chr(32 + i) for i in range(70)] + ["[MASK]"]
    export_hf(model, model.cfg, tmp_path / "out", char_vocab=chars, mask_token="[MASK]")
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "out", local_files_only=True)
    assert tok.mask_token == "[MASK]" and tok.mask_token_id == 70
    assert tok("a[MASK]b", add_special_tokens=False)["input_ids"] == [chars.index("a"), 70, chars.index("b")]


@pytest.mark.parametrize("settings, named", [
    (dict(scheme="post"), "scheme 'post'"), (dict(scheme="deepnorm"), "scheme 'deepnorm'"),
    (dict(scheme="mix"), "scheme 'mix'"), (dict(scheme="pre", norm="rmsnorm"), "exportable: gpt2"),
    (dict(scheme="pre", logit_softcap=30.0), "logit_softcap"), (dict(scheme="pre", head_bias=True), "head_bias"),
    (dict(scheme="pre", norm="rmsnorm", positions="rope", mlp="swiglu", rope_fraction=0.5), "rope_fraction")])
def test_a_placement_without_a_layout_is_refused_in_one_line(settings, named):
    cfg = ModelConfig(**TINY, **settings)
    with pytest.raises(ValueError, match=named) as e:
        layout_for(cfg)
    assert "\n" not in str(e.value) and "llama" in str(e.value) and "bert" in str(e.value)


def test_export_never_writes_into_a_directory_it_did_not_make(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("keep")
    model = _model(LAYOUTS["gpt2"][0])
    with pytest.raises(ValueError, match="not empty"):
        export_hf(model, model.cfg, tmp_path / "out")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["mine.txt"]


@pytest.mark.parametrize("case", list(LAYOUTS))
def test_special_token_ids_are_the_tokenizers_own_or_null(tmp_path, case):
    """bos/eos/pad in config.json: for normlab's characters no bos or eos and the added [PAD] (a config class's
    defaults would name '!', ' ' or '\\n' there), and the ids an imported tokenizer defines as special tokens."""
    import json

    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    settings, _ = LAYOUTS[case]
    model = _model(settings)
    chars = ["\n", " ", "!"] + [chr(c) for c in range(ord("A"), ord("A") + 68)]
    export_hf(model, model.cfg, tmp_path / "chars", char_vocab=chars)
    config = json.loads((tmp_path / "chars" / "config.json").read_text())
    assert [config[f"{k}_token_id"] for k in ("bos", "eos", "pad")] == [None, None, 72]  # [PAD], after [UNK]

    specials = {"<pad>": 68, "<s>": 69, "</s>": 70}  # the last ids of a 71-token vocabulary
    tok = Tokenizer(models.WordLevel({**{c: i for i, c in enumerate(chars[:68])}, **specials}, unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                         pad_token="<pad>").save_pretrained(tmp_path / "tok")
    export_hf(model, model.cfg, tmp_path / "own", tokenizer_from=tmp_path / "tok")
    config = json.loads((tmp_path / "own" / "config.json").read_text())
    assert [config[f"{k}_token_id"] for k in ("bos", "eos", "pad")] == [69, 70, 68]
    loaded = transformers.AutoConfig.from_pretrained(tmp_path / "own", local_files_only=True)
    assert (loaded.bos_token_id, loaded.eos_token_id, loaded.pad_token_id) == (69, 70, 68)


def test_an_export_makes_its_parents_and_takes_the_users_umask(tmp_path):
    import os
    import stat

    model = _model(LAYOUTS["gpt2"][0])
    old = os.umask(0o022)
    try:
        out = export_hf(model, model.cfg, tmp_path / "exports" / "nested" / "x", char_vocab=[chr(32 + i) for i in range(71)])
    finally:
        os.umask(old)
    assert out.is_dir()  # its parents were made, as `normlab train --out a/b` makes them
    assert stat.S_IMODE(out.stat().st_mode) == 0o755  # not mkdtemp's 0700: a server as another user reads it
    assert {stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()} == {0o644}
    assert (out / "model.safetensors").is_file()
