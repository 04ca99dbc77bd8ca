"""Claims about what happens inside the layers: gradients at init (C2, C3), residual growth (C5),
watered-down depth (C6). They read the per-layer diagnostics of the depth sweep."""
from __future__ import annotations

from normlab.study.claims.base import (CLAIMS, FAILS, HOLDS, INCONCLUSIVE, Claim, Figure, Series, compare, group,
                                       loglog_slope, mean_over_seeds, n_seeds, select, spearman)
from normlab.study.claims.stability import depth_sweep

TREND = 0.5  # |rank correlation| above which a per-layer trend counts as a trend
UNIFORM_RATIO = 2.0  # max/min across layers at or below which gradients count as "nearly uniform"
SQRT_BAND = (-0.75, -0.25)  # fitted exponent of Pre-LN's gradient vs L that counts as "like 1/sqrt(L)"
LINEAR_GROWTH = 0.75  # fitted exponent of residual RMS vs layer at or above which growth counts as O(l)
SHALLOW = 0.5  # Pre-LN "behaves like a shallower net" if at most this fraction of its layers matter when skipped
SUBLINEAR = 0.5  # below this, growth is clearly slower than linear (a random walk grows like l^0.5)


# Xiong et al. 2020 (arXiv 2002.04745) analyse Xavier-initialised models without GPT-2's residual scaling, which
# by design makes the last layer's gradient independent of L and so removes the effect C2 is about.
XIONG_INIT = {"model.init": "xavier", "model.init_residual_scaling": False}
FLAT = 0.25  # |exponent| of a gradient vs L at or below which it counts as independent of L
LAST_FFN = "grad_norm/mlp.sublayer.proj.weight"


def profile(records, scheme: str, depth: int, preset, key: str, when: str = "init", **where) -> list[float | None]:
    """Per-layer metric `key` ("metric/site"), mean over seeds, for one scheme and depth of the depth sweep."""
    chosen = select(records, model__scheme=scheme, model__n_layer=depth, train__lr=preset.lr_fixed,
                    train__warmup_steps=preset.warmup, **where)
    source = "layers_init" if when == "init" else "layers_final"
    values = [getattr(r, source).get(key) for r in chosen if r.status == "completed" or when == "init"]
    return mean_over_seeds([v for v in values if v])


def profiles_figure(records, preset, schemes, key, title, ylabel, when="init", logy=False, **where) -> Figure:
    fig = Figure(title, "layer", ylabel, logy=logy)
    for s in schemes:
        for d in preset.depths:
            y = profile(records, s, d, preset, key, when, **where)
            if y:
                fig.series.append(Series(f"{s}, L={d}", list(range(len(y))), y))
    return fig


def _clean(values: list[float | None]) -> tuple[list[int], list[float]]:
    pairs = [(i, v) for i, v in enumerate(values) if v is not None]
    return [i for i, _ in pairs], [v for _, v in pairs]


@CLAIMS.register("C2")
class GradientsAtInitC2(Claim):
    id, title = "C2", "Gradients at init: Post-LN grows toward the output, Pre-LN is uniform and ~1/√L"
    statement = ("At initialization Post-LN's gradient norms grow toward the output layers, while Pre-LN's are "
                 "nearly uniform across layers and shrink like 1/sqrt(L) as L grows (Xiong et al. 2020).")
    sources = "000, 001"
    paper = 'Xiong et al. 2020 (arXiv 2002.04745) Theorem 1 and Fig. 3'
    WHERE = {k.replace(".", "__"): v for k, v in XIONG_INIT.items()}

    def runs(self, preset):
        return depth_sweep(preset, ("pre", "post"), **XIONG_INIT)

    def verdict(self, records, measurement, preset):
        deepest = max(preset.depths)
        post = profile(records, "post", deepest, preset, "grad_norm/block", **self.WHERE)
        pre = profile(records, "pre", deepest, preset, "grad_norm/block", **self.WHERE)
        last = {s: self._last_ffn_by_depth(records, preset, s) for s in ("pre", "post")}
        slopes = {s: loglog_slope(list(v), list(v.values())) if len(v) >= 2 else None for s, v in last.items()}
        settings = {"depths": preset.depths, "init": "Xavier-normal, no residual scaling, for both schemes",
                    "paper": "Xiong et al. 2020 (arXiv 2002.04745), Theorem 1 (‖∂L/∂W^{2,L}‖: Post-LN O(d√ln d), "
                             "Pre-LN O(d√(ln d / L))) and Fig. 3 (per-layer gradient norms at init)",
                    "measured": "step-0 gradient (before clipping) of the last layer's FFN output weight W² vs L; "
                                "per-block gradient norms at the deepest L",
                    "trend_threshold": TREND, "uniform_max_min_ratio": UNIFORM_RATIO, "inv_sqrt_band": SQRT_BAND,
                    "flat_if_abs_exponent_at_most": FLAT}
        if not post or not pre or None in slopes.values():
            return self.make(INCONCLUSIVE, "no step-0 gradients recorded", None, 0, settings,
                             "the Xavier depth sweep has no per-layer gradients at two depths or more")
        post_trend = spearman(*_clean(post))
        pre_ratio = max(v for v in pre if v) / min(v for v in pre if v)
        checks = {"pre_last_ffn_shrinks_like_inv_sqrt_L": SQRT_BAND[0] <= slopes["pre"] <= SQRT_BAND[1],
                  "post_last_ffn_independent_of_L": abs(slopes["post"]) <= FLAT,
                  "post_grows_toward_output": (post_trend or 0) > TREND,
                  "pre_nearly_uniform": pre_ratio <= UNIFORM_RATIO}
        verdict = HOLDS if all(checks.values()) else FAILS
        summary = (f"Xavier init: the last layer's FFN-weight gradient goes as L^{_f(slopes['pre'], '+.2f')} in "
                   f"Pre-LN and L^{_f(slopes['post'], '+.2f')} in Post-LN over L = "
                   f"{', '.join(map(str, sorted(last['pre'])))}; at "
                   f"L={deepest}, Post-LN's gradient-vs-layer rank correlation {_f(post_trend, '+.2f')}, Pre-LN's "
                   f"max/min across layers {pre_ratio:.2f}")
        return self.make(verdict, "exponent p of Pre-LN's last-layer FFN gradient ∝ L^p", slopes["pre"],
                         n_seeds(select(records, False, model__n_layer=deepest, **self.WHERE)), settings, summary,
                         checks=checks, exponents=slopes, post_trend=post_trend, pre_max_min_ratio=pre_ratio,
                         last_ffn_grad_by_depth={s: {str(d): g for d, g in v.items()} for s, v in last.items()},
                         post_profile=post, pre_profile=pre)

    def _last_ffn_by_depth(self, records, preset, scheme) -> dict[int, float]:
        out = {}
        for d in preset.depths:
            y = profile(records, scheme, d, preset, LAST_FFN, **self.WHERE)
            if y and y[-1]:
                out[d] = y[-1]
        return out

    def figures(self, records, measurement, preset):
        fig = Figure("Last layer's FFN-weight gradient at step 0 vs depth (Xavier init)", "layers L",
                     "‖∂L/∂W²‖ of the last layer", logx=True, logy=True)
        for s in ("pre", "post"):
            by_depth = self._last_ffn_by_depth(records, preset, s)
            fig.series.append(Series(s, list(by_depth), list(by_depth.values())))
        return [fig, profiles_figure(records, preset, ("pre", "post"), "grad_norm/block",
                                     "Gradient norm per block at step 0 (Xavier init)", "‖∇W‖ of the block",
                                     logy=True, **self.WHERE)]


@CLAIMS.register("C3")
class BottomGradientsC3(Claim):
    id, title = "C3", "Pre-LN's bottom layers get larger gradients than its top layers"
    statement = "Pre-LN's bottom layers get larger gradients than its top layers (DeepNet paper)."
    sources = "004"
    paper = "Shleifer et al. 2021 (NormFormer, arXiv 2110.09456) §1 and Fig. 1: Pre-LN's early layers get much larger gradients than its later ones; Wang et al. 2022 (DeepNet) §3"

    def runs(self, preset):
        return depth_sweep(preset, ("pre",))

    def verdict(self, records, measurement, preset):
        deepest = max(preset.depths)
        init = profile(records, "pre", deepest, preset, "grad_norm/block")
        final = profile(records, "pre", deepest, preset, "grad_norm/block", when="final")
        if not init:
            return self.make(INCONCLUSIVE, "no step-0 gradients recorded", None, 0, {"depth": deepest},
                             "the depth sweep has no per-layer diagnostics")
        trend = spearman(*_clean(init))
        ratio = init[0] / init[-1] if init[0] and init[-1] else None
        if trend is None:
            verdict = INCONCLUSIVE  # fewer than 3 layers, or a flat profile
        else:
            verdict = HOLDS if trend < -TREND else FAILS if trend > TREND else INCONCLUSIVE
        final_trend = spearman(*_clean(final)) if final else None
        summary = (f"Pre-LN, L={deepest}, step 0: gradient-vs-layer rank correlation {_f(trend, '+.2f')}, first/last "
                   f"block gradient {_f(ratio, '.2f')}; at the last measured step the correlation is "
                   f"{_f(final_trend, '+.2f')}")
        settings = {"n_layer": deepest, "measured": "block weight-gradient norm at step 0", "trend_threshold": TREND}
        return self.make(verdict, "first/last block gradient norm at step 0", ratio,
                         n_seeds(select(records, False, model__scheme="pre", model__n_layer=deepest)), settings, summary,
                         trend_init=trend, trend_final=final_trend, profile_init=init, profile_final=final)

    def figures(self, records, measurement, preset):
        return [profiles_figure(records, preset, ("pre",), "grad_norm/block", "Pre-LN gradient norm per block",
                                "‖∇W‖ at step 0", logy=True),
                profiles_figure(records, preset, ("pre",), "grad_norm/block", "Pre-LN gradient norm per block, trained",
                                "‖∇W‖ at the last measured step", when="final", logy=True)]


@CLAIMS.register("C5")
class ResidualGrowthC5(Claim):
    id, title = "C5", "Pre-LN's residual stream grows like O(l)"
    statement = "In Pre-LN the residual stream grows with depth: ‖x_l‖ grows like O(l)."
    sources = "000, 003, 004"
    paper = ("the claim as three source articles make it (a Q&A on norm placement; \"Is Pre-Norm perfect?\"; "
             "Su Jianlin, spaces.ac.cn/archives/9009); Xiong et al. 2020 (arXiv 2002.04745) Lemma 1 gives "
             "E‖x_l‖² ∝ l at init, i.e. ‖x_l‖ ∝ √l, so O(l) is the stronger claim")

    def runs(self, preset):
        return depth_sweep(preset, ("pre",))

    def verdict(self, records, measurement, preset):
        deepest = max(preset.depths)
        final = profile(records, "pre", deepest, preset, "residual_rms/block", when="final")
        init = profile(records, "pre", deepest, preset, "residual_rms/block")
        if not final:
            return self.make(INCONCLUSIVE, "no per-layer RMS recorded", None, 0, {"n_layer": deepest},
                             "the depth sweep has no per-layer diagnostics")
        layers, rms = _from_layer_1(final)
        trend = spearman(layers, rms)
        p = loglog_slope(layers, rms)
        p_init = loglog_slope(*_from_layer_1(init)) if init else None
        if (trend or 0) > TREND and p is not None and p >= LINEAR_GROWTH:
            verdict = HOLDS
        elif (trend or 0) <= 0 or (p is not None and p < SUBLINEAR):
            verdict = FAILS
        else:
            verdict = INCONCLUSIVE
        summary = (f"trained Pre-LN, L={deepest}: RMS of x_l grows as l^{_f(p, '.2f')} for l ≥ 1 (rank correlation "
                   f"{_f(trend, '+.2f')}); at init as l^{_f(p_init, '.2f')}")
        settings = {"n_layer": deepest, "linear_if_exponent_at_least": LINEAR_GROWTH,
                    "sublinear_below": SUBLINEAR, "measured": "RMS of the stream x_l entering block l",
                    "fitted": "from l ≥ 1: x_0 is the embedding, whose small RMS alone pulls the slope to ≈ 1"}
        return self.make(verdict, "exponent p of RMS(x_l) ∝ l^p for l ≥ 1, trained", p,
                         n_seeds(select(records, False, model__scheme="pre", model__n_layer=deepest)), settings, summary,
                         exponent_init=p_init, trend=trend, profile_final=final, profile_init=init)

    def figures(self, records, measurement, preset):
        return [profiles_figure(records, preset, ("pre", "post"), "residual_rms/block", "Residual-stream RMS, trained",
                                "RMS(x_l)", when="final", logy=True),
                profiles_figure(records, preset, ("pre", "post"), "residual_rms/block", "Residual-stream RMS at init",
                                "RMS(x_l)", logy=True)]


@CLAIMS.register("C6")
class WateredDownDepthC6(Claim):
    id, title = "C6", "Pre-LN's depth is watered down"
    statement = ("In Pre-LN deep layers contribute little: ‖F_l‖/‖x_l‖ falls with l, consecutive layers' inputs "
                 "become nearly parallel, so an L-layer Pre-LN net behaves like a shallower one; Post-LN layers "
                 "stay full weight.")
    sources = "003, 004"
    paper = ("Su Jianlin's analysis of Pre-LN's effective depth (spaces.ac.cn/archives/9009, and the article "
             "\"Is Pre-Norm perfect?\"); Liu et al. 2020 (Admin, arXiv 2004.08249) §4.2 on Pre-LN's shallower "
             "dependency")

    def runs(self, preset):
        return depth_sweep(preset, ("pre", "post"))

    def verdict(self, records, measurement, preset):
        deepest = max(preset.depths)
        pre = profile(records, "pre", deepest, preset, "contribution_ratio/block", when="final")
        post = profile(records, "post", deepest, preset, "contribution_ratio/block", when="final")
        angle = profile(records, "pre", deepest, preset, "angular_distance/block", when="final")
        eff = {s: _effective(records, s, deepest, preset) for s in ("pre", "post")}
        if not pre or eff["pre"] is None:
            return self.make(INCONCLUSIVE, "missing diagnostics or layer-skip data", None, 0, {"n_layer": deepest},
                             "the depth sweep lacks per-layer diagnostics or layer_skip.json")
        trend = spearman(*_clean(pre))
        falls, shallow = (trend or 0) < -TREND, eff["pre"] <= SHALLOW
        # Post-LN is a fair contrast only where it trained as well as Pre-LN (an untrained net's layers are
        # all dispensable, which says nothing about depth)
        at = dict(model__n_layer=deepest, train__lr=preset.lr_fixed, train__warmup_steps=preset.warmup)
        cmp, _ = compare(group(records, model__scheme="post", **at), group(records, model__scheme="pre", **at))
        contrast = eff["post"] is not None and cmp in ("same", "better")
        # "behaves like a shallower net" means something only where depth is used at all: the deep model must
        # beat the shallowest one (at bigram level every layer is dispensable, whatever the architecture)
        shallowest = min(preset.depths)
        uses_depth, depth_info = compare(group(records, model__scheme="pre", **at),
                                         group(records, model__scheme="pre", **{**at, "model__n_layer": shallowest}),
                                         sides=(f"Pre-LN, {deepest} layers", f"Pre-LN, {shallowest} layers"))
        if uses_depth != "better":
            verdict = INCONCLUSIVE
        elif (trend or 0) >= 0 or eff["pre"] > SHALLOW or (contrast and eff["post"] <= eff["pre"]):
            verdict = FAILS
        elif falls and shallow:
            verdict = HOLDS
        else:
            verdict = INCONCLUSIVE
        post_text = (f"Post-LN {_f(eff['post'], '.2f')}·L" if contrast else
                     f"Post-LN not a fair contrast here ({_contrast_reason(cmp)})")
        depth_text = (f"the {deepest}-layer Pre-LN beats the {shallowest}-layer one by "
                      f"{-(depth_info.get('diff') or 0):.3f} nats" if uses_depth == "better" else
                      f"the {deepest}-layer Pre-LN does not beat the {shallowest}-layer one ({uses_depth}): depth is "
                      f"not used at this scale, so whether it is watered down cannot be judged")
        summary = (f"trained, L={deepest}: {depth_text}; Pre-LN contribution ratio vs layer rank correlation "
                   f"{_f(trend, '+.2f')}; effective depth (layers whose skip raises val loss > 1 %) Pre-LN "
                   f"{eff['pre']:.2f}·L; {post_text}")
        settings = {"n_layer": deepest, "trend_threshold": TREND, "shallower_if_fraction_at_most": SHALLOW,
                    "effective_depth": "fraction of layers whose skip raises val loss by more than 1 %",
                    "post_contrast": "only where Post-LN's val loss is not worse than Pre-LN's",
                    "judged_only_if": f"Pre-LN at L={deepest} beats Pre-LN at L={shallowest}"}
        return self.make(verdict, "Pre-LN effective depth fraction", eff["pre"],
                         n_seeds(select(records, False, model__n_layer=deepest)), settings, summary,
                         contribution_trend=trend, effective_depth_fraction=eff, post_comparable=contrast,
                         deep_vs_shallow=uses_depth,
                         post_vs_pre=cmp, pre_contribution=pre, post_contribution=post, pre_angular_distance=angle)

    def figures(self, records, measurement, preset):
        skip = Figure("Layer-skip ΔL (trained)", "layer", "ΔL when skipped (nats)", logy=False)
        deepest = max(preset.depths)
        for s in ("pre", "post"):
            chosen = select(records, model__scheme=s, model__n_layer=deepest, train__lr=preset.lr_fixed,
                            train__warmup_steps=preset.warmup)
            deltas = mean_over_seeds([r.layer_skip["delta_loss"] for r in chosen if r.layer_skip])
            if deltas:
                skip.series.append(Series(f"{s}, L={deepest}", list(range(len(deltas))), deltas))
        return [profiles_figure(records, preset, ("pre", "post"), "contribution_ratio/block",
                                "Contribution ratio ‖x_{l+1} − x_l‖/‖x_l‖, trained", "ratio", when="final", logy=True),
                profiles_figure(records, preset, ("pre", "post"), "angular_distance/block",
                                "Angular distance between x_l and x_{l+1}, trained", "arccos(cos)/π", when="final"),
                skip]


def _contrast_reason(cmp: str) -> str:
    if cmp == "too-few-seeds":
        return "too few of its seeds trained to compare"
    return f"its val loss is {'worse' if cmp == 'worse' else 'not clearly as good'} than Pre-LN's"


def _from_layer_1(values: list[float | None]) -> tuple[list[int], list[float]]:
    """(l, value) for l ≥ 1 (C5: the stream after the first block, not the embedding x_0)."""
    layers, kept = _clean(values)
    pairs = [(l, v) for l, v in zip(layers, kept) if l >= 1]
    return [l for l, _ in pairs], [v for _, v in pairs]


def _f(value, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _effective(records, scheme, depth, preset) -> float | None:
    chosen = select(records, model__scheme=scheme, model__n_layer=depth, train__lr=preset.lr_fixed,
                    train__warmup_steps=preset.warmup)
    fractions = [r.layer_skip["effective_depth_fraction"] for r in chosen if r.layer_skip and r.status == "completed"]
    return sum(fractions) / len(fractions) if fractions else None

