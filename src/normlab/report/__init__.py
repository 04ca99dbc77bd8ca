"""The study report: verdicts, per-claim figures and run-level plots as one self-contained HTML page. A renderer:
what it draws comes as plain data (report/figure.py), built by the study; it knows no claim and no run record.

    from normlab.report import render_report
    paths = render_report(out_dir, title=..., verdicts=..., claim_info=..., claim_figures=...,
                          sections=..., study_info=...)

writes report.html (inline CSS, plots as embedded PNGs, no script, nothing fetched),
report.md (the verdict table and one line per claim) and verdicts.json.
Plots are drawn with matplotlib's Agg canvas; pyplot is never imported.
"""
__all__ = ["render_report"]


def __getattr__(name: str):
    """`render_report` on first use: the renderer imports matplotlib (0.3 s), which the report's plain data types
    (report/figure.py, imported by the claims and so by the CLI's help) do not need."""
    if name == "render_report":
        from normlab.report.render import render_report

        return render_report
    raise AttributeError(f"module 'normlab.report' has no attribute {name!r}")
