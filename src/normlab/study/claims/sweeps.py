"""The sweep toolkit the claims about training share (stability, quality, layers, the frontier): where a sweep's
runs go (each scheme at each lr, at each depth, in a depth cell), whether a configuration trains and up to which
lr, the paired failure tests between two schemes' limits, and the sweep's tables and figures."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from normlab.config import Change
from normlab.report.figure import Figure, Series
from normlab.study.claims.base import Claim
from normlab.study.claims.grouping import group, group_record, select
from normlab.study.claims.statistics import TRAINS, Level, sign_test


def lr_sweep(preset, schemes: tuple[str, ...], lrs: list[float] | None = None) -> list[Change]:
    """Each scheme at each lr with and without warmup; without warmup only from `Preset.no_warmup_from` up."""
    return [Change(scheme=s, lr=lr, warmup_steps=w)
            for s in schemes for lr in (lrs or preset.lrs) for w in (0, preset.warmup)
            if w or lr >= preset.no_warmup_from]  # as `swept_lrs`, in the sweep's order


def depth_sweep(preset, schemes: tuple[str, ...], depths: list[int] | None = None, **extra) -> list[Change]:
    return [at_depth(preset, s, d, **extra) for s in schemes for d in (depths or preset.depths)]


def at_depth(preset, scheme: str, depth: int, **where) -> Change:
    """One point of the depth sweep, as its run's change and as `select` / `group` keys: a scheme at a depth, at
    the fixed lr with warmup (and `where`: a depth cell's budget, the very deep models' width)."""
    return Change(scheme=scheme, n_layer=depth, lr=preset.lr_fixed, warmup_steps=preset.warmup) | where


class CellClaim(Claim):
    """A depth claim measured in the preset's depth cell (`Preset.depth_cell`: deeper and longer than the sweep)
    where it has one and the claim's knob `in_cell` says so (C5, C6; C7, which the CPU presets keep out of it)."""

    @dataclass(frozen=True)
    class Knobs(Claim.Knobs):
        in_cell: bool = True  # measured in the preset's depth cell, where it has one

    def cell_overrides(self, preset) -> dict[str, Any]:
        """The depth cell's overrides on the base where this claim is measured in it, else {}."""
        return dict(preset.depth_cell) if self.knobs(preset).in_cell else {}

    def cell(self, preset, otherwise: int) -> tuple[int, dict[str, Any]]:
        """Where this claim is measured: (depth, the cell's other config keys) in the depth cell, else (`otherwise`,
        {}) at the base budget: the deepest depth of the sweep (C5, C6), the base depth (C7)."""
        where = self.cell_overrides(preset)
        return (where.pop("model.n_layer", preset.depth), where) if where else (otherwise, {})

    def cell_runs(self, preset, schemes: tuple[str, ...]) -> list[Change]:
        """The depth cell's runs of these schemes at the fixed lr with warmup ([] where the claim is not in it)."""
        extra = self.cell_overrides(preset)
        return [Change(scheme=s, lr=preset.lr_fixed, warmup_steps=preset.warmup) | extra
                for s in schemes] if extra else []


def cell_label(depth: int, where: dict[str, Any]) -> str:
    """`L=12, 1000 steps`: a cell as a legend or a summary names it."""
    return f"L={depth}" + (f", {where['train.steps']} steps" if "train.steps" in where else "")


def swept_lrs(preset, warmup: int, lrs=None) -> list[float]:
    """The lrs the sweep trains at this warmup: all of them with warmup, from `no_warmup_from` up without."""
    return [lr for lr in (lrs or preset.lrs) if warmup or lr >= preset.no_warmup_from]


def sweep_table(records, preset, schemes, warmups=None, lrs=None) -> dict[str, Any]:
    """{scheme: {warmup: {lr: group description}}} over the lr sweep at the base depth."""
    grid = {w: swept_lrs(preset, w, lrs) for w in (warmups or (0, preset.warmup))}
    return {s: {str(w): {f"{lr:g}": group_record(group(records, scheme=s, lr=lr, warmup_steps=w, n_layer=preset.depth))
                        for lr in at} for w, at in grid.items()} for s in schemes}


OMITTED = ("Mean over seeds ± one standard deviation, of the runs that trained; a point is missing where no "
           "run did (diverged, or failed to train: see the heatmap of runs that did not train).")


def sweep_figure(records, preset, schemes, title, warmups=None, lrs=None, **where) -> Figure:
    """Final val loss vs lr per scheme and warmup, at the base depth (or where `where` says: a depth cell), over
    `lrs` (the preset's grid unless given)."""
    fig = Figure(title, "learning rate", "final val loss (nats)", kind="line", logx=True, caption=OMITTED)
    where = {"model.n_layer": preset.depth, **where}
    for s in schemes:
        for w in (warmups or (0, preset.warmup)):
            xs = swept_lrs(preset, w, lrs)
            gs = [group(records, scheme=s, lr=lr, warmup_steps=w, **where) for lr in xs]
            fig.series.append(Series(trained_label(f"{s}, warmup {w}", gs), xs, [g.mean for g in gs],
                                     [g.sd for g in gs]))
    return fig


def trained_label(label: str, groups) -> str:
    """A series' legend label, saying so when none of its runs trained (it has no point to show)."""
    if any(g.n_runs for g in groups) and all(g.mean is None for g in groups):
        return f"{label}: no run trained"
    return label


def trains(g) -> bool:
    """A configuration trains when at least TRAINS of all its runs are known to have trained. A run censored by
    the plateau stop is not known to: it counts in the denominator, so censoring never lifts a limit (without
    it, one trained seed beside four censored ones would read as 'trains')."""
    runs = g.n_runs + g.n_censored
    return bool(runs) and (g.n_runs - g.n_failed) / runs >= TRAINS


def max_stable_lr(records, preset, schemes, warmup, lrs=None) -> dict[str, float | None]:
    """Each scheme's own highest lr of the sweep at which it trains (`trains`): a threshold that does not depend
    on which schemes are compared (it once was "within 10 % of the best loss of the compared set")."""
    out = {}
    for s in schemes:
        ok = [lr for lr in (lrs or preset.lrs)
              if trains(group(records, scheme=s, lr=lr, warmup_steps=warmup, n_layer=preset.depth))]
        out[s] = max(ok) if ok else None
    return out


def limits_by_seed(records, at, lrs: list[float]) -> dict[int, float | None]:
    """{seed: the highest lr of `lrs` at which this seed's run of `at(lr)` (a run's overrides at that lr) trained
    (0.0: at none of them)}: one outcome per seed, so seeds shared across lrs are not counted as independent pairs.
    A seed whose limit is unknown (a run above its highest trained lr censored by the plateau stop, or missing)
    maps to None."""
    out: dict[int, float | None] = {}
    # each lr named: a strict `select` without it would hold train.lr to the base's (one lr, every other unknown)
    runs = [r for lr in lrs for r in select(records, **at(lr))]
    for seed in sorted({r.seed for r in runs}):
        mine = {r.get("train.lr"): r for r in runs if r.seed == seed}
        trained = [lr for lr, r in mine.items() if not r.did_not_train and r.status == "completed"]
        limit = max(trained, default=0.0)
        unknown = any(lr not in mine or mine[lr].censored for lr in lrs if lr > limit)
        out[seed] = None if unknown else limit
    return out


def seed_limits(records, scheme: str, lrs: list[float], warmup: int, n_layer: int) -> dict[int, float | None]:
    """`limits_by_seed` of one scheme of the lr sweep, at a warmup and depth."""
    return limits_by_seed(records, lambda lr: Change(scheme=scheme, lr=lr, warmup_steps=warmup, n_layer=n_layer),
                          lrs)


def paired_limits(a: dict[int, float | None], b: dict[int, float | None], level: Level) -> dict[str, Any]:
    """Two schemes' per-seed limits (`seed_limits`), paired by seed: the seeds where a's limit is higher, lower
    or equal, and the one-sided exact sign tests over the seeds where they differ (`higher` / `lower`:
    significant at `level`)."""
    common = sorted(s for s in set(a) & set(b) if a[s] is not None and b[s] is not None)
    up = sum(1 for s in common if a[s] > b[s])
    down = sum(1 for s in common if a[s] < b[s])
    p_up, p_down = sign_test(up, up + down), sign_test(down, up + down)
    return {"higher": up > down and p_up < level.alpha, "lower": down > up and p_down < level.alpha, "a_higher": up,
            "b_higher": down, "ties": len(common) - up - down, "p_higher": p_up, "p_lower": p_down,
            "censored_seeds": sorted(s for s in set(a) | set(b) if a.get(s) is None or b.get(s) is None),
            "seeds": common, "test": f"exact sign test over the {up + down} of {len(common)} seeds whose highest "
                                     "trainable lr differs between the schemes (one outcome per seed), one-sided"}


def limit_split(records, mine, theirs, lrs: list[float], level: Level) -> dict[str, Any]:
    """Two arms' per-seed limits over a grid (`mine(lr)`, `theirs(lr)`: each arm's run overrides at an lr), paired
    by seed (`paired_limits`), with what `decisions.limit_verdict` reads: `fewer` (this arm's own limit the higher
    in significantly many seeds: it fails less) and `more` (the lower)."""
    paired = paired_limits(limits_by_seed(records, mine, lrs), limits_by_seed(records, theirs, lrs), level)
    return {**paired, "fewer": paired["higher"], "more": paired["lower"],
            "p_one_sided": paired["p_higher"] if paired["a_higher"] >= paired["b_higher"] else paired["p_lower"]}


def deeper_deficit(records, preset, shallow: int, deep: int, level: Level) -> dict[str, Any]:
    """Per seed, Post-LN's deficit to Pre-LN (val-loss difference; +inf where Post-LN alone did not train, −inf
    where Pre-LN alone did not) at two depths, and the one-sided exact sign tests over the seeds where it differs:
    `harder` (larger at the deeper depth) / `easier`, significant at `level`. A seed with a censored or
    missing run, or where both failed at a depth, is left out."""
    def deficit(depth: int) -> dict[int, float]:
        arms = {s: {r.seed: r for r in select(records, **at_depth(preset, s, depth))} for s in ("post", "pre")}
        out = {}
        for seed in set(arms["post"]) & set(arms["pre"]):
            post, pre = arms["post"][seed], arms["pre"][seed]
            if post.censored or pre.censored or (post.did_not_train and pre.did_not_train):
                continue
            out[seed] = (math.inf if post.did_not_train else -math.inf if pre.did_not_train else
                         post.val_loss - pre.val_loss)
        return out
    low, high = deficit(shallow), deficit(deep)
    common = sorted(set(low) & set(high))
    up = sum(1 for s in common if high[s] > low[s])
    down = sum(1 for s in common if high[s] < low[s])
    p_up, p_down = sign_test(up, up + down), sign_test(down, up + down)
    return {"harder": up > down and p_up < level.alpha, "easier": down > up and p_down < level.alpha, "up": up,
            "down": down, "n": len(common), "p_up": p_up, "p_down": p_down, "seeds": common,
            "depths": [shallow, deep],
            "test": f"exact sign test over the seeds where Post-LN's deficit at {deep} layers differs from that at "
                    f"{shallow} ({up + down} of {len(common)}), one-sided"}


def depth_rows(records, preset, schemes, **where) -> tuple[dict[str, Any], list[float | None]]:
    rows, gaps = {}, []
    for d in preset.depths:
        gs = {s: group(records, **at_depth(preset, s, d, **where)) for s in schemes}
        rows[str(d)] = {s: group_record(g) for s, g in gs.items()}
        a, b = gs[schemes[1]], gs[schemes[0]]
        gaps.append(float("inf") if a.n_failed and not b.n_failed else
                    (a.mean - b.mean if a.mean is not None and b.mean is not None else None))
    return rows, gaps


def depth_figure(records, preset, schemes, depths=None, **where) -> Figure:
    depths = depths or preset.depths
    fig = Figure("Final val loss vs depth", "layers", "final val loss (nats)", logx=True, caption=OMITTED)
    for s in schemes:
        gs = [group(records, **at_depth(preset, s, d, **where)) for d in depths]
        fig.series.append(Series(trained_label(s, gs), list(depths), [g.mean for g in gs], [g.sd for g in gs]))
    return fig


