"""How numbers, durations and claim ids are written in the report (HTML and Markdown alike)."""
from __future__ import annotations

import math
import re
from typing import Any

MAX_LIST_ITEMS = 8  # longer lists are shortened to their first items and a count


def fmt_value(value: Any) -> str:
    """A value as a short string: 4 significant digits, scientific only when very large or small."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, float):
        return fmt_float(value)
    if isinstance(value, (list, tuple)):
        return fmt_list(value)
    if isinstance(value, dict):  # never Python's braces: "pre 0.03, post 0.003"
        return "; ".join(f"{key_label(str(k))} {fmt_value(v)}" for k, v in value.items())
    return str(value)


def fmt_float(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if value == 0:
        return "0"
    if value.is_integer() and abs(value) < 1e6:
        return str(int(value))
    if abs(value) >= 1e5 or abs(value) < 1e-3:
        text = f"{value:.3g}"
        if "e" in text:  # 1.23e-05 -> 1.23e-5
            mantissa, exponent = text.split("e")
            return f"{mantissa}e{int(exponent)}"
        return text
    return f"{value:.4g}"


def fmt_list(values: list | tuple) -> str:
    if not values:
        return "none"  # an empty list of leaks, of failures: no Python brackets to decode
    shown = [fmt_value(v) for v in values[:MAX_LIST_ITEMS]]
    if len(values) > MAX_LIST_ITEMS:
        shown.append(f"… ({len(values)} items)")
    return "[" + ", ".join(shown) + "]"


def fmt_duration(seconds: float | None) -> str:
    """12.3 s, 4 min 05 s, 2 h 03 min."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    if seconds < 60:
        return f"{seconds:.3g} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def fmt_info_value(key: str, value: Any) -> str:
    """A study-info value: keys ending in _s (or named like a wall time) are durations."""
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    if numeric and (key.endswith("_s") or "time" in key.lower()):
        return fmt_duration(float(value))
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, str)) for v in value):
        return ", ".join(str(v) for v in value)
    return fmt_value(value)


def label(key: str) -> str:
    """`wall_time_s` -> `wall time (s)`: a dict key as a readable label."""
    text = key.replace("_", " ").strip()
    return text[:-2] + " (s)" if text.endswith(" s") else text


def key_label(key: str) -> str:
    """A settings/details key: dotted config keys stay as they are (`model.n_layer`), others read as words."""
    return key if "." in key else key.replace("_", " ")


def info_label(key: str, value: Any) -> str:
    """A study-info key; `wall_time_s` with a number reads `wall time` (the value carries its unit)."""
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    if numeric and key.endswith("_s"):
        return key[:-2].replace("_", " ")
    return key if key.isupper() else label(key)  # constants (LOSS_MARGIN) keep their code names


def natural_key(text: str) -> list:
    """Sort key that puts C2 before C10."""
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", str(text))]


def key_number(statistic: str | None, value: Any, reading: str | None = None) -> str:
    """The claim's reading of its number ("Pre-LN uses 1.1 % more peak memory than Post-LN"), else `statistic =
    value`; a number that could not be computed reads `= n/a`, never as a bare statistic."""
    if reading:
        return reading
    statistic = (statistic or "").strip()
    if value is None:
        return f"{statistic} = n/a" if statistic else "n/a"
    return f"{statistic} = {fmt_value(value)}" if statistic else fmt_value(value)


def fmt_settings(settings: dict) -> str:
    """A failed run's identifying config keys: `model.scheme = post, train.seed = 1`."""
    return ", ".join(f"{k} = {fmt_value(v)}" for k, v in (settings or {}).items()) or "—"


def first_line(text: Any) -> str:
    """A failure reason's first line (the exception); the traceback stays in the ledger."""
    lines = str(text or "").strip().splitlines()
    return lines[0] if lines else "—"


def partial_note(status: dict) -> str | None:
    """The banner of a report that is not final (None when it is)."""
    if status.get("final", True):
        return None
    return f"{status.get('status') or 'partial'} — the verdicts below are not final."


def failure_groups(details: Any, path: str = "") -> list[tuple[str, dict]]:
    """Every per-configuration group in a verdict's details (a dict with `n_runs` and `did_not_train_rate`,
    as `claims.grouping.group_record` writes it), labelled by its setting (`post · lr 0.003 · warmup 0 · L 4`), or where it has
    none, by its path in the details (`sweep › post › 0 › 0.003`). A group found twice (the same setting, the
    same numbers) is listed once; two different groups under one label keep their paths apart."""
    out: dict[str, dict] = {}
    for (label, group), where in _failure_groups(details, path):
        if label in out and out[label] != group:
            label = f"{label} ({where})"
        out.setdefault(label, group)
    return list(out.items())


def _failure_groups(details: Any, path: str) -> list[tuple[tuple[str, dict], str]]:
    if not isinstance(details, dict):
        return []
    if "n_runs" in details and "did_not_train_rate" in details:
        return [((details.get("setting") or path, details), path)]
    out = []
    for key, value in details.items():
        out += _failure_groups(value, f"{path} › {key}" if path else str(key))
    return out


def failure_text(g: dict) -> str:
    """`2/5 did not train (1 diverged, 1 failed to train; 40 %, 95 % CI 12–77 %), two-mode`."""
    n, runs = (g.get("n_diverged") or 0) + (g.get("n_failed_to_train") or 0), g.get("n_runs") or 0
    parts = [f"{what} {k}" for k, what in ((g.get("n_diverged"), "diverged"), (g.get("n_failed_to_train"),
                                                                                "failed to train")) if k]
    ci = g.get("did_not_train_ci95")
    rate = f"{100 * n / runs:.0f} %" if runs else "—"
    interval = f", 95 % CI {100 * ci[0]:.0f}–{100 * ci[1]:.0f} %" if ci else ""
    mean = g.get("mean_val_loss")
    loss = "" if mean is None else f"; val {mean:.4f}" + (
        f" (95 % CI {g['mean_ci95'][0]:.4f}–{g['mean_ci95'][1]:.4f})" if g.get("mean_ci95") else "")
    return (f"{n}/{runs} did not train ({'; '.join(parts) + '; ' if parts else ''}{rate}{interval})"
            + (", two-mode" if g.get("two_mode") else "") + loss)


def robustness_text(verdict: dict) -> str | None:
    """What the robustness rerun gave, or None where it was not run."""
    again = verdict.get("robustness") or {}
    if verdict.get("fragile") is None:
        return "not checked" if not again.get("error") else f"rerun could not be judged: {again['error']}"
    changed = fmt_settings(again.get("changed"))
    if verdict["fragile"]:
        return f"FRAGILE: rerun at {changed} gives `{again.get('verdict')}` ({again.get('summary', '')})"
    return f"robust: rerun at {changed} gives the same verdict ({again.get('verdict')})"


def interval_text(interval: Any) -> str:
    """`[0.081, 0.434]`, or "" where there is none."""
    if not interval or len(interval) != 2 or None in interval:
        return ""
    return f"[{fmt_value(interval[0])}, {fmt_value(interval[1])}]"


def seeds_used(verdict: dict) -> Any:
    """How many seeds the decision used (the seeds it recorded), else the claim's count of seeds."""
    return len(verdict["seeds"]) if verdict.get("seeds") else verdict.get("n_seeds")


def init_text(verdict: dict) -> str | None:
    """What the init pass gave: the other recipe's verdict and number, or None where it was not run."""
    other = verdict.get("other_init") or {}
    if not verdict.get("init"):
        return None
    if not other:
        return f"judged under {verdict['init']}; the other recipe not checked"
    if other.get("error"):
        return f"judged under {verdict['init']}; under {other.get('recipe')} it could not be judged: {other['error']}"
    number = other.get("reading") or fmt_value(other.get("value"))
    interval = interval_text(other.get("interval"))
    word = "INIT-DEPENDENT" if verdict.get("init_dependent") else "the same verdict"
    return (f"judged under {verdict['init']} ({verdict.get('verdict')}); under {other.get('recipe')}: {word}, "
            f"`{other.get('verdict')}`, {number}{' ' + interval if interval else ''}")


def marks(verdict: dict) -> list[str]:
    """The marks a verdict carries: fragile (numerics), init-dependent (init recipe)."""
    return [m for m, on in (("fragile", verdict.get("fragile")), ("init-dependent", verdict.get("init_dependent")))
            if on]
