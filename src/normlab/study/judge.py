"""Judge a study: every claim's verdict from the ledger alone, with where it holds.

A claim judges its runs at the level `power.level` gives it (Holm's step over the study's claims, and the look of
its seed rounds: `family.holm`); then, where the study measured them, the same claim is judged again on each other
pass's runs: the other init recipe (`init-dependent`), each `--vary` factor and study-file axis (`depends on
<factor>`, `scope_verdict`), and another thread count (`fragile`). Nothing here trains or writes: the runner calls
it between looks to plan seed rounds, and `publish` calls it to write the report.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from normlab.study import power
from normlab.study.claims import CLAIMS, INCONCLUSIVE, Figure, Verdict, claim_number
from normlab.study.claims.base import split_and_open
from normlab.study.claims.prose import init_text
from normlab.study.claims.statistics import ALPHA, SPENDING, Level
from normlab.study.family import holm
from normlab.study.ledger import Ledger
from normlab.study.spec import INIT_KEY, StudySpec, level_name
from normlab.study.trained import judge_trained


def compute_verdicts(spec: StudySpec, ledger: Ledger, ids: list[str] | None = None,
                     claims: list[str] | None = None) -> tuple[list[Verdict], dict[str, list[Figure]]]:
    """Every claim's verdict and figures from the ledger alone (no training); `claims`: only these are returned,
    but the family-wise control (`family.holm`) always runs over every claim of the study."""
    if claims is not None and not claims:  # nothing asked for (a study with no claim on a schedule of looks)
        return [], {}
    records = judge_trained(ledger.records(set(ids) if ids is not None else None), spec.lines)
    base = spec.base_flat()
    measurements = ledger.measurements()
    figures: dict[str, list[Figure]] = {}

    def judge_at(claim_id: str, level: float) -> Verdict:
        at = power.level(spec, claim_id, level)
        claim = CLAIMS.get(claim_id)(at)  # every decision of the claim is made at this level
        verdict, figs = judge(spec, claim, records, base, measurements.get(claim_id))
        figures.setdefault(claim_id, figs)
        return mark_look(verdict, at, spec) if at.look else verdict

    family = sorted(spec.claims, key=claim_number)
    # an inconclusive verdict says which kind it is, at its last look's level
    decided = {c: power.explain(v, power.last_alpha(v)) for c, v in holm(family, judge_at).items()}
    wanted = set(claims if claims is not None else spec.claims)
    return [decided[c] for c in family if c in wanted], {c: figures[c] for c in family if c in wanted}


def judge(spec: StudySpec, claim, records: list, base: dict[str, Any], measurement
          ) -> tuple[Verdict, list[Figure]]:
    """One claim's verdict and figures on the runs of its seeds (`StudySpec.seeds_of`: a claim that stopped at an
    earlier look never sees the seeds another claim's round added to runs they share), with where it holds: the
    verdict under each nuisance level the study measured (`scope_verdict`)."""
    bases = claim_bases(spec, claim, base)
    seeds = set(spec.seeds_of(claim.id))
    records = [r for r in records if r.seed in seeds]
    # groups match the claim's base config (its init recipe) on every axis the claim does not name
    judged = [dataclasses.replace(r, base=bases["main"]) for r in records]
    try:
        verdict = claim.judge(judged, measurement, spec.preset)
        figures = claim.figures(judged, measurement, spec.preset)
    except Exception as e:  # a verdict that cannot be computed is reported, never hidden
        verdict = Verdict(claim.id, INCONCLUSIVE, "could not be computed", None, 0, {},
                          {"error": f"{type(e).__name__}: {e}"}, f"error while computing: {e}")
        figures = []
    if claim.runs(spec.preset):  # a claim that trains: the init its schemes started from, and the other passes
        init = spec.inits(claim)[0]
        verdict = dataclasses.replace(verdict, init=init, settings={
            **verdict.settings, "init": verdict.settings.get("init", init_text(init))})
        if "other_init" in bases:
            verdict = mark_init_dependent(verdict, claim, [dataclasses.replace(r, base=bases["other_init"])
                                                           for r in records], measurement, spec)
        levels = {}
        for factor in spec.vary:
            key = f"vary:{factor}"
            if key in bases:
                again, error = rejudge(claim, [dataclasses.replace(r, base=bases[key]) for r in records],
                                       measurement, spec)
                levels[factor] = {level_name(factor, bases["main"]): verdict.verdict,
                                  level_name(factor, bases[key]): again.verdict if again
                                  else f"error: {error}"}
        for key, values in spec.axes.items():  # a study file's axes: the claim judged at each value
            if not spec.varies_axis(claim, key):
                continue
            levels[key] = {axis_level(key, values[0]): verdict.verdict}
            for value in values[1:]:
                again, error = rejudge(claim, [dataclasses.replace(r, base=bases[f"axis:{key}={value!r}"])
                                               for r in records], measurement, spec)
                levels[key][axis_level(key, value)] = again.verdict if again else f"error: {error}"
        if verdict.other_init.get("verdict"):
            levels = {"init": {verdict.init: verdict.verdict, verdict.other_init["recipe"]:
                               verdict.other_init["primary"]}, **levels}
        fixed = spec.fixed_factors(claim) + [key for key in spec.axes if not spec.varies_axis(claim, key)]
        verdict = scope_verdict(verdict, levels, fixed)
        if "robustness" in bases:
            verdict = mark_fragile(verdict, claim, [dataclasses.replace(r, base=bases["robustness"])
                                                    for r in records], measurement, spec)
    return verdict, figures


def scope_verdict(verdict: Verdict, levels: dict[str, dict[str, str]], fixed: list[str]) -> Verdict:
    """Where the verdict holds: `scope` = {factor: {level: verdict}}, the claim's own level first, each level judged
    at the verdict's own family-wise level (one rule for every factor, C1's lr included). A factor whose levels
    give opposite decisive verdicts (holds under one, does not hold under the other) makes the outcome `depends on
    <factor>` (`depends_on`), which never counts as holds; a level that is inconclusive leaves a decisive verdict
    standing where it was judged, counted apart from one decisive under every level (`Outcome.open_levels`)."""
    scope = {**verdict.scope, **{factor: dict(by_level) for factor, by_level in levels.items()}}
    for factor in fixed:  # the claim's own runs set this factor (C8's narrow models): not varied for it
        scope[factor] = {"its own runs' level (not varied)": verdict.verdict}
    summary = verdict.summary
    if scope:
        summary += "; where it holds: " + "; ".join(
            f"{factor}: " + ", ".join(f"{v} under {level}" for level, v in by_level.items())
            for factor, by_level in scope.items())
    return dataclasses.replace(verdict, scope=scope, depends_on=list(split_and_open(scope)[0]), summary=summary)


def mark_look(verdict: Verdict, level: Level, spec: StudySpec) -> Verdict:
    """Which look of the sequential schedule a verdict was decided at, with its level and the claim's spending
    over its looks (study/power.py), in verdicts.json and in the verdict's test."""
    k, looks = level.look
    shares = list(level.shares or SPENDING[looks])
    n = len(spec.seeds_of(verdict.id))
    look = {"look": k, "looks": looks, "alpha": round(ALPHA * shares[k - 1], 12), "n_seeds": n,
            "schedule": spec.preset.seed_rounds, "shares": shares,
            "spending": "Bonferroni over the looks: α = 0.05 split " + " + ".join(f"{ALPHA * x:g}" for x in shares)}
    return dataclasses.replace(verdict, look=look, test=(f"{verdict.test}; " if verdict.test else "")
                               + f"look {k} of {looks} at {n} seeds (α = {ALPHA * shares[k - 1]:g} at this look)")


def claim_bases(spec: StudySpec, claim, base: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The base configs a claim's runs are judged against: its own (its paper's init recipe), the init pass's
    (the other recipe) and the robustness pass's (another thread count), where the study runs them."""
    recipes = spec.inits(claim)
    out = {"main": {**base, INIT_KEY: recipes[0]}}
    if len(recipes) > 1:
        out["other_init"] = {**base, INIT_KEY: recipes[1]}
    for factor in spec.vary:
        overrides = spec.varied(claim, factor)
        if overrides is not None:
            out[f"vary:{factor}"] = {**out["main"], **overrides}
    for key, value in spec.axis_levels(claim):
        out[f"axis:{key}={value!r}"] = {**out["main"], key: value}
    if spec.robustness:
        out["robustness"] = {**out["main"], **spec.robust_overrides()}
    return out


def axis_level(key: str, value: Any) -> str:
    """A study-file axis's level as a reader names it: `norm = rmsnorm`."""
    return f"{key.split('.')[-1]} = {value}"


def rejudge(claim, records: list, measurement, spec: StudySpec) -> tuple[Verdict | None, str | None]:
    """The claim's verdict on another pass's records (the other init recipe, another thread count), or the error
    that kept it from being computed."""
    try:
        return claim.judge(records, measurement, spec.preset), None
    except Exception as e:
        return None, f"{type(e).__name__}: {e}"


def mark_init_dependent(verdict: Verdict, claim, records: list, measurement, spec: StudySpec) -> Verdict:
    """`init-dependent` when the same claim judged on the runs of the other init recipe gives another verdict;
    both numbers are kept (the other's verdict, value, interval and sub-verdicts)."""
    recipe = spec.inits(claim)[1]
    again, error = rejudge(claim, records, measurement, spec)
    if again is None:
        return dataclasses.replace(verdict, other_init={"recipe": recipe, "error": error})
    return dataclasses.replace(verdict, init_dependent=again.verdict != verdict.verdict, other_init={
        "recipe": recipe, "verdict": again.outcome.text, "primary": again.verdict, "value": again.value,
        "interval": again.interval, "reading": again.reading, "summary": again.summary,
        "parts": [{"name": p["name"], "verdict": p["verdict"], "value": p["value"], "interval": p["interval"]}
                  for p in again.parts]})


def main_records(spec: StudySpec, records: list) -> list:
    """The study's own runs, without the robustness pass's reruns (which the report does not plot twice)."""
    if not spec.robustness:
        return records
    rerun = spec.robust_overrides()
    return [r for r in records if any(r.get(k) != v for k, v in rerun.items())]


def mark_fragile(verdict: Verdict, claim, reruns: list, measurement, spec: StudySpec) -> Verdict:
    """`fragile` when the same runs at another thread count (a one-bit change of numerics) give another verdict."""
    again, error = rejudge(claim, reruns, measurement, spec)
    if again is None:
        return dataclasses.replace(verdict, robustness={"changed": spec.robust_overrides(), "error": error})
    return dataclasses.replace(verdict, fragile=again.verdict != verdict.verdict, robustness={
        "changed": spec.robust_overrides(), "verdict": again.verdict, "value": again.value, "summary": again.summary})
