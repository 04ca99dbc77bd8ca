"""One entry per layout normlab exports (`normlab.hf.export`): the model settings a run of it holds, and the
transformers class that loads it. `test_export.py` writes a tiny model of each and checks transformers' logits
against normlab's; `test_client.py` trains one and serves it through generate() and pipeline(). A new exportable
family is one entry here."""
from __future__ import annotations

ROPE = dict(norm="rmsnorm", positions="rope")
LAYOUTS = {
    "gpt2": (dict(scheme="pre", norm="layernorm", bias=True, gelu_approximate="tanh"), "AutoModelForCausalLM"),
    "llama": (dict(scheme="pre", mlp="swiglu", n_kv_head=2, tie_weights=False, **ROPE), "AutoModelForCausalLM"),
    "qwen3": (dict(scheme="pre", mlp="swiglu", qk_norm="per_head", d_head=16, **ROPE), "AutoModelForCausalLM"),
    "gemma2": (dict(scheme="sandwich", mlp="geglu", gelu_approximate="tanh", n_kv_head=2, d_head=16,
                    attn_softcap=5.0, logit_softcap=3.0, attn_scale=12 ** -0.5, **ROPE), "AutoModelForCausalLM"),
    "xlm": (dict(arch="encoder", scheme="post", norm="layernorm", embed_norm=True, bias=True), "AutoModelForMaskedLM"),
    "bert": (dict(arch="encoder", scheme="post", norm="layernorm", embed_norm=True, bias=True,
                  head_transform=True, head_bias=True), "AutoModelForMaskedLM"),
}
ENCODERS = tuple(name for name, (settings, _) in LAYOUTS.items() if settings.get("arch") == "encoder")
