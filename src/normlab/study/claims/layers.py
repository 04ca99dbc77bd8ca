"""Claims about what happens inside the layers: gradients at init (C2, C3), residual growth (C5),
watered-down depth (C6). They read the per-layer diagnostics of the depth sweep."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from normlab.config import Change, derive
from normlab.data import corpus_of
from normlab.diagnostics.gradients import step0_block_gradients
from normlab.report.figure import Figure, Series
from normlab.study.claims.base import FAILS, HOLDS, INCONCLUSIVE, Claim, Part, claim
from normlab.study.claims.decisions import band, sign
from normlab.study.claims.grouping import group, n_seeds, select
from normlab.study.claims.prose import ci_text, fmt, pct
from normlab.study.claims.statistics import Level, loglog_slope, mean_over_seeds, slope, spearman, t_interval
from normlab.study.claims.sweeps import CellClaim, at_depth, cell_label, depth_sweep, trains

SQRT_BAND = (-0.75, -0.25)  # fitted exponent of Pre-LN's gradient vs L that counts as "like 1/sqrt(L)"
# C2's "nearly uniform across layers": the fitted last/first block-gradient ratio within this factor either way.
# A margin of normlab's choosing (the paper states no number): half again, where "grows toward the output" in
# Post-LN is several-fold at 16 layers
UNIFORM = 1.5
LINEAR, RANDOM_WALK = 1.0, 0.5  # C5: O(l) is an exponent of 1; a random walk (Xiong et al.'s Lemma 1) is ½


LAST_FFN = "grad_norm/mlp.sublayer.proj.weight"


def profile(records, scheme: str, depth: int, preset, key: str, when: str = "init", **where) -> list[float | None]:
    """Per-layer metric `key` ("metric/site"), mean over seeds, for one scheme and depth of the depth sweep."""
    chosen = select(records, **at_depth(preset, scheme, depth, **where))
    source = "layers_init" if when == "init" else "layers_final"
    values = [getattr(r, source).get(key) for r in chosen if r.status == "completed" or when == "init"]
    return mean_over_seeds([v for v in values if v])


def profiles_by_seed(records, scheme: str, depth: int, preset, key: str, when: str = "init",
                     **where) -> dict[int, list[float | None]]:
    """{seed: per-layer metric `key`} for one scheme and depth of the depth sweep (runs that trained, for
    `final`; every run at init)."""
    chosen = select(records, **at_depth(preset, scheme, depth, **where))
    source = "layers_init" if when == "init" else "layers_final"
    return {r.seed: getattr(r, source)[key] for r in chosen
            if (r.status == "completed" or when == "init") and getattr(r, source).get(key)}


def seed_interval(values: dict[int, float | None], level: Level
                  ) -> tuple[float | None, list[float] | None, list[int], str]:
    """Mean over seeds of a per-seed statistic, its two-sided t interval at `level` (95 % at a single look), the
    seeds, and the test in words."""
    kept = {s: v for s, v in values.items() if v is not None}
    mean = sum(kept.values()) / len(kept) if kept else None
    return (mean, t_interval(list(kept.values()), level.two_sided), sorted(kept),
            f"t interval over {len(kept)} seeds' own estimates, {pct(level.two_sided)}")


def log_growth(values: list[float | None]) -> float | None:
    """Fitted log-change of a positive per-layer profile from its first to its last layer: the least-squares
    slope of log value on layer index, times (L − 1). > 0: grows toward the output."""
    layers, kept = _clean(values)
    pairs = [(l, math.log(v)) for l, v in zip(layers, kept) if v > 0]
    s = slope([l for l, _ in pairs], [v for _, v in pairs])
    return None if s is None else s * (len(values) - 1)


def profiles_figure(records, preset, schemes, key, title, ylabel, when="init", logy=False,
                    cell: tuple[int, dict] | None = None, **where) -> Figure:
    """One series per scheme and depth of the sweep, and the claim's depth cell (`CellClaim.cell`) where it has
    one."""
    fig = Figure(title, "layer", ylabel, logy=logy)
    cells = [(d, {}, f"L={d}") for d in preset.depths]
    if cell and cell[1]:
        cells.append((cell[0], cell[1], cell_label(*cell)))
    for s in schemes:
        for d, cell_where, label in cells:
            y = profile(records, s, d, preset, key, when, **cell_where, **where)
            if y:
                fig.series.append(Series(f"{s}, {label}", list(range(len(y))), y))
    return fig


def _clean(values: list[float | None]) -> tuple[list[int], list[float]]:
    pairs = [(i, v) for i, v in enumerate(values) if v is not None]
    return [i for i, _ in pairs], [v for _, v in pairs]


@claim("C2", "Gradients at init: Post-LN grows toward the output, Pre-LN is uniform and ~1/√L", sources="000, 001",
       paper="Xiong et al. 2020 (arXiv 2002.04745) Theorem 1 and Fig. 3")
class GradientsAtInitC2(Claim):
    """At initialization Post-LN's gradient norms grow toward the output layers, while Pre-LN's are nearly uniform
    across layers and shrink like 1/sqrt(L) as L grows (Xiong et al. 2020).
    """

    WHERE: dict = {}  # the runs of the depth sweep: Xiong et al.'s init is the claim's recipe (`init`)
    RECIPES = ("xiong", "gpt2")  # measured at init under both, so the init pass judges its own recipe's models

    @dataclass(frozen=True)
    class Knobs(Claim.Knobs):
        # the step-0 parts (Post-LN's growth, Pre-LN's uniformity) are measured at init, without training, over this
        # many seeds from the preset's first: a step-0 quantity costs one forward and backward pass per seed
        init_seeds: int = 100

    def runs(self, preset):
        return depth_sweep(preset, ("pre", "post"))

    def measure(self, preset):
        """Step-0 per-block gradient norms of Pre-LN and Post-LN at the deepest depth, over the knob `init_seeds`
        seeds from the preset's first (no training: a model at init and its first batch), under both init
        recipes: the Post-LN-growth and Pre-LN-uniform parts are step-0 quantities, so they are judged on a
        hundred seeds, not on the 5 of the trained sweep."""
        deepest, first = max(preset.depths), min(preset.seeds)
        seeds = list(range(first, first + self.knobs(preset).init_seeds))
        at = preset.config.model
        out: dict = {"depth": deepest, "seeds": seeds, "profiles": {}, "key": self.measure_key(preset),
                     "at": {"model.block_size": at.block_size, "model.d_model": at.d_model}}
        corpus = None
        for recipe in self.RECIPES:
            for scheme in ("pre", "post"):
                profiles = {}
                for seed in seeds:
                    cfg = derive(preset.config, Change(scheme=scheme, n_layer=deepest, init=recipe, seed=seed))
                    corpus = corpus or corpus_of(cfg)
                    profiles[str(seed)] = step0_block_gradients(cfg, corpus)
                out["profiles"][f"{recipe}/{scheme}"] = profiles
        return out

    def measure_key(self, preset):
        """The measured models' config ids at the first seed: a recipe whose meaning moved (`gpt2`'s σ with the
        width, 2026-11-28) moves the key, and the study measures again."""
        deepest, first = max(preset.depths), min(preset.seeds)
        return " ".join(derive(preset.config, Change(scheme=scheme, n_layer=deepest, init=recipe, seed=first)).hash()
                        for recipe in self.RECIPES for scheme in ("pre", "post"))

    def init_profiles(self, records, measurement, scheme: str) -> tuple[dict[int, list[float]], str]:
        """{seed: step-0 block-gradient profile at the deepest depth} of the recipe these records are judged under:
        the many-seed measurement where it holds that recipe, else the trained sweep's own step-0 records."""
        base = next((r.base for r in records if r.base), None) or {}
        recipe = base.get("model.init", self.init)
        measured = (measurement or {}).get("profiles", {}).get(f"{recipe}/{scheme}")
        if measured and not any(base.get(k) not in (None, v) for k, v in (measurement or {}).get("at", {}).items()):
            return {int(k): v for k, v in measured.items()}, f"{len(measured)} seeds at init (no training)"
        return {}, ""

    def settings(self, preset) -> dict[str, Any]:
        return {"depths": preset.depths,
                "paper": "Xiong et al. 2020 (arXiv 2002.04745), Theorem 1 (‖∂L/∂W^{2,L}‖: Post-LN O(d√ln d), "
                         "Pre-LN O(d√(ln d / L))) and Fig. 3 (per-layer gradient norms at init)",
                "measured": "step-0 gradient (before clipping) of the last layer's FFN output weight W² vs L, "
                            "fitted per seed over the trained sweep; per-block gradient norms at the deepest L "
                            f"at init over {self.knobs(preset).init_seeds} seeds (no training)",
                "inv_sqrt_band": SQRT_BAND, "uniform_within": f"a factor of {UNIFORM:g} from the first block to "
                                                              "the last (fitted), by equivalence (TOST)"}

    def step0_profiles(self, records, measurement, preset, scheme, deepest) -> tuple[dict, str]:
        """A scheme's step-0 gradient profiles at the deepest depth, {seed: profile}, and where they come from: many
        seeds at init where measured, else the trained sweep's own."""
        measured, where = self.init_profiles(records, measurement, scheme)
        if measured:
            return measured, where
        return (profiles_by_seed(records, scheme, deepest, preset, "grad_norm/block", **self.WHERE),
                "the trained sweep's seeds at step 0")

    def uniform_part(self, profiles, deepest) -> tuple[Part, float | None, list[float] | None]:
        """"Pre-LN's gradients are nearly uniform", by equivalence of the fitted log growth with 0 within
        ±log UNIFORM; with the mean growth and its TOST interval."""
        by_seed, where = profiles
        growth = {seed: log_growth(p) for seed, p in by_seed.items()}
        kept = [v for v in growth.values() if v is not None]
        mean = sum(kept) / len(kept) if kept else None
        tost = t_interval(kept, self.level.tost)
        bound = math.log(UNIFORM)
        part = Part(f"Pre-LN's gradients are nearly uniform across layers (within {UNIFORM:g}×)",
                    band(tost, -bound, bound), f"fitted log(last / first block gradient) at L = {deepest}, step 0",
                    mean, tost,
                    f"equivalence (TOST) at α = {self.level.alpha:g}: the {pct(self.level.tost)} t interval over "
                    f"{len(kept)} seeds ({where}) inside ±log {UNIFORM:g}; does not hold when it lies outside",
                    sorted(k for k, v in growth.items() if v is not None),
                    f"the last block's gradient is {_x(mean)} the first's, {pct(self.level.tost)} interval "
                    f"{ci_text(tost, '+.2f')} against ±{bound:.2f} (log scale), {where}", bounds=(-bound, bound))
        return part, mean, tost

    def verdict(self, records, measurement, preset):
        deepest = max(preset.depths)
        post = profile(records, "post", deepest, preset, "grad_norm/block", **self.WHERE)
        pre = profile(records, "pre", deepest, preset, "grad_norm/block", **self.WHERE)
        last = {s: self._last_ffn_by_depth(records, preset, s) for s in ("pre", "post")}
        slopes = {s: loglog_slope(list(v), list(v.values())) if len(v) >= 2 else None for s, v in last.items()}
        settings = self.settings(preset)
        per_seed = {s: self._last_ffn_by_seed(records, preset, s) for s in ("pre", "post")}
        pre_p, pre_ci, pre_seeds, pre_test = seed_interval(
            {seed: loglog_slope(list(by), list(by.values())) if len(by) >= 2 else None
             for seed, by in per_seed["pre"].items()}, self.level)
        profiles = {s: self.step0_profiles(records, measurement, preset, s, deepest) for s in ("pre", "post")}
        growth = {seed: log_growth(p) for seed, p in profiles["post"][0].items()}
        post_g, post_ci, post_seeds, post_test = seed_interval(growth, self.level)
        uniform, pre_g, pre_tost = self.uniform_part(profiles["pre"], deepest)
        bound = math.log(UNIFORM)
        parts = [Part("Pre-LN's last-layer gradient shrinks like 1/√L", band(pre_ci, *SQRT_BAND),
                      "exponent p of ‖∂L/∂W²‖ of the last layer ∝ L^p", pre_p, pre_ci,
                      f"{pre_test}; holds when the interval lies inside {SQRT_BAND} (−½ ± ¼), does not hold when "
                      f"it lies outside", pre_seeds,
                      f"L^{fmt(pre_p, '+.2f')}, {pct(self.level.two_sided)} interval {ci_text(pre_ci, '+.2f')} "
                      f"over L = {', '.join(map(str, sorted(last['pre'])))}", bounds=SQRT_BAND),
                 Part("Post-LN's gradients grow toward the output layers", sign(post_ci, +1),
                      f"fitted log(last / first block gradient) at L = {deepest}, step 0", post_g, post_ci,
                      f"{post_test} ({profiles['post'][1]}); holds when the interval is above 0, does not hold "
                      "when below", post_seeds,
                      f"the last block's gradient is {_x(post_g)} the first's, {pct(self.level.two_sided)} interval "
                      f"{ci_text(post_ci, '+.2f')} (log scale), {profiles['post'][1]}"),
                 uniform]
        if not profiles["post"][0] or not profiles["pre"][0] or pre_p is None:
            return self.make(INCONCLUSIVE, "no step-0 gradients recorded", None, 0, settings,
                             "the depth sweep has no per-layer gradients at two depths or more", parts=parts)
        pre_ratio = max(v for v in pre if v) / min(v for v in pre if v) if pre else None
        summary = (f"at step 0: the last layer's FFN-weight gradient goes as L^{fmt(slopes['pre'], '+.2f')} in "
                   f"Pre-LN (per seed {ci_text(pre_ci, '+.2f')}) and L^{fmt(slopes['post'], '+.2f')} in Post-LN "
                   f"over L = "
                   f"{', '.join(map(str, sorted(last['pre'])))}; at L={deepest} ({profiles['post'][1]}), Post-LN's "
                   f"last block gets {_x(post_g)} the first block's gradient ({ci_text(post_ci, '+.2f')} on the log "
                   f"scale) and Pre-LN's {_x(pre_g)} ({pct(self.level.tost)} {ci_text(pre_tost, '+.2f')} against "
                   f"±{bound:.2f} for 'nearly uniform')")
        return self.make(None, "exponent p of Pre-LN's last-layer FFN gradient ∝ L^p", pre_p,
                         n_seeds(select(records, False, n_layer=deepest, **self.WHERE)), settings, summary,
                         parts=parts, interval=pre_ci, test=parts[0].test, seeds=pre_seeds,
                         exponents=slopes, post_log_growth=post_g, pre_log_growth=pre_g, pre_max_min_ratio=pre_ratio,
                         last_ffn_grad_by_depth={s: {str(d): g for d, g in v.items()} for s, v in last.items()},
                         post_profile=post, pre_profile=pre)

    def _last_ffn_by_seed(self, records, preset, scheme) -> dict[int, dict[int, float]]:
        """{seed: {L: the last layer's FFN-weight gradient at step 0}} over the depth sweep."""
        out: dict[int, dict[int, float]] = {}
        for d in preset.depths:
            for seed, p in profiles_by_seed(records, scheme, d, preset, LAST_FFN, **self.WHERE).items():
                if p and p[-1]:
                    out.setdefault(seed, {})[d] = p[-1]
        return out

    def _last_ffn_by_depth(self, records, preset, scheme) -> dict[int, float]:
        out = {}
        for d in preset.depths:
            y = profile(records, scheme, d, preset, LAST_FFN, **self.WHERE)
            if y and y[-1]:
                out[d] = y[-1]
        return out

    def figures(self, records, measurement, preset):
        fig = Figure("Last layer's FFN-weight gradient at step 0 vs depth", "layers L",
                     "‖∂L/∂W²‖ of the last layer", logx=True, logy=True)
        for s in ("pre", "post"):
            by_depth = self._last_ffn_by_depth(records, preset, s)
            fig.series.append(Series(s, list(by_depth), list(by_depth.values())))
        return [fig, profiles_figure(records, preset, ("pre", "post"), "grad_norm/block",
                                     "Gradient norm per block at step 0", "‖∇W‖ of the block",
                                     logy=True, **self.WHERE)]


@claim("C3", "Pre-LN's bottom layers get larger gradients than its top layers", sources="004",
       paper="Shleifer et al. 2021 (NormFormer, arXiv 2110.09456) §1 and Fig. 1: Pre-LN's early layers get much "
             "larger gradients than its later ones; Wang et al. 2022 (DeepNet) §3")
class BottomGradientsC3(Claim):
    """Pre-LN's bottom layers get larger gradients than its top layers (DeepNet paper)."""

    def runs(self, preset):
        return depth_sweep(preset, ("pre",))

    def verdict(self, records, measurement, preset):
        deepest = max(preset.depths)
        init = profile(records, "pre", deepest, preset, "grad_norm/block")
        final = profile(records, "pre", deepest, preset, "grad_norm/block", when="final")
        if not init:
            return self.make(INCONCLUSIVE, "no step-0 gradients recorded", None, 0, {"depth": deepest},
                             "the depth sweep has no per-layer diagnostics")
        # per seed, the fitted log(first / last block gradient): > 0 when the bottom layers get more
        shrink = {seed: -g for seed, g in ((seed, log_growth(p)) for seed, p in
                                           profiles_by_seed(records, "pre", deepest, preset, "grad_norm/block").items())
                  if g is not None}
        mean, ci, seeds, test = seed_interval(shrink, self.level)
        ratio = math.exp(mean) if mean is not None else None
        interval = [math.exp(ci[0]), math.exp(ci[1])] if ci else None
        trend = spearman(*_clean(init))
        final_trend = spearman(*_clean(final)) if final else None
        verdict = sign(ci, +1)
        summary = (f"Pre-LN, L={deepest}, step 0: the first block's gradient is {fmt(ratio, '.2f')}× the last's "
                   f"(fitted over the layers, per seed; {pct(self.level.two_sided)} interval "
                   f"{ci_text(interval, '.2f')}); rank "
                   "correlation "
                   f"with the layer {fmt(trend, '+.2f')} at init, {fmt(final_trend, '+.2f')} at the last measured step")
        settings = {"n_layer": deepest, "measured": "block weight-gradient norm at step 0, per layer and seed",
                    "rule": "holds when the interval of the fitted first/last ratio lies above 1, does not hold "
                            "when it lies below 1"}
        return self.make(verdict, "fitted first/last block gradient norm at step 0", ratio,
                         n_seeds(select(records, False, scheme="pre", n_layer=deepest)), settings, summary,
                         interval=interval, bounds=[1.0], scale="log", test=f"{test} (of the log ratio)", seeds=seeds,
                         trend_init=trend, trend_final=final_trend, profile_init=init, profile_final=final)

    def figures(self, records, measurement, preset):
        return [profiles_figure(records, preset, ("pre",), "grad_norm/block", "Pre-LN gradient norm per block",
                                "‖∇W‖ at step 0", logy=True),
                profiles_figure(records, preset, ("pre",), "grad_norm/block", "Pre-LN gradient norm per block, trained",
                                "‖∇W‖ at the last measured step", when="final", logy=True)]


@claim("C5", "Pre-LN's residual stream grows like O(l)", sources="000, 003, 004",
       paper="the claim as three source articles make it (a Q&A on norm placement; \"Is Pre-Norm perfect?\"; Su "
             "Jianlin, spaces.ac.cn/archives/9009); Xiong et al. 2020 (arXiv 2002.04745) Lemma 1 gives E‖x_l‖² ∝ l at "
             "init, i.e. ‖x_l‖ ∝ √l, so O(l) is the stronger claim")
class ResidualGrowthC5(CellClaim):
    """In Pre-LN the residual stream grows with depth: ‖x_l‖ grows like O(l)."""

    def runs(self, preset):
        return depth_sweep(preset, ("pre",)) + self.cell_runs(preset, ("pre",))

    def verdict(self, records, measurement, preset):
        deepest, where = self.cell(preset, max(preset.depths))
        final = profile(records, "pre", deepest, preset, "residual_rms/block", when="final", **where)
        init = profile(records, "pre", deepest, preset, "residual_rms/block", **where)
        if not final:
            return self.make(INCONCLUSIVE, "no per-layer RMS recorded", None, 0, {"n_layer": deepest},
                             "the depth sweep has no per-layer diagnostics")
        exponents = {seed: loglog_slope(*_from_layer_1(p)) for seed, p in
                     profiles_by_seed(records, "pre", deepest, preset, "residual_rms/block", when="final",
                                      **where).items()}
        p, ci, seeds, test = seed_interval(exponents, self.level)
        p_init, ci_init, _, _ = seed_interval(
            {seed: loglog_slope(*_from_layer_1(v)) for seed, v in
             profiles_by_seed(records, "pre", deepest, preset, "residual_rms/block", **where).items()}, self.level)
        if ci is None:
            verdict = INCONCLUSIVE
        elif not ci[0] <= LINEAR <= ci[1]:
            verdict = FAILS  # the interval excludes O(l)
        elif ci[0] > RANDOM_WALK:
            verdict = HOLDS  # contains 1 and excludes √l
        else:
            verdict = INCONCLUSIVE  # contains both l and √l
        summary = (f"trained Pre-LN, {cell_label(deepest, where)}: RMS(x_l) grows like l^{fmt(p, '.2f')} for l ≥ 1, "
                   f"{pct(self.level.two_sided)} interval over "
                   f"seeds {ci_text(ci, '+.2f')}; at init like l^{fmt(p_init, '.2f')} ({ci_text(ci_init, '+.2f')}). "
                   f"O(l) is p = 1; Xiong et al.'s Lemma 1 (‖x_l‖² linear in l) is p = ½")
        settings = {"n_layer": deepest, **_budget(preset, where),
                    "measured": "RMS of the stream x_l entering block l, trained, per seed",
                    "rule": f"holds when the exponent's {pct(self.level.two_sided)} interval contains 1 and "
                            "excludes ½; "
                            "does not hold when it excludes 1; inconclusive when it contains both",
                    "fitted": "from l ≥ 1: x_0 is the embedding, whose small RMS alone pulls the slope to ≈ 1"}
        return self.make(verdict, "exponent p of RMS(x_l) ∝ l^p for l ≥ 1, trained", p,
                         n_seeds(select(records, False, scheme="pre", n_layer=deepest, **where)),
                         settings, summary,
                         interval=ci, bounds=[RANDOM_WALK, LINEAR], test=test, seeds=seeds, exponent_init=p_init,
                         exponent_init_ci95=ci_init,
                         exponent_by_seed={str(k): v for k, v in exponents.items()},
                         trend=spearman(*_from_layer_1(final)), profile_final=final, profile_init=init)

    def figures(self, records, measurement, preset):
        at = self.cell(preset, max(preset.depths))
        return [profiles_figure(records, preset, ("pre", "post"), "residual_rms/block", "Residual-stream RMS, trained",
                                "RMS(x_l)", when="final", logy=True, cell=at),
                profiles_figure(records, preset, ("pre", "post"), "residual_rms/block", "Residual-stream RMS at init",
                                "RMS(x_l)", logy=True, cell=at)]


@claim("C6", "Pre-LN's depth is watered down", sources="003, 004",
       paper="Su Jianlin's analysis of Pre-LN's effective depth (spaces.ac.cn/archives/9009, and the article \"Is "
             "Pre-Norm perfect?\"); Liu et al. 2020 (Admin, arXiv 2004.08249) §4.2 on Pre-LN's shallower dependency")
class WateredDownDepthC6(CellClaim):
    """In Pre-LN deep layers contribute little: ‖F_l‖/‖x_l‖ falls with l, consecutive layers' inputs become nearly
    parallel, so an L-layer Pre-LN net behaves like a shallower one; Post-LN layers stay full weight.
    """

    def runs(self, preset):
        return depth_sweep(preset, ("pre", "post")) + self.cell_runs(preset, ("pre",))

    def settings(self, preset, deepest, where) -> dict[str, Any]:
        return {"n_layer": deepest, **_budget(preset, where),
                "measured": f"trained Pre-LN runs at {cell_label(deepest, where)}, per seed; the Post-LN contrast "
                            "in the depth sweep, at the deepest depth where Post-LN trains",
                "rule": f"each part: the {pct(self.level.two_sided)} interval over seeds of a fitted per-layer "
                        "trend excludes 0 on the claimed side (holds) or on the other side (does not hold)",
                "trend": "least-squares slope of log(value) on the layer index, times L − 1 (the fitted log "
                         "change from the first layer to the last); for ΔL, of ΔL itself",
                "effective_depth": "fraction of layers whose skip raises val loss by more than 1 % (reported)"}

    def pre_trends(self, records, preset, deepest, where) -> tuple[tuple, tuple, tuple]:
        """Pre-LN's three fitted per-layer trends in its cell, each an interval over seeds (`seed_interval`): the
        contribution ratio's, the angular distance's (log change, first → last layer) and the layer-skip ΔL's."""
        trends = {key: {seed: log_growth(p) for seed, p in
                        profiles_by_seed(records, "pre", deepest, preset, key, when="final", **where).items()}
                  for key in ("contribution_ratio/block", "angular_distance/block")}
        skips = {seed: _skip_trend(r) for seed, r in _skip_records(records, "pre", deepest, preset, **where).items()}
        return (seed_interval(trends["contribution_ratio/block"], self.level),
                seed_interval(trends["angular_distance/block"], self.level), seed_interval(skips, self.level))

    def verdict(self, records, measurement, preset):
        deepest, where = self.cell(preset, max(preset.depths))
        sweep_deepest = max(preset.depths)
        pre = profile(records, "pre", deepest, preset, "contribution_ratio/block", when="final", **where)
        post = profile(records, "post", sweep_deepest, preset, "contribution_ratio/block", when="final")
        angle = profile(records, "pre", deepest, preset, "angular_distance/block", when="final", **where)
        eff = {"pre": _effective(records, "pre", deepest, preset, **where),
               "post": _effective(records, "post", sweep_deepest, preset)}
        settings = self.settings(preset, deepest, where)
        if not pre:
            return self.make(INCONCLUSIVE, "missing diagnostics", None, 0, {"n_layer": deepest},
                             "the depth sweep lacks per-layer diagnostics of trained runs")
        contribution, angular, skip = self.pre_trends(records, preset, deepest, where)
        # Post-LN's contrast where it trains: an untrained net's layers say nothing about depth, and Post-LN often
        # does not train at the deepest L; the deepest depth where ≥ 80 % of its seeds trained, paired by seed
        contrast_depth = next((d for d in sorted(preset.depths, reverse=True)
                               if trains(group(records, **at_depth(preset, "post", d)))), None)
        post_minus_pre = seed_interval(_paired_trend(records, preset, contrast_depth) if contrast_depth else {},
                                       self.level)
        parts = [
            _trend_part("Pre-LN's contribution ratio ‖F_l‖/‖x_l‖ falls with l", contribution, -1,
                        "fitted log change of the contribution ratio, first → last layer", self.level),
            _trend_part("consecutive inputs become nearly parallel: the angle between x_l and x_{l+1} falls with l "
                        "(cos rises)", angular, -1, "fitted log change of the angular distance, first → last layer",
                        self.level),
            _trend_part("skipping a deeper layer costs less: the layer-skip ΔL falls with l", skip, -1,
                        "fitted change of ΔL from the first layer to the last (nats)", self.level),
            _trend_part("Post-LN layers stay full weight: its contribution ratio falls less than Pre-LN's (paired by "
                        f"seed, at L = {contrast_depth or 'n/a'}: the deepest depth where Post-LN trains)",
                        post_minus_pre, +1, "Post-LN − Pre-LN fitted log change of the contribution ratio",
                        self.level)]
        summary = (f"trained, {cell_label(deepest, where)}: Pre-LN's contribution ratio changes {_x(contribution[0])} "
                   "from the first "
                   f"layer to the last ({ci_text(contribution[1], '+.2f')} log), the angle between consecutive inputs "
                   f"{_x(angular[0])} ({ci_text(angular[1], '+.2f')} log), the layer-skip ΔL by "
                   f"{fmt(skip[0], '+.3f')} nats ({ci_text(skip[1], '+.3f')}); Post-LN − Pre-LN contribution trend at "
                   f"L = {contrast_depth or 'n/a'} "
                   f"{fmt(post_minus_pre[0], '+.2f')} ({ci_text(post_minus_pre[1], '+.2f')})"
                   + ("" if contrast_depth else " (Post-LN trains at no depth of the sweep)")
                   + f"; effective depth (reported) Pre-LN {fmt(eff['pre'], '.2f')}·L at L={deepest}, "
                     f"Post-LN {fmt(eff['post'], '.2f')}·L at L={sweep_deepest}")
        return self.make(None, "Pre-LN fitted log change of the contribution ratio, first → last layer",
                         contribution[0], n_seeds(select(records, False, n_layer=deepest, **where)),
                         settings, summary,
                         parts=parts, interval=contribution[1], test=contribution[3], seeds=contribution[2],
                         effective_depth_fraction=eff, pre_contribution=pre, post_contribution=post,
                         pre_angular_distance=angle)

    def figures(self, records, measurement, preset):
        skip = Figure("Layer-skip ΔL (trained)", "layer", "ΔL when skipped (nats)", logy=False)
        depth, where = self.cell(preset, max(preset.depths))
        cells = [(s, max(preset.depths), {}) for s in ("pre", "post")] + ([("pre", depth, where)] if where else [])
        for s, d, cell_where in cells:
            chosen = _skip_records(records, s, d, preset, **cell_where).values()
            deltas = mean_over_seeds([r.layer_skip["delta_loss"] for r in chosen])
            if deltas:
                skip.series.append(Series(f"{s}, {cell_label(d, cell_where)}", list(range(len(deltas))), deltas))
        return [profiles_figure(records, preset, ("pre", "post"), "contribution_ratio/block",
                                "Contribution ratio ‖x_{l+1} − x_l‖/‖x_l‖, trained", "ratio", when="final", logy=True,
                                cell=(depth, where)),
                profiles_figure(records, preset, ("pre", "post"), "angular_distance/block",
                                "Angular distance between x_l and x_{l+1}, trained", "arccos(cos)/π", when="final",
                                cell=(depth, where)),
                skip]


def _from_layer_1(values: list[float | None]) -> tuple[list[int], list[float]]:
    """(l, value) for l ≥ 1 (C5: the stream after the first block, not the embedding x_0)."""
    layers, kept = _clean(values)
    pairs = [(l, v) for l, v in zip(layers, kept) if l >= 1]
    return [l for l, _ in pairs], [v for _, v in pairs]


def _x(log_ratio: float | None) -> str:
    """A fitted log ratio as a factor: `3.1×`."""
    return "n/a" if log_ratio is None else f"{math.exp(log_ratio):.2f}×"


def _trend_part(name: str, estimate, claimed: int, statistic: str, level: Level) -> Part:
    """A part judged by the sign of a per-seed trend's interval at `level` (`seed_interval`'s tuple)."""
    mean, ci, seeds, test = estimate
    side = "below" if claimed < 0 else "above"
    return Part(name, sign(ci, claimed), statistic, mean, ci,
                f"{test}; holds when the interval is {side} 0", seeds,
                f"{fmt(mean, '+.3f')}, {pct(level.two_sided)} interval {ci_text(ci, '+.3f')}")


def _paired_trend(records, preset, depth: int, key: str = "contribution_ratio/block") -> dict[int, float]:
    """{seed: Post-LN's − Pre-LN's fitted log change of `key`} at one depth, over seeds where both trained."""
    post, pre = ({seed: log_growth(p)
                  for seed, p in profiles_by_seed(records, s, depth, preset, key, when="final").items()}
                 for s in ("post", "pre"))
    return {seed: post[seed] - pre[seed] for seed in set(post) & set(pre)
            if post[seed] is not None and pre[seed] is not None}


def _budget(preset, where: dict) -> dict:
    """A depth cell's budget for a verdict's settings (the steps; the base's when the cell keeps them)."""
    return {"steps": where.get("train.steps", preset.config.train.steps),
            "depth_cell": dict(where) if where else "the depth sweep's deepest"}


def _skip_records(records, scheme, depth, preset, **where) -> dict[int, object]:
    chosen = select(records, **at_depth(preset, scheme, depth, **where))
    return {r.seed: r for r in chosen if r.layer_skip and r.status == "completed"}


def _skip_trend(record) -> float | None:
    """The fitted change of the layer-skip ΔL from the first layer to the last (a sampled sweep: its layers)."""
    deltas = record.layer_skip.get("delta_loss") or []
    s = slope(list(range(len(deltas))), deltas)  # unsampled layers (None) are left out of the fit
    return None if s is None or len(deltas) < 3 else s * (len(deltas) - 1)


def _effective(records, scheme, depth, preset, **where) -> float | None:
    chosen = select(records, **at_depth(preset, scheme, depth, **where))
    fractions = [r.layer_skip["effective_depth_fraction"] for r in chosen if r.layer_skip and r.status == "completed"]
    return sum(fractions) / len(fractions) if fractions else None

