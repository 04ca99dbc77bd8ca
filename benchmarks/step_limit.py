"""How far the CPU presets' training step is from its own matmul time, alone and stacked, and where the rest goes.

    python benchmarks/step_limit.py --out benchmarks/results/step_limit_2core_cpu.json [--ks 1,4,16,32]

The step is the one every standard-preset run takes (the reference run's model: Pre-LN, 4 layers × 64 wide,
LayerNorm, 32 tokens of context, batch 12; forward, backward, gradient clipping, AdamW), trained as a study trains
it: alone (one GPT with torch's AdamW, `normlab train`) and stacked K at a time (`StackedGPT` with the stacked
AdamW, what `--stack-runs` does), at one thread. Beside each, in the same process and interleaved with it:

- **the limit**: the step's matmuls alone, at the same shapes (every Linear's forward and its two backward
  products, attention's QKᵀ and AV and their backward, the head), replayed as bare `torch.bmm` calls on
  preallocated tensors. A step cannot be faster than its matmuls.
- **where the rest goes**: the step's phases timed in place (forward, backward, clip, optimizer), and a
  `torch.profiler` split of the op time (matmuls, norms, attention, the MLP's activation, the loss, the
  optimizer's element-wise ops, copies, other ops), the difference between the step's wall time under the profiler
  and the ops' own time being Python and dispatch (the profiler adds its own cost to that wall time).

And **the candidates** that would bring the step alone nearer its matmuls (`--candidates`), each timed interleaved
with the step it would replace (torch's foreach AdamW, eager), in one process, from the same init on the same
batch: torch's fused AdamW CPU kernel, `torch.compile` (inductor's C++ kernels) of the model, and both. Each states
what it costs before its first step (compiling), how many steps that is at the time it saves, and its numerics: the
largest parameter difference from the eager step after a few steps, and whether two of its runs are bit-identical.

Run it on an otherwise idle machine: it reports medians over rounds with their spread.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from normlab.bench.timing import steady_allocator
from normlab.config import TrainConfig
from normlab.device import cpu_model
from normlab.nn.model import GPT
from normlab.nn.stacked import StackedGPT
from normlab.train.optim import StackedAdamW, build_optimizer, clip_stacked_grads

VOCAB = 65  # tiny Shakespeare's characters
BATCH = 12


def model_config():
    from normlab.study.reference import reference_config

    return reference_config().model.model_copy(update={"vocab_size": VOCAB})


def members(k: int) -> list[GPT]:
    out = []
    for seed in range(k):
        torch.manual_seed(seed)
        out.append(GPT(model_config()))
    return out


class Stacked:
    """K runs as one stack, as `--stack-runs` trains them; its step with its phases timed."""

    def __init__(self, k: int):
        self.stack = StackedGPT(members(k))
        self.opt = StackedAdamW(self.stack.pairs(), 0.9, 0.99)
        self.k = k

    def step(self, x, y, phases: dict | None = None) -> None:
        t0 = time.perf_counter()
        _, losses = self.stack(x, y)
        t1 = time.perf_counter()
        losses.sum().backward()
        t2 = time.perf_counter()
        clip_stacked_grads([s for s, _ in self.stack.pairs()], [1.0] * self.k)
        t3 = time.perf_counter()
        self.opt.step([1e-3] * self.k, [0.1] * self.k)
        self.stack.zero_grad(set_to_none=True)
        t4 = time.perf_counter()
        if phases is not None:
            for name, a, b in (("forward", t0, t1), ("backward", t1, t2), ("clip", t2, t3), ("optimizer", t3, t4)):
                phases.setdefault(name, []).append(b - a)


class Alone:
    """One run as `normlab train` trains it: a GPT with torch's AdamW."""

    def __init__(self):
        self.model = members(1)[0]
        self.opt = build_optimizer(self.model, TrainConfig(), "cpu")
        self.k = 1

    def step(self, x, y, phases: dict | None = None) -> None:
        t0 = time.perf_counter()
        _, loss = self.model(x[0], y[0])
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        t3 = time.perf_counter()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        t4 = time.perf_counter()
        if phases is not None:
            for name, a, b in (("forward", t0, t1), ("backward", t1, t2), ("clip", t2, t3), ("optimizer", t3, t4)):
                phases.setdefault(name, []).append(b - a)


def matmul_plan(k: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """The (a, b) shapes of every bmm the step's forward and backward make, for K runs of B×T tokens."""
    cfg = model_config()
    bt, d, t, h = BATCH * cfg.block_size, cfg.d_model, cfg.block_size, cfg.n_head
    plan = []
    linears = [(m.in_features, m.out_features) for m in GPT(cfg).modules() if isinstance(m, torch.nn.Linear)]
    for n_in, n_out in linears:
        plan += [((k, bt, n_in), (k, n_in, n_out)),  # forward
                 ((k, bt, n_out), (k, n_out, n_in)),  # grad of the input
                 ((k, n_in, bt), (k, bt, n_out))]  # grad of the weight
    heads, hd = k * BATCH * h, d // h
    for _ in range(cfg.n_layer):
        plan += [((heads, t, hd), (heads, hd, t)), ((heads, t, t), (heads, t, hd))]  # QKᵀ, AV
        plan += [((heads, t, t), (heads, t, hd)), ((heads, t, hd), (heads, hd, t))] * 2  # their two grads each
    return plan


class Matmuls:
    """The step's matmuls alone, on preallocated tensors."""

    def __init__(self, k: int):
        g = torch.Generator().manual_seed(0)
        self.pairs = [(torch.randn(a, generator=g), torch.randn(b, generator=g)) for a, b in matmul_plan(k)]
        self.flops = sum(2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2] for a, b in self.pairs)

    def step(self, *_ignored, **__) -> None:
        for a, b in self.pairs:
            torch.bmm(a, b)


CATEGORIES = (("matmul", ("mm", "bmm", "addmm", "baddbmm", "linear", "matmul")),
              ("norm", ("layer_norm", "rms_norm", "normlab")),
              ("attention", ("scaled_dot_product", "attention", "_flash")),
              ("activation", ("gelu", "silu", "relu", "tanh")),
              ("loss", ("log_softmax", "nll_loss", "cross_entropy")),
              ("optimizer", ("_foreach", "addcdiv", "addcmul", "lerp", "sqrt", "mul_", "add_", "div_")),
              ("copies", ("copy_", "cat", "fill_", "clone", "stack", "contiguous")))


def profile(side, x, y, steps: int = 5) -> dict[str, float]:
    """Milliseconds per step of each op category's own CPU time, and what is left of the wall time: Python and
    dispatch."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        t = time.perf_counter()
        for _ in range(steps):
            side.step(x, y)
        wall = (time.perf_counter() - t) / steps
    split = dict.fromkeys([c for c, _ in CATEGORIES] + ["other ops"], 0.0)
    for event in prof.key_averages():
        name = event.key.lower()
        category = next((c for c, keys in CATEGORIES if any(k in name for k in keys)), "other ops")
        split[category] += event.self_cpu_time_total / 1e3 / steps
    ops = sum(split.values())
    return {**{k: round(v, 3) for k, v in split.items()}, "python and dispatch": round(wall * 1e3 - ops, 3),
            "wall_ms_profiled": round(wall * 1e3, 3)}


def spread(xs: list[float]) -> dict[str, float]:
    return {"min": min(xs) * 1e3, "median": statistics.median(xs) * 1e3, "max": max(xs) * 1e3}


def bench(k: int | str, rounds: int) -> dict:
    n = 1 if k == "alone" else k
    side = Alone() if k == "alone" else Stacked(n)
    limit = Matmuls(n)
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randint(VOCAB, (n, BATCH, model_config().block_size), generator=g) for _ in range(2))
    for _ in range(3):  # warm-up: allocator, kernels, optimizer state
        side.step(x, y)
        limit.step()
    steps = max(2, 32 // n)
    times: dict[str, list[float]] = {"step": [], "matmuls": []}
    phases: dict[str, list[float]] = {}
    for _ in range(rounds):  # interleaved: the step, then its matmuls, then the step again ...
        t = time.perf_counter()
        for _ in range(steps):
            side.step(x, y, phases)
        times["step"].append((time.perf_counter() - t) / steps)
        t = time.perf_counter()
        for _ in range(steps):
            limit.step()
        times["matmuls"].append((time.perf_counter() - t) / steps)
    step, mm = statistics.median(times["step"]), statistics.median(times["matmuls"])
    return {"K": k, "runs": n, "tokens_per_step": n * BATCH * model_config().block_size,
            "step_ms": spread(times["step"]), "matmuls_ms": spread(times["matmuls"]),
            "step_over_matmuls": step / mm, "step_ms_per_run": step * 1e3 / n,
            "matmul_gflops_in_step": limit.flops / step / 1e9, "matmul_gflops_alone": limit.flops / mm / 1e9,
            "phases_ms": {name: statistics.median(v) * 1e3 for name, v in phases.items()},
            "profile_ms": profile(side, x, y)}


NUMERIC_STEPS = 20  # steps from one init on one batch, after which candidates' parameters are compared


class Candidate(Alone):
    """The step alone with one change: the fused AdamW kernel and/or a compiled model."""

    def __init__(self, fused: bool, compiled: bool):
        super().__init__()
        if fused:
            groups = [{k: v for k, v in g.items() if k not in ("foreach", "fused")} for g in self.opt.param_groups]
            self.opt = torch.optim.AdamW(groups, fused=True)  # each group's lr, betas and decay as they were
        if compiled:
            self.model = torch.compile(self.model)


def cold_compile() -> None:
    """What a study's worker meets: nothing compiled in this process, and no compiled code on disk (a fresh
    inductor cache), so that a candidate's setup is its whole compile."""
    import os
    import tempfile

    torch._dynamo.reset()
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="step_limit_inductor_")


def trained_params(make, x, y) -> list[torch.Tensor]:
    side = make()
    for _ in range(NUMERIC_STEPS):
        side.step(x, y)
    return [p.detach().clone() for p in (side.model._orig_mod if hasattr(side.model, "_orig_mod")
                                         else side.model).parameters()]


def candidates(rounds: int) -> list[dict]:
    """Each candidate's step beside the eager one, its setup time and its numerics (see the module's text)."""
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randint(VOCAB, (1, BATCH, model_config().block_size), generator=g) for _ in range(2))
    eager = trained_params(Alone, x, y)
    out = []
    for name, fused, compiled in (("fused AdamW", True, False), ("compiled", False, True),
                                  ("compiled + fused AdamW", True, True)):
        cold_compile()
        t = time.perf_counter()
        side = Candidate(fused, compiled)
        side.step(x, y)
        setup = time.perf_counter() - t
        base, limit = Alone(), Matmuls(1)
        for _ in range(3):
            side.step(x, y), base.step(x, y), limit.step()
        times: dict[str, list[float]] = {"candidate": [], "eager": [], "matmuls": []}
        for _ in range(rounds):
            for key, fn in (("candidate", side.step), ("eager", base.step), ("matmuls", limit.step)):
                t = time.perf_counter()
                for _ in range(16):
                    fn(x, y)
                times[key].append((time.perf_counter() - t) / 16)
        step, was, mm = (statistics.median(times[k]) for k in ("candidate", "eager", "matmuls"))
        mine = trained_params(lambda: Candidate(fused, compiled), x, y)
        again = trained_params(lambda: Candidate(fused, compiled), x, y)
        saved = was - step
        out.append({"candidate": name, "step_ms": spread(times["candidate"]), "eager_step_ms": spread(times["eager"]),
                    "matmuls_ms": spread(times["matmuls"]), "step_over_matmuls": step / mm,
                    "eager_over_matmuls": was / mm, "speedup": was / step, "setup_s": round(setup, 2),
                    "steps_to_repay_setup": round((setup - was) / saved) if saved > 0 else None,
                    "max_param_diff_from_eager": max((a - b).abs().max().item() for a, b in zip(mine, eager)),
                    "bit_identical_rerun": all(torch.equal(a, b) for a, b in zip(mine, again)),
                    "after_steps": NUMERIC_STEPS})
        print(f"{name:24} step {step * 1e3:6.2f} ms against eager {was * 1e3:6.2f} ({was / step:4.2f}×), "
              f"{step / mm:4.2f}× its matmuls; setup {setup:5.1f} s; |Δθ| {out[-1]['max_param_diff_from_eager']:.1e} "
              f"after {NUMERIC_STEPS} steps", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ks", default="1,4,16,32")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--candidates", action="store_true", help="also time the candidates beside the eager step")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)  # as every CPU preset's run trains (train.threads = 1)
    steady_allocator()
    rows = []
    for k in ["alone", *(int(v) for v in args.ks.split(",") if v)]:
        row = bench(k, args.rounds)
        rows.append(row)
        print(f"K={k!s:5} step {row['step_ms']['median']:8.2f} ms ({row['step_ms_per_run']:6.2f} per run)  matmuls "
              f"{row['matmuls_ms']['median']:7.2f} ms  ratio {row['step_over_matmuls']:5.2f}×  phases "
              + ", ".join(f"{n} {v:.1f}" for n, v in row["phases_ms"].items()), flush=True)
    out = {"machine": f"{torch.get_num_threads()} thread of a {cpu_model()}", "torch": torch.__version__,
           "python": platform.python_version(), "batch": BATCH, "rows": rows,
           **({"candidates": candidates(args.rounds)} if args.candidates else {})}
    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
