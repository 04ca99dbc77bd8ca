"""Per-layer metrics of a normlab GPT during training, at step 0 and every `interval` steps.

The probe observes and never edits: forward hooks read the tap points (each
`Residual`'s input, its branch output, the block output, the attention input, the
stream before the final norm, the logits); gradients are read after backward and the
update after the optimizer step. Between measured steps no hook is attached.
"""
from __future__ import annotations

from contextlib import ExitStack
from typing import Iterator

import torch
from torch import nn

from normlab.diagnostics import stats
from normlab.diagnostics.streams import stochastic_distance
from normlab.nn.residual import DepthAttention, collapsed
from normlab.rundir.diagnostics_store import DiagnosticsStore, Row


class _NoProbe:
    """What an unmeasured step gets: every call does nothing."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def after_backward(self) -> None:
        pass

    def before_update(self) -> None:
        pass

    def after_update(self) -> None:
        pass


NO_PROBE = _NoProbe()


class LayerProbe:
    """Decides which steps are measured and hands out one `ProbeSession` per measured step."""

    def __init__(self, model: nn.Module, store: DiagnosticsStore, interval: int | None):
        self.model, self.store, self.interval = model, store, interval

    def due(self, step: int) -> bool:
        return self.interval is not None and step % self.interval == 0

    def session(self, step: int) -> "ProbeSession | _NoProbe":
        return ProbeSession(self.model, self.store, step) if self.due(step) else NO_PROBE


class ProbeSession:
    """Measures one training step: `with session: forward`, then the three calls around the update."""

    def __init__(self, model: nn.Module, store: DiagnosticsStore, step: int):
        self.model, self.store, self.step = model, store, step
        self.rows: list[Row] = []
        self._hooks = ExitStack()
        self._before: dict[str, torch.Tensor] = {}
        self._composite: torch.Tensor | None = None  # H_res·…·H_res so far (hyper-connections)

    def _add(self, layer: int | None, site: str, metric: str, value: float, head: int | None = None) -> None:
        self.rows.append((self.step, layer, site, metric, head, float(value)))

    # -- forward taps ---------------------------------------------------------------------
    def __enter__(self) -> "ProbeSession":
        for layer, block in enumerate(self.model.blocks):
            self._hook(block, self._block_tap(layer))
            for site in ("attn", "mlp"):
                residual = getattr(block, site)
                branch: dict[str, torch.Tensor] = {}
                self._hook(residual.out_norm, lambda m, a, out, b=branch: b.__setitem__("h", out))
                self._hook(residual, self._residual_tap(layer, site, branch))
            self._hook(block.attn.sublayer, self._attention_tap(layer))
        self._hook(self.model.final_norm, self._final_stream_tap)
        self._hook(self.model.lm_head, self._logits_tap)
        return self

    def __exit__(self, *exc) -> bool:
        self._hooks.close()
        return False

    def _hook(self, module: nn.Module, fn) -> None:
        """A forward hook that only reads: whatever `fn` returns is dropped, so the output is never replaced."""
        def observe(m, args, out):
            fn(m, args, out)
        self._hooks.callback(module.register_forward_hook(observe).remove)

    def _final_stream_tap(self, module, args, out) -> None:
        self._add(None, "model", "final_stream_rms", stats.rms(args[0]))

    def _logits_tap(self, module, args, out) -> None:
        for metric, value in stats.logit_stats(out).items():
            self._add(None, "model", metric, value)

    def _block_tap(self, layer: int):
        def tap(module, args, out):  # n streams or a stack of sources read as the one stream they sum to
            if args[0].dim() == 4:  # each stream's (or source's) RMS, the slot as the head index
                for slot, value in enumerate(args[0].float().pow(2).mean(dim=(0, 1, 3)).sqrt().tolist()):
                    self._add(layer, "block", "stream_rms", value, slot)
            x, out = collapsed(args[0]), collapsed(out)
            self._add(layer, "block", "residual_rms", stats.rms(x))
            self._add(layer, "block", "contribution_ratio", stats.norm_ratio(out - x, x))
            self._add(layer, "block", "cosine", stats.mean_cosine(x, out))
            self._add(layer, "block", "angular_distance", stats.angular_distance(x, out))
            self._add(layer, "block", "block_influence", stats.block_influence(x, out))
        return tap

    def _residual_tap(self, layer: int, site: str, branch: dict):
        def tap(module, args, out):
            x, h = collapsed(args[0]), branch.pop("h")
            self._add(layer, site, "residual_rms", stats.rms(x))
            self._add(layer, site, "branch_rms", stats.rms(h))
            self._add(layer, site, "contribution_ratio", stats.norm_ratio(h, x))
            self._mixing_rows(layer, site, module)
        return tap

    def _mixing_rows(self, layer: int, site: str, residual: nn.Module) -> None:
        """Hyper-connections: how far H_res is from doubly stochastic and the composite gain so far (mHC's Amax,
        forward); Attention Residuals: the depth weights, the source as the head index (diagnostics/streams.py)."""
        mix = getattr(residual, "mix", None)
        if mix is not None:
            mix = mix.float()
            for metric, value in stochastic_distance(mix).items():
                self._add(layer, site, f"h_res_{metric}", value)
            self._composite = mix if self._composite is None else mix @ self._composite
            self._add(layer, site, "composite_gain", self._composite.abs().sum(-1).amax(-1).mean().item())
        depth = getattr(residual, "depth", None)
        if isinstance(depth, DepthAttention) and depth.weights is not None:
            weights = depth.weights.reshape(-1, depth.weights.shape[-1]).float().mean(0)
            for source, value in enumerate(weights.tolist()):
                self._add(layer, site, "depth_weight", value, source)

    def _attention_tap(self, layer: int):
        def tap(module, args, out):
            with torch.no_grad():
                q, k, _ = module.heads(args[0])  # (B, nh, T, hs) each
            entropy, max_logit = stats.attention_stats(q, k, getattr(module, "causal", True))
            for head in range(module.n_head):
                self._add(layer, "attn", "attn_entropy", entropy[head].item(), head)
                self._add(layer, "attn", "attn_max_logit", max_logit[head].item(), head)
        return tap

    # -- gradients and the update ---------------------------------------------------------
    def _block_params(self) -> Iterator[tuple[int, str, nn.Parameter]]:
        for layer, block in enumerate(self.model.blocks):
            for name, p in block.named_parameters():
                yield layer, name, p

    def _grouped(self, layer: int, values: dict[str, float], metric: str) -> None:
        """Write per-parameter values and their root-sum-square per branch and per block."""
        groups: dict[str, float] = {}
        for name, value in values.items():
            self._add(layer, name, metric, value ** 0.5)
            for group in (name.split(".")[0], "block"):
                groups[group] = groups.get(group, 0.0) + value
        for group, total in groups.items():
            self._add(layer, group, metric, total ** 0.5)

    def after_backward(self) -> None:
        grads: dict[int, dict[str, float]] = {}
        weights: dict[int, dict[str, float]] = {}
        for layer, name, p in self._block_params():
            weights.setdefault(layer, {})[name] = p.detach().float().pow(2).sum().item()
            if p.grad is not None:
                grads.setdefault(layer, {})[name] = p.grad.detach().float().pow(2).sum().item()
        for layer in weights:
            self._grouped(layer, weights[layer], "weight_norm")
            self._grouped(layer, grads.get(layer, {}), "grad_norm")

    def before_update(self) -> None:
        self._before = {f"{layer}/{name}": p.detach().clone() for layer, name, p in self._block_params()}

    def after_update(self) -> None:
        updates: dict[int, dict[str, float]] = {}
        weights: dict[int, dict[str, float]] = {}
        for layer, name, p in self._block_params():
            old = self._before[f"{layer}/{name}"].float()
            updates.setdefault(layer, {})[name] = (p.detach().float() - old).pow(2).sum().item()
            weights.setdefault(layer, {})[name] = old.pow(2).sum().item()
        for layer in updates:
            for group, value in _ratios(updates[layer], weights[layer]).items():
                self._add(layer, group, "update_ratio", value)
        self.store.write(self.rows)


def _ratios(updates: dict[str, float], weights: dict[str, float]) -> dict[str, float]:
    """‖ΔW‖/‖W‖ per parameter, per branch and per block, from summed squares."""
    sums: dict[str, list[float]] = {}
    for name in updates:
        for group in (name, name.split(".")[0], "block"):
            acc = sums.setdefault(group, [0.0, 0.0])
            acc[0] += updates[name]
            acc[1] += weights[name]
    return {g: (u / w) ** 0.5 if w > 0 else float("nan") for g, (u, w) in sums.items()}
