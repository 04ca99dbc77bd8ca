"""The words the claims' summaries share, so that every verdict says a number, an interval, a test and a setting
the same way (`fmt`, `ci_text`, `loss_test`, `tost_test`, `sign_p`, `said`, `setting_text`, `init_text`)."""
from __future__ import annotations

from typing import Any

from normlab.nn.init import INIT_RECIPES
from normlab.study.claims.statistics import Level


def pct(level: float) -> str:
    """`95 %`, `96.5 %`: an interval's level in words."""
    return f"{100 * level:.4g} %"


def fmt(value: float | None, spec: str = ".3f") -> str:
    """A number for a summary; `n/a` where it could not be computed."""
    return "n/a" if value is None else format(value, spec)


def nats(value: float | None, spec: str = "+.4f") -> str:
    """A loss gap for a summary, `+0.0123 nats`; in words where too few runs trained to give one (never `nan`)."""
    return "no loss gap (too few runs trained to compare)" if value is None else f"{value:{spec}} nats"


def ci_text(interval: list[float] | None, spec: str = "+.3f") -> str:
    """An interval for a summary, `[-0.012, +0.034]`; `n/a` where there is none."""
    return "n/a" if not interval else f"[{interval[0]:{spec}}, {interval[1]:{spec}}]"


def loss_test(info: dict[str, Any], failed: dict[str, Any] | None = None) -> str:
    """The tests a loss comparison (and, where given, its failure count) rests on, in words, at the level its
    interval was computed at."""
    loss = (f"{info['test']}, {pct(info['levels']['ci95'])} interval" if "test" in info
            else "too few runs trained for a loss test")
    return loss + (f"; failures: {failed['test']}" if failed else "")


def tost_test(info: dict[str, Any], level: Level) -> str:
    """The one-sided equivalence test a "not worse" at `level` rests on, in words."""
    return (f"one-sided equivalence (TOST half) at α = {level.alpha:g}: {info['test']}, {pct(level.tost)} interval "
            "inside +margin"
            if "test" in info else "too few runs trained for an equivalence test")


def sign_p(failed: dict[str, Any]) -> str:
    """` (sign test p = 0.031)` after a failure count, where some seeds failed on one side only."""
    return "" if failed["p_one_sided"] is None or not (failed["only_a_failed"] + failed["only_b_failed"]) else \
        f" (sign test p = {failed['p_one_sided']:.3f})"


COMPARISON_WORDS = {"same": "the same within the margin (TOST)", "unclear": "unclear: its interval spans the margin",
                    "too-few-seeds": "too few runs trained to compare",
                    "not worse": "not worse by more than the margin (one-sided, {tost} interval)"}


def said(comparison: str, level: Level) -> str:
    """A `compare` outcome at `level` in words for a summary: `too-few-seeds` reads "too few runs trained to
    compare"."""
    return COMPARISON_WORDS.get(comparison, comparison).format(tost=pct(level.tost))


# how a configuration's settings read: the scheme and norm by name, the rest as `L 4`, `lr 0.01`, `warmup 0`
SETTING_NAMES = {"model.scheme": "", "model.norm": "", "model.n_layer": "L", "model.d_model": "d",
                 "train.lr": "lr", "train.warmup_steps": "warmup", "train.steps": "steps"}


def setting_text(where: dict[str, Any]) -> str:
    """`post · lr 0.01 · warmup 0 · L 4`: a group's configuration (dotted keys) as a reader names it."""
    known = [k for k in SETTING_NAMES if k in where]
    parts = []
    for key in known + sorted(k for k in where if k not in SETTING_NAMES):
        value = where[key]
        text = f"{value:g}".replace("e-0", "e-").replace("e+0", "e") if isinstance(value, float) else str(value)
        name = SETTING_NAMES.get(key, key.split(".")[-1].replace("_", " "))
        parts.append(f"{name} {text}" if name else text)
    return " · ".join(parts)


def init_text(recipe: str) -> str:
    """An init recipe in words with its paper, the same for every scheme of a claim (a scheme's own override,
    DeepNorm's β, is its own)."""
    known = INIT_RECIPES.get(recipe)
    return f"{recipe}: {known.text}, for every scheme (DeepNorm sets its own β)" if known else recipe
