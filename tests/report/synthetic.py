"""Synthetic study output for the report tests: verdicts C1–C16, claim figures, run records, timings."""
from __future__ import annotations

import dataclasses

import math
import random

from normlab.config import validate_config
from normlab.study.claims import Figure, Series, Verdict
from normlab.study.records import RunRecord
from normlab.study.sections import general_sections

SCRIPT_TITLE = 'Post-LN needs warmup <script>alert("x")</script> & more'
VERDICTS = ["holds", "does not hold", "inconclusive"]


def claim_info() -> dict[str, dict]:
    info = {f"C{i}": {"title": f"Claim number {i}", "statement": f"Statement of claim {i}: ‖x_l‖ ~ O(l).",
                      "sources": "000, 001"} for i in range(1, 17)}
    info["C1"]["title"] = SCRIPT_TITLE
    return info


def verdicts() -> list[Verdict]:
    out = []
    for i in range(1, 17):
        settings = {"model.n_layer": 4, "train.lr": 3e-3, "train.warmup_steps": [0, 50], "schemes": ["post", "pre"]}
        details = {"divergence_rate": {"post": 0.5, "pre": 0.0}, "diff": 0.0123456, "se": float("nan"),
                   "tiny": 1.5e-7, "groups": [{"scheme": "post", "mean": 2.31, "n": 2},
                                              {"scheme": "pre", "mean": 2.25, "n": 2}],
                   "per_layer": [0.1 * k for k in range(20)], "note": "a | pipe"}
        if i == 4:  # groups by depth and scheme, as the depth claims write them: tables inside a table's cells
            def group(scheme: str, depth: int) -> dict:
                failed = 5 if scheme == "post" and depth == 16 else 0
                return {"setting": f"{scheme} · L {depth} · lr 0.003 · warmup 50", "mean_val_loss": 2.5 + depth / 100,
                        "sd": 0.01, "mean_ci95": [2.49, 2.51], "n_runs": 5, "n_trained": 5 - failed, "n_diverged": 0,
                        "n_failed_to_train": failed, "did_not_train_rate": failed / 5,
                        "did_not_train_ci95": [0.0, 0.4345], "two_mode": False}
            details["by_depth"] = {str(d): {s: group(s, d) for s in ("pre", "post", "deepnorm")} for d in (2, 4, 8, 16)}
        out.append(Verdict(f"C{i}", VERDICTS[i % 3], f"statistic of C{i}", 0.0421 * i if i != 5 else None,
                           2 + i % 2, settings, details, f"Summary of claim {i}: measured < expected & fine."))
    # C1 as a bundled claim judged under one init recipe and re-measured under the other (which disagrees)
    out[0] = dataclasses.replace(
        out[0], parts=[{"name": "Post-LN needs warmup", "verdict": "holds", "statistic": "penalty", "value": 0.257,
                        "interval": [0.081, 0.434], "test": "paired t over 5 seeds, 95 % interval",
                        "seeds": [0, 1, 2, 3, 4], "summary": "0.257 nats <b>paired</b>"},
                       {"name": "Pre-LN is barely affected", "verdict": "inconclusive", "statistic": "diff",
                        "value": 0.01, "interval": [-0.005, 0.031], "test": "TOST", "seeds": [0, 1, 2, 3],
                        "summary": ""}],
        interval=[0.081, 0.434], test="paired t over 5 seeds, 95 % interval", seeds=[0, 1, 2, 3, 4], init="xiong",
        init_dependent=True, other_init={"recipe": "gpt2", "verdict": "holds", "value": -0.01,
                                         "interval": [-0.05, 0.03], "reading": "", "summary": "", "parts": []})
    out[1] = dataclasses.replace(out[1], init="xiong", init_dependent=False, other_init={
        "recipe": "gpt2", "verdict": out[1].verdict, "value": 0.1, "interval": None, "reading": "", "summary": "",
        "parts": []})
    return out


def claim_figures() -> dict[str, list[Figure]]:
    line = Figure("grad norm vs layer", "layer", "grad norm",
                  [Series("post", [0, 1, 2, 3], [1.0, 2.0, 4.0, 8.0], [0.1, 0.2, None, 0.4]),
                   Series("pre", [0, 1, 2, 3], [1.0, 0.9, None, 0.8])], logy=True, caption="A caption <b>.")
    cat = Figure("loss by setting", "setting", "val loss",
                 [Series("warmup 0", ["post", "pre", "peri"], [2.5, 2.2, 2.1]),
                  Series("warmup 50", ["post", "pre", "peri"], [2.2, 2.2, 2.1])])
    bar = Figure("divergence", "scheme", "rate", [Series("rate", ["post", "pre"], [0.5, 0.0], [0.1, None])],
                 kind="bar")
    heat = Figure("heat", "lr", "scheme", kind="heatmap", matrix=[[0.0, 0.5], [None, 1.0]], rows=["post", "pre"],
                  cols=["1e-3", "1e-2"])
    empty = Figure("nothing measured", "x", "y")
    # a few claims only: each drawn figure costs ~0.3 s of a shared CPU
    return {"C1": [line, cat], "C2": [bar], "C4": [heat], "C16": [empty]}


def records() -> list[RunRecord]:
    rng = random.Random(0)
    out = []
    for scheme in ("post", "pre", "peri"):
        for depth in (2, 4):
            for lr in (1e-3, 1e-2):
                for warmup in (0, 20):
                    for seed in (0, 1):
                        diverged = scheme == "post" and lr == 1e-2 and (warmup == 0 or (depth == 4 and seed == 1))
                        out.append(_record(rng, scheme, "layernorm", depth, lr, warmup, seed, diverged))
    out += [_record(rng, "pre", "rmsnorm", 4, 1e-3, 20, seed, False) for seed in (0, 1)]
    failed = _record(rng, "peri", "layernorm", 2, 1e-3, 0, 7, False)
    failed.status, failed.val_loss, failed.val_curve = "failed", None, []
    failed.layers_final, failed.layer_skip = {}, None
    return out + [failed]


def _record(rng, scheme, norm, depth, lr, warmup, seed, diverged) -> RunRecord:
    config = {"model": {"scheme": scheme, "norm": norm, "n_layer": depth, "d_model": 32, "n_head": 4, "scheme_options": {}},
              "train": {"lr": lr, "warmup_steps": warmup, "seed": seed, "steps": 300}}
    shape = {"post": (0.15, 1.35, 0.02, 1.0), "pre": (0.05, 0.93, 0.8, 0.6), "peri": (0.0, 0.97, 0.3, 0.85)}
    offset, grow, rms_slope, keep = shape[scheme]
    final = 2.0 + offset + (0.03 if norm == "rmsnorm" else 0.0) + rng.random() * 0.03
    curve = [(s, 4.2 - (4.2 - final) * (1 - math.exp(-s / 80))) for s in (0, 50, 100, 150, 200, 250, 300)]
    if diverged:
        curve = [(0, 4.2), (50, 3.9), (100, 7.5), (150, float("inf"))]
    init = {"grad_norm/block": [0.1 * grow ** l for l in range(depth)],
            "residual_rms/block": [1.0 + l * rms_slope for l in range(depth)],
            "contribution_ratio/block": [0.5 * keep ** l for l in range(depth)],
            "angular_distance/block": [0.4 * keep ** l for l in range(depth)]}
    final_layers = {k: [v * (1.5 + rng.random() * 0.1) for v in vals] for k, vals in init.items()}
    skip = {"base_loss": final, "delta_loss": [0.5 * keep ** l for l in range(depth)], "relative_delta": [],
            "effective_depth": depth - 1, "effective_depth_fraction": (depth - 1) / depth, "threshold": 0.01}
    return RunRecord(id=f"{scheme}-{norm}-L{depth}-lr{lr}-w{warmup}-s{seed}", config=validate_config(config),
                     status="diverged" if diverged else "completed", step=150 if diverged else 300,
                     val_loss=None if diverged else final, val_curve=curve, train_curve=curve, layers_init=init,
                     layers_final={} if diverged else final_layers, final_layers_step=300,
                     layer_skip=None if diverged else skip, tokens_per_s=12345.6, elapsed_s=95.0)


def measurements() -> dict[str, dict]:
    timings = [{"norm": norm, "impl": impl, "shape": [8, 256, 512], "dtype": dtype, "median_s": t}
               for norm, base in (("layernorm", 80e-6), ("rmsnorm", 55e-6))
               for impl, factor in (("torch", 1.0), ("fused", 0.6))
               for dtype, t in (("float32", base * factor), ("bfloat16", base * factor * 0.7))]
    return {"C10": {"norm_timings": timings}}


def study_info() -> dict:
    return {"preset": "quick", "n_runs": 51, "seeds": [0, 1], "wall_time_s": 4321.0,
            "machine": "2-core CPU, torch 2.13", "thresholds": {"LOSS_MARGIN": 0.02, "SE_FACTOR": 2.0,
                                                               "MIN_SEEDS": 2}}


def render_kwargs() -> dict:
    return {"title": "normlab study: quick", "verdicts": verdicts(), "claim_info": claim_info(),
            "claim_figures": claim_figures(), "sections": general_sections(records(), measurements()),
            "study_info": study_info()}
