"""`render_report`: a study's verdicts, figures and sections as report.html, report.md and verdicts.json."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from normlab.jsonsafe import json_safe
from normlab.report.format import natural_key
from normlab.report.outcome import outcome_counts
from normlab.report.html import page
from normlab.report.markdown import markdown


FINAL = {"final": True, "status": "final", "done": None, "total": None}  # a report told nothing else


def render_report(out_dir: Path, *, title: str, verdicts: list, claim_info: dict[str, dict],
                  claim_figures: dict[str, list], sections: list | None = None,
                  study_info: dict, completion: dict | None = None,
                  failed_runs: list[dict] | None = None, rules: dict | None = None,
                  cost: dict | None = None) -> dict[str, Path]:
    """Write the three report files into out_dir; returns {"html", "markdown", "json"} -> path.

    verdicts: `Verdict`s (or their dicts); claim_info: id -> {"title", "statement", "sources"};
    claim_figures: id -> `Figure` specs; sections: the general sections after the claims (`Section`s, built by
    the study from its records: normlab.study.sections.general_sections); study_info: shown at the top (scalars in
    one table, each dict value in its own);
    completion: {"final", "status" ("final" or "partial: N of M runs"), "done", "total"}: a report
    that is not final says so on its first line; failed_runs: {"id", "settings", "attempts", "reason"}.

    verdicts.json is {"final", "status", "done", "total", "outcomes", "verdicts": [...], "failed_runs": [...]}, and
    `rules` (the fingerprint of the rules the verdicts were judged by: study/rules.py) and `cost` (the training
    wall time in seconds and in reference runs: study/reference.py) where given.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = sorted((json_safe(_as_dict(v)) for v in verdicts), key=lambda v: natural_key(v["id"]))
    claims = sorted({v["id"] for v in rows} | set(claim_figures or {}), key=natural_key)
    status = {**FINAL, **(completion or {})}
    failed = json_safe(list(failed_runs or []))
    paths = {"html": out_dir / "report.html", "markdown": out_dir / "report.md", "json": out_dir / "verdicts.json"}
    document = {**status, "outcomes": outcome_counts(rows), "verdicts": rows, "failed_runs": failed,
                **({"rules": rules} if rules else {}), **({"cost": cost} if cost else {})}
    _write(paths["json"], json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    _write(paths["markdown"], markdown(title, study_info or {}, rows, claim_info or {}, status, failed))
    _write(paths["html"], page(title, study_info or {}, rows, claims, claim_info or {}, claim_figures or {},
                               list(sections or []), status, failed))
    return paths


def _as_dict(verdict: Any) -> dict[str, Any]:
    data = verdict.to_dict() if hasattr(verdict, "to_dict") else dict(verdict)
    keys = ("id", "verdict", "statistic", "value", "reading", "interval", "test", "n_seeds", "seeds", "parts",
            "init", "init_dependent", "other_init", "look", "scope", "depends_on", "primary", "outcome", "why", "needed",
            "unit", "unit_count", "bundled", "family", "design", "settings",
            "details", "summary", "fragile", "robustness")
    empty = {"settings": {}, "details": {}, "parts": [], "seeds": [], "other_init": {}, "look": {}, "scope": {},
             "depends_on": [], "primary": "", "outcome": {}, "why": "", "needed": None, "unit": "seeds", "unit_count": None, "bundled": False,
             "family": {}, "design": {}}
    return {k: data.get(k, empty.get(k)) for k in keys}


def _write(path: Path, text: str) -> None:
    """Write via a temporary file of this process's own, so a reader never sees half a report and two processes
    rendering one study at once (two `normlab study` on one directory) never rename each other's file."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
