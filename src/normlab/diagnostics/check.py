"""`normlab check TARGET`: static checks of a normlab model's normalization, each with a one-line fix.

Checks run on a built model (from a config, or from a run's checkpoint) with one
forward and backward pass on random tokens:

- missing-final-norm:   a pre-norm stack with no norm before the head;
- back-to-back-norms:   a norm whose output feeds nothing but another norm;
- norm-never-runs / norm-without-gradient: a norm module that is dead weight;
- deepnorm-constants:   residual α or init gains that differ from the paper's formula;
- degenerate-combination: a scheme × normalizer pair known to collapse into another model.
"""
from __future__ import annotations

import math
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from normlab.diagnostics.structure import norm_modules
from normlab.nn.model import GPT
from normlab.rundir import build_model, load_model, read_config_file

INIT_STD_TOLERANCE = 0.15  # relative; a d×d matrix with d ≥ 32 estimates its std to a few %


@dataclass
class Finding:
    severity: str  # "error" | "warning" | "info"
    code: str
    where: str
    message: str
    fix: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def check_model(model: GPT, at_init: bool = True) -> list[Finding]:
    """All checks on `model`; `at_init` also checks init gains (meaningless once trained)."""
    findings = _missing_final_norm(model) + _degenerate(model) + _deepnorm(model, at_init)
    findings += _traced(model)
    return findings


def _missing_final_norm(model: GPT) -> list[Finding]:
    last = model.blocks[-1].mlp
    pre_norm = not isinstance(last.in_norm, nn.Identity) and isinstance(last.post_norm, nn.Identity)
    if pre_norm and isinstance(model.final_norm, nn.Identity):
        return [Finding("warning", "missing-final-norm", "final_norm",
                        "the last block is pre-norm and nothing normalizes the stream before the head, "
                        "so the logits see the un-normalized residual sum (claim C13)",
                        "set model.final_norm = true (GPT-2's ln_f)")]
    return []


def _degenerate(model: GPT) -> list[Finding]:
    reason = model.scheme.facts.degenerate_norms.get(model.cfg.norm)
    if reason:
        return [Finding("warning", "degenerate-combination", f"{model.cfg.scheme} × {model.cfg.norm}", reason,
                        "compare against scheme 'pre' with norm 'none' as the no-norm control")]
    return []


def _scheme_of(model: nn.Module, layer: int):
    """The scheme instance of the stack block `layer` belongs to (an encoder–decoder has one per stack)."""
    return model.enc_scheme if model.stack_of(layer) == "encoder" and hasattr(model, "enc_scheme") else model.scheme


def _deepnorm(model: GPT, at_init: bool) -> list[Finding]:
    """α on every residual and the init gains of every projection, against the constants of the block's own
    stack (DeepNet Table 1: encoder-only, decoder-only, and each half of an encoder–decoder differ)."""
    findings = []
    names = {id(m): n for n, m in model.named_modules()}
    for layer, block in enumerate(model.blocks):
        scheme = _scheme_of(model, layer)
        expected_alpha = scheme.alpha_at(layer)
        for residual in block.sublayers() if expected_alpha is not None else []:
            if not math.isclose(residual.alpha, expected_alpha, rel_tol=1e-6):
                findings.append(Finding("error", "deepnorm-constants", names[id(residual)],
                                        f"residual α = {residual.alpha:.4g}; DeepNet's α for the "
                                        f"{scheme.stack.part} of a {scheme.stack.architecture} model with "
                                        f"N = {scheme.stack.n_encoder}, M = {scheme.stack.n_decoder} is "
                                        f"{expected_alpha:.4g}",
                                        f"use α = {expected_alpha:.4g} on the residual, not on F "
                                        "(normlab.deepnorm_constants gives it)"))
        gains = scheme.init_gains()
        if gains is None or not at_init:
            continue
        for role, w in [p for r in block.sublayers() for p in r.sublayer.projections()]:
            fan_out, fan_in = w.shape
            expected = gains.gain(role) * math.sqrt(2.0 / (fan_in + fan_out))
            measured = w.detach().float().std().item()
            if abs(measured / expected - 1) > INIT_STD_TOLERANCE:
                findings.append(Finding("error", "init-gains", f"{names[id(block)]} {role}",
                                        f"init std {measured:.4g}, expected {expected:.4g} "
                                        f"(xavier_normal gain {gains.gain(role):.4g}: {gains.why})",
                                        f"re-initialise {role} with xavier_normal_(w, gain={gains.gain(role):.4g})"))
    return findings


def _traced(model: GPT) -> list[Finding]:
    """Checks that need one forward and backward pass: dead norms and back-to-back norms."""
    norms = norm_modules(model)
    calls: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {name: [] for name in norms}
    was_training = model.training
    model.eval()
    model.zero_grad(set_to_none=True)
    idx = torch.randint(model.cfg.vocab_size, (2, min(8, model.cfg.block_size)),
                        generator=torch.Generator().manual_seed(0)).to(model.wte.weight.device)
    with ExitStack() as hooks:
        for name, m in norms.items():
            hooks.callback(m.register_forward_hook(lambda mod, a, out, n=name: calls[n].append((a[0], out))).remove)
        logits, loss = model(idx, idx)
    loss.backward(retain_graph=True)
    findings = _dead_norms(norms, calls) + _back_to_back(calls, loss)
    model.zero_grad(set_to_none=True)
    model.train(was_training)
    return findings


def _dead_norms(norms: dict[str, nn.Module], calls) -> list[Finding]:
    findings = []
    for name, module in norms.items():
        if not calls[name]:
            findings.append(Finding("error", "norm-never-runs", name, "this norm is never called in forward",
                                    "remove it, or call it where it was meant to normalize"))
            continue
        params = list(module.parameters())
        if params and all(p.grad is None or not p.grad.any() for p in params):
            findings.append(Finding("error", "norm-without-gradient", name,
                                    "this norm runs, but its parameters receive no gradient "
                                    "(frozen, or its output is detached or unused)",
                                    "make its parameters trainable and its output part of the loss, or remove it"))
    return findings


def _back_to_back(calls, loss: torch.Tensor) -> list[Finding]:
    """A norm whose whole output goes into another norm (autograd: no other consumer of it)."""
    consumers = _consumer_edges(loss.grad_fn)
    findings = []
    for first, first_calls in calls.items():
        for second, second_calls in calls.items():
            for _, out in first_calls:
                for inp, out2 in second_calls:
                    if inp is not out or first == second or out.grad_fn is None:
                        continue
                    inside = _nodes_between(out2.grad_fn, stop=out.grad_fn)
                    outside_uses = [c for c in consumers.get(out.grad_fn, []) if c not in inside]
                    if not outside_uses:
                        findings.append(Finding("warning", "back-to-back-norms", f"{first} → {second}",
                                                f"{second} normalizes the output of {first} and nothing else uses it",
                                                "drop one of the two (e.g. final_norm after a post-norm block)"))
    return findings


def _consumer_edges(root) -> dict[object, list[object]]:
    """grad_fn node → the nodes that consume its output (one entry per edge)."""
    consumers: dict[object, list[object]] = {}
    seen, stack = set(), [root]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for child, _ in node.next_functions:
            if child is not None:
                consumers.setdefault(child, []).append(node)
                stack.append(child)
    return consumers


def _nodes_between(start, stop) -> set[object]:
    """Nodes reachable from `start` without passing through `stop` (the second norm's own ops)."""
    seen, stack = set(), [start]
    while stack:
        node = stack.pop()
        if node is None or node is stop or node in seen:
            continue
        seen.add(node)
        stack.extend(child for child, _ in node.next_functions)
    return seen


def check_target(target: str | Path, init: bool = False,
                 overrides: list[str] | None = None) -> tuple[GPT, bool, list[Finding]]:
    """Check a config TOML (at init, with `overrides` as `--set KEY=VALUE`), or a run directory / checkpoint file
    (its trained weights, which take no overrides).

    A run without a checkpoint is refused unless `init` asks for its untrained model on purpose.
    """
    path = Path(target)
    if path.is_file() and path.suffix == ".toml":
        model = build_model(read_config_file(path, list(overrides or [])))
        return model, True, check_model(model, at_init=True)
    if not path.exists():
        raise ValueError(f"{str(target)!r} does not exist; give a config TOML, a run directory or a checkpoint")
    if overrides:
        raise ValueError(f"--set {overrides[0]} changes a config, and {str(target)!r} is a run or a checkpoint, whose "
                         "weights were trained with their own; give a config TOML to check a changed one")
    loaded = load_model(path, require_checkpoint=not init)
    at_init = loaded.step == 0
    return loaded.model, at_init, check_model(loaded.model, at_init)
