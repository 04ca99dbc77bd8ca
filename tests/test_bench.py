"""`normlab bench --quick --json`: runs in seconds and prints the documented schema.

Runs in-process (typer's CliRunner) with one thread, so that a busy 2-core machine does
not stretch it; the fused kernels are built on first use if the cache lacks them.
"""
from __future__ import annotations

import json
import math

import pytest
import torch
from typer.testing import CliRunner

from normlab.bench.norms import candidates, eager_formula
from normlab.cli import app
from normlab.nn.norms import make_norm

NORM_KEYS = {"norm": str, "impl": str, "shape": list, "dtype": str, "median_s": float}
STEP_KEYS = {"config": str, "impl": str, "scheme": str, "norm": str, "precision": str,
             "tokens_per_s": float, "peak_mem_mb": (float, type(None))}


def check_row(row: dict, keys: dict) -> None:
    for key, kind in keys.items():
        assert isinstance(row.get(key), kind), (key, row)


def test_bench_quick_json():
    result = CliRunner().invoke(app, ["bench", "--quick", "--json", "--threads", "1"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert {"norms", "steps", "environment"} <= set(out)

    for row in out["norms"]:
        check_row(row, NORM_KEYS)
        assert math.isfinite(row["median_s"]) and row["median_s"] > 0
    impls = {(r["norm"], r["impl"]) for r in out["norms"]}
    assert impls == {(n, i) for n in ("rmsnorm", "layernorm")
                     for i in ("normlab-fast", "normlab-reference", "eager-formula", "torch.nn")}
    assert {r["dtype"] for r in out["norms"]} == {"fp32", "bf16"}
    baseline = [r for r in out["norms"] if (r["norm"], r["impl"]) == ("layernorm", "torch.nn")]
    assert all(r["ratio"] == 1.0 for r in baseline)

    for row in out["steps"]:
        check_row(row, STEP_KEYS)
        assert row["tokens_per_s"] > 0
        assert row["peak_mem_mb"] is None or row["peak_mem_mb"] > 0
    ref = [r for r in out["steps"] if r["impl"] == "reference"]
    assert len(ref) == 1 and ref[0]["precision"] == "fp32" and ref[0]["speedup"] == 1.0
    assert {r["precision"] for r in out["steps"]} == {"fp32", "bf16"}
    assert {r["impl"] for r in out["steps"]} == {"reference", "normlab", "normlab-refnorm"}
    # every figure with its spread over the rounds: min ≤ median ≤ max, and a flag where it is wide
    for row in out["norms"]:
        assert row["time_s_min"] <= row["median_s"] <= row["time_s_max"]
        assert row["time_s_wide"] == (row["time_s_max"] / row["time_s_min"] > 1.5)
    for row in out["steps"]:
        assert row["tokens_per_s_min"] <= row["tokens_per_s"] <= row["tokens_per_s_max"]


def test_bench_tables_show_the_spread_and_survive_a_pipe():
    """Piped (no terminal, 80 columns) every cell is whole, and a wide spread is flagged beside its figure and in a
    warning line."""
    from rich.console import Console

    from normlab.bench.report import noise_line, norm_table, step_table

    norm = {"norm": "layernorm", "impl": "normlab-fast-with-a-long-name", "shape": [8, 64], "dtype": "fp32",
            "median_s": 0.00048, "ratio": 0.0375, "time_s_min": 0.0004, "time_s_max": 0.0128, "time_s_wide": True}
    step = {"config": "normlab-gpt-small-cpu", "impl": "normlab-compile", "scheme": "pre", "norm": "layernorm",
            "precision": "fp32", "tokens_per_s": 1234.0, "tokens_per_s_min": 172.0, "tokens_per_s_max": 4331.0,
            "tokens_per_s_wide": True, "speedup": 1.0, "peak_mem_mb": None, "mem_ratio": None}
    console = Console(width=80, record=True, force_terminal=False)
    console.print(norm_table([norm]))
    console.print(step_table([step]))
    text = console.export_text()
    assert "…" not in text  # nothing cut: a long cell folds onto the next lines

    def column(k: int) -> str:  # a column's folded cell, its lines joined
        rows = [line.split("│") for line in text.splitlines() if line.startswith("│")]
        return "".join(r[k].strip() for r in rows if len(r) > k)
    assert "normlab-fast-with-a-long-name" in column(2) and "normlab-gpt-small-cpu" in column(1)
    assert "[0.400ms–12.800ms]!" in column(3).replace(" ", "") and "[172–4,331]!" in column(5).replace(" ", "")
    assert "2 figure(s) spread more than 1.5×" in noise_line({"norms": [norm], "steps": [step]})
    assert noise_line({"norms": [{**norm, "time_s_wide": False}], "steps": []}) is None


def test_bench_rejects_bad_options():
    result = CliRunner().invoke(app, ["bench", "--quick", "--only", "everything"])
    assert result.exit_code == 2 and "'everything' is not one of 'norms', 'steps'" in result.output
    result = CliRunner().invoke(app, ["bench", "--quick", "--scheme", "prenorm"])
    assert result.exit_code == 2 and "--scheme: 'prenorm' is not one of 'post', 'pre'" in result.output


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
def test_eager_formula_matches_the_reference_norms(norm):
    """bench's eager-formula (the textbook formula as plain torch ops, C10's matched "eager" algorithm)
    computes the same function as normlab's reference norms, forward and backward, in fp32."""
    gen = torch.Generator().manual_seed(0)
    d = 32
    module = make_norm(norm, d, bias=norm == "layernorm")
    with torch.no_grad():
        for p in module.parameters():  # not the init's ones and zeros: the affine part must be applied too
            p.copy_(torch.randn(p.shape, generator=gen))
    params = list(module.parameters())
    assert len(params) == (2 if norm == "layernorm" else 1)
    x = (3.0 * torch.randn(4, 7, d, generator=gen) + 0.5).requires_grad_()
    dy = torch.randn(4, 7, d, generator=gen)

    def run(forward):
        y = forward(x)
        grads = torch.autograd.grad(y, [x, *params], dy)
        return y.detach(), grads

    y, grads = run(eager_formula(norm, module))
    y_ref, grads_ref = run(module.reference_forward)
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-5)
    for name, g, g_ref in zip(["x", "weight", "bias"], grads, grads_ref):
        torch.testing.assert_close(g, g_ref, rtol=1e-5, atol=1e-5, msg=lambda m: f"grad {name}: {m}")
    assert "eager-formula" in candidates(norm, d, torch.float32, compile=False)
