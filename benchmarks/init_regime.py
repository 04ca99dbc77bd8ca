"""What each init recipe keeps when the width changes, measured: a model at our width beside the same model at its
paper's width, at init, on one batch of real text.

    python benchmarks/init_regime.py --out benchmarks/results/init_regime.json          # every row
    python benchmarks/init_regime.py --max-width 1024                                    # the rows a test rebuilds

For each recipe (`normlab.nn.init.INIT_RECIPES`) and each frontier arm that has an embedding scalar, it builds the
4-block model of the CPU presets (the frontier's RoPE/SwiGLU decoder for the frontier arms) at width 64 and at the
paper's width, with the same seed and tokens, and measures by forward hooks:

- `stream_rms`: the residual stream's RMS where the first block reads it (the embedding, times its scalar where
  the arm has one: DyT's and Derf's `shared_scale`);
- `sublayer_rms`: each sub-layer's output RMS (attention, MLP, in order), before it joins the stream;
- `gain`: each block's output RMS over its input RMS.

`ratio` is ours over the paper's for the stream, the sub-layers' mean and the blocks' mean gain: a recipe keeps its
paper's regime when all three lie in [1/KEPT, KEPT]. `gpt2-fixed-std`, GPT-2's 0.02 carried as a number, is a row that does not;
DyT keeps its stream but not its sub-layers: its own α0 width table (1.0 at width ≤ 1024, 0.8/0.2 at 4096) sets
tanh's slope apart at the two widths, as its paper prescribes.
The paper's widths: GPT-2 small's 768 (gpt2, Derf's nanoGPT), LLaMA-7B's 4096 (llama: DyT's trainer, OLMo 2),
the fairseq Transformer base's 512 (xiong). Not a timing: it may run beside other work.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

import torch

from normlab.jsonsafe import write_json

OURS = 64
KEPT = 1.25  # ours / paper's within [0.8, 1.25]: the regime kept
LAYERS, BATCH, SEED = 4, 4, 0
# recipe or arm: (the paper's width, the model's overrides on the CPU presets' base, where the value comes from)
ROWS: dict[str, tuple[int, dict[str, Any], str]] = {
    "gpt2": (768, {"model.init": "gpt2"}, "GPT-2 small, n_embd 768 (openai/gpt-2 src/model.py L9)"),
    "gpt2-fixed-std": (768, {"model.init": "gpt2-fixed-std"}, "GPT-2 small, n_embd 768, σ = 0.02 at every width"),
    "llama": (4096, {"model.init": "llama"}, "LLaMA-7B, emb_dim 4096 (foundation-model-stack/fms-fsdp "
                                             "fms_fsdp/utils/config_utils.py L50-56; OLMo2-7B-stage1.yaml L6)"),
    "xiong": (512, {"model.init": "xiong"}, "the fairseq Transformer base, d 512 (Xiong et al. 2020 §3.2)"),
}
ARM_WIDTH = {"F2": (4096, "DyT's LLaMA-7B, emb_dim 4096"), "F3": (768, "Derf's nanoGPT GPT-2, n_embd 768")}


def frontier_rows() -> dict[str, tuple[int, dict[str, Any], str]]:
    """The frontier arms DyT and Derf fail without (their embedding scalar) and their baselines, with the model
    overrides the frontier claims train them with (`DyTParityF2.ARMS`, `DERF_ARMS`)."""
    from normlab.study.claims.frontier import DERF_ARMS, DyTParityF2

    arms = {"F2 DyT": ("F2", DyTParityF2.ARMS["DyT"]), "F2 RMSNorm": ("F2", DyTParityF2.ARMS["RMSNorm"]),
            "F3 Derf": ("F3", DERF_ARMS["derf"]), "F3 LayerNorm": ("F3", DERF_ARMS["layernorm"])}
    return {label: (ARM_WIDTH[cid][0], {"frontier": True, **{k: v for k, v in o.items() if k.startswith("model.")}},
                    ARM_WIDTH[cid][1]) for label, (cid, o) in arms.items()}


def residual_rows() -> dict[str, tuple[int, dict[str, Any], str]]:
    """The residual-stream arms of F9–F13 as the residual preset trains them: under `gpt2` (GPT-2 small's regime,
    768) with their schemes' own constants, which do not depend on the width (HC's maps, AttnRes's zero queries)
    or carry it themselves (mHC's φ, σ·√(4096/C): measured against DeepSeek-V4's 4096 in tests/nn/test_residual.py),
    and F13's GPT-2 arms (Derf's nanoGPT, 768)."""
    from normlab.study.claims.residual import ATTNRES, DYT_REGIME, HC, MHC, SPANNORM

    arms = {"F10 HC": HC, "F10 mHC": MHC, "F11 AttnRes": ATTNRES, "F12 SpanNorm": SPANNORM,
            "F13 DyT": DYT_REGIME["DyT"], "F13 LayerNorm": DYT_REGIME["LayerNorm"]}
    return {label: (768, {"frontier": True, **{k: v for k, v in o.items() if k.startswith("model.")}},
                    "GPT-2 small, n_embd 768: the `gpt2` recipe these arms train under")
            for label, o in arms.items()}


def build(overrides: dict[str, Any], width: int):
    """The model at `width` (heads of 64 at a paper's width, 4 at ours), `LAYERS` blocks, seed `SEED`."""
    from normlab.config import derive
    from normlab.nn import build_model
    from normlab.study.presets import PRESETS

    frontier = overrides.get("frontier", False)
    preset = PRESETS["frontier" if frontier else "standard"]
    heads = 4 if width == OURS else width // 64
    cfg = derive(preset.config, {**{k: v for k, v in overrides.items() if k != "frontier"},
                                 "model.d_model": width, "model.n_head": heads, "model.n_layer": LAYERS,
                                 "train.seed": SEED})
    torch.manual_seed(SEED)
    return build_model(cfg.model.model_copy(update={"vocab_size": 65})), cfg


def rms(x: torch.Tensor) -> float:
    return x.float().pow(2).mean().sqrt().item()


@torch.no_grad()
def measure(overrides: dict[str, Any], width: int, tokens: torch.Tensor) -> dict[str, Any]:
    model, cfg = build(overrides, width)
    model.eval()
    seen: dict[str, list[float]] = {"block_in": [], "block_out": [], "sublayer": []}
    def on_block(module, args, out) -> None:  # a hook that returns nothing leaves the output as it is
        seen["block_in"].append(rms(args[0]))
        seen["block_out"].append(rms(out))

    def on_sublayer(module, args, out) -> None:
        seen["sublayer"].append(rms(out[0] if isinstance(out, tuple) else out))

    hooks = []
    for block in model.blocks:
        hooks.append(block.register_forward_hook(on_block))
        hooks += [residual.sublayer.register_forward_hook(on_sublayer) for residual in block.sublayers()]
    model(tokens[:, :cfg.model.block_size])
    for h in hooks:
        h.remove()
    return {"width": width, "init_record_std": model.init_record.get("std"),
            "stream_rms": seen["block_in"][0], "sublayer_rms": seen["sublayer"],
            "gain": [o / i for i, o in zip(seen["block_in"], seen["block_out"])]}


def tokens_of_corpus() -> torch.Tensor:
    """One batch of the shipped corpus (its first characters): the same tokens at every width."""
    from normlab.data import corpus_of
    from normlab.study.presets import PRESETS

    corpus = corpus_of(PRESETS["standard"].config)
    return corpus.train[: BATCH * 64].long().view(BATCH, 64)


def compare(ours: dict[str, Any], paper: dict[str, Any]) -> dict[str, Any]:
    stream = ours["stream_rms"] / paper["stream_rms"]
    sub = statistics.fmean(ours["sublayer_rms"]) / statistics.fmean(paper["sublayer_rms"])
    gain = statistics.fmean(ours["gain"]) / statistics.fmean(paper["gain"])
    return {"stream": stream, "sublayers": sub, "gain": gain, "stream_kept": 1 / KEPT <= stream <= KEPT,
            "kept": all(1 / KEPT <= r <= KEPT for r in (stream, sub, gain))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="write the JSON here")
    ap.add_argument("--max-width", type=int, default=None, help="leave out rows whose paper's width is above this")
    args = ap.parse_args(argv)
    tokens = tokens_of_corpus()
    rows = {**ROWS, **frontier_rows(), **residual_rows()}
    out: dict[str, Any] = {"ours": OURS, "layers": LAYERS, "batch": BATCH, "seed": SEED, "kept_within": KEPT,
                           "rows": {}}
    for name, (width, overrides, why) in rows.items():
        if args.max_width and width > args.max_width:
            continue
        ours, paper = measure(overrides, OURS, tokens), measure(overrides, width, tokens)
        out["rows"][name] = {"paper_width": width, "paper_width_source": why,
                             "overrides": {k: v for k, v in overrides.items() if k != "frontier"},
                             "ours": ours, "paper": paper, "ratio": compare(ours, paper)}
    text = write_json(out, args.out)
    if not args.out:
        sys.stdout.write(text)
    for name, row in out["rows"].items():
        r = row["ratio"]
        print(f"{name:16s} stream {row['ours']['stream_rms']:.3f} vs {row['paper']['stream_rms']:.3f} "
              f"({r['stream']:.2f}x), sub-layers {r['sublayers']:.2f}x, gain {r['gain']:.2f}x, kept {r['kept']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
