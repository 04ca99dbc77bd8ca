"""The cost figures the standard preset's settings quote, each measured side by side with its baseline in one
process (interleaved repeats, one thread, the median of the per-round ratios):

- a step at 32 tokens of context against 64: C8's narrow 32-layer models (`DEEP_CPU` in study/presets.py), the CPU
  presets' 4-layer base and their 12-layer depth cell (`CPU_CONTEXT`);
- AdamW's multi-tensor (foreach) update against the one-tensor loop on the standard base model
  (train/optim.py), and whether the two give the same weights bit for bit;
- encoding the packaged corpus with the char tokenizer's table lookup (data/corpus.py) against a Python loop
  per character, which every run of a study did before, and whether the ids are the same.

    python benchmarks/cpu_step_costs.py [--rounds 5] [--json benchmarks/results/cpu_step_costs_2core_cpu.json]
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from normlab.config import RunConfig, set_value, validate_config
from normlab.device import cpu_model
from normlab.nn.model import build_model
from normlab.study.presets import DEEP_CPU, PRESETS


def model_config(**overrides):
    raw = RunConfig().to_dict()
    for key, value in {**PRESETS["standard"].base, "model.vocab_size": 65, **overrides}.items():
        set_value(raw, key, value)
    return validate_config(raw)


def step_fn(model, optimizer, batch: int, context: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randint(0, 65, (batch, context), generator=g), torch.randint(0, 65, (batch, context), generator=g)

    def step():
        loss = model(x, y)[1]
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def timed(fn, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1000


def compare(steps: dict[str, callable], rounds: int, n: int) -> dict[str, dict]:
    for fn in steps.values():
        for _ in range(3):
            fn()
    ms = {k: [] for k in steps}
    for _ in range(rounds):
        for k, fn in steps.items():
            ms[k].append(timed(fn, n))
    return ms


# (what, overrides on the standard base): the models whose context the preset's settings quote
CONTEXT_MODELS = {
    "c8": ("32-layer, 32-wide Pre-LN step, batch 8 (C8, DEEP_CPU)", {**DEEP_CPU, "model.n_layer": 32}),
    "base": ("4-layer, 64-wide Pre-LN step, batch 12 (the CPU presets' base)", {}),
    "depth_cell": ("12-layer, 64-wide Pre-LN step, batch 12 (C5/C6's depth cell)", {"model.n_layer": 12}),
}


def context_cost(what: str, overrides: dict, rounds: int) -> dict:
    """One model's step at 32 tokens of context against 64, interleaved."""
    steps = {}
    for context in (64, 32):
        cfg = model_config(**{**overrides, "model.scheme": "pre", "model.block_size": context})
        model = build_model(cfg.model)
        steps[context] = step_fn(model, torch.optim.AdamW(model.parameters(), lr=1e-3), cfg.train.batch_size, context)
    ms = compare(steps, rounds, 10)
    ratio = statistics.median(a / b for a, b in zip(ms[32], ms[64]))
    return {"what": f"{what}: context 32 vs 64", "ms_64": statistics.median(ms[64]),
            "ms_32": statistics.median(ms[32]), "ratio_32_over_64": ratio}


def adamw_foreach(rounds: int) -> dict:
    cfg = model_config()
    torch.manual_seed(0)
    base = build_model(cfg.model)
    x = torch.randint(0, 65, (cfg.train.batch_size, cfg.model.block_size))
    states, steps = {}, {}
    for foreach in (False, True):
        model = copy.deepcopy(base)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, foreach=foreach)
        model(x, x)[1].backward()  # one set of gradients; the timed part is the update alone
        steps[foreach], states[foreach] = opt.step, model
    ms = compare(steps, rounds, 50)
    same = all(torch.equal(a, b) for a, b in zip(states[False].parameters(), states[True].parameters()))
    return {"what": "AdamW update of the standard base model (4 layers, 64 wide): foreach vs one tensor at a time",
            "ms_single": statistics.median(ms[False]), "ms_foreach": statistics.median(ms[True]),
            "ratio_foreach_over_single": statistics.median(a / b for a, b in zip(ms[True], ms[False])),
            "bit_identical": same}


def corpus_encoding(rounds: int) -> dict:
    """Every run loads its corpus: tiny Shakespeare's 1.1 M characters by the table lookup vs one by one."""
    from normlab.data.corpus import CharTokenizer, read_text

    text = read_text(None)[1]
    tok = CharTokenizer(text)
    # each to the tensor load_corpus keeps (the loop's list had to be converted too)
    ways = {"lookup": lambda: torch.as_tensor(tok.encode_known(text)[0], dtype=torch.long),
            "per_char": lambda: torch.tensor([tok.stoi[c] for c in text if c in tok.stoi], dtype=torch.long)}
    ms = compare(ways, rounds, 1)
    return {"what": "encoding tiny Shakespeare (char tokenizer) into a tensor: one table lookup vs a Python loop per "
                    "character",
            "ms_per_char": statistics.median(ms["per_char"]), "ms_lookup": statistics.median(ms["lookup"]),
            "ratio_lookup_over_per_char": statistics.median(a / b for a, b in zip(ms["lookup"], ms["per_char"])),
            "same_ids": torch.equal(ways["lookup"](), ways["per_char"]())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    out = {"cpu": cpu_model(), "torch": torch.__version__, "threads": 1, "rounds": args.rounds,
           "context": {k: context_cost(*v, args.rounds) for k, v in CONTEXT_MODELS.items()},
           "adamw_foreach": adamw_foreach(args.rounds), "corpus_encoding": corpus_encoding(args.rounds)}
    adam, enc = out["adamw_foreach"], out["corpus_encoding"]
    for c in out["context"].values():
        print(f"{c['what']}: {c['ms_32']:.1f} vs {c['ms_64']:.1f} ms ({c['ratio_32_over_64']:.2f}×)")
    print(f"AdamW update, foreach vs one tensor: {adam['ms_foreach']:.2f} vs {adam['ms_single']:.2f} ms "
          f"({adam['ratio_foreach_over_single']:.2f}×), bit-identical: {adam['bit_identical']}")
    print(f"corpus encoding, table lookup vs per character: {enc['ms_lookup']:.0f} vs {enc['ms_per_char']:.0f} ms "
          f"({enc['ratio_lookup_over_per_char']:.2f}×), same ids: {enc['same_ids']}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
