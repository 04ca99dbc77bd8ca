"""The study report: verdicts, per-claim figures and run-level plots as one self-contained HTML page. A renderer:
what it draws comes as plain data (report/figure.py), built by the study; it knows no claim and no run record.

    from normlab.report import render_report
    paths = render_report(out_dir, title=..., verdicts=..., claim_info=..., claim_figures=...,
                          sections=..., study_info=...)

writes report.html (inline CSS, plots as embedded PNGs, no script, nothing fetched),
report.md (the verdict table and one line per claim) and verdicts.json.
Plots are drawn with matplotlib's Agg canvas; pyplot is never imported.
"""
from normlab.report.render import render_report

__all__ = ["render_report"]
