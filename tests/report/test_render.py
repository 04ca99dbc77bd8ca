"""render_report on a synthetic study: the three files, their schema, and a self-contained, escaped HTML page."""
from __future__ import annotations

import base64
import io
import json
import math
from html.parser import HTMLParser

import matplotlib.image
import pytest

from normlab.report import render_report
from normlab.report.format import fmt_duration, fmt_value
from normlab.study.claims import Figure, Series, Verdict
from tests.report.synthetic import SCRIPT_TITLE, render_kwargs, verdicts

CLAIMS = [f"C{i}" for i in range(1, 17)]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
GENERAL_SECTIONS = ["loss-curves", "grad-norm", "residual-rms", "contribution", "layer-skip", "divergence",
                    "norm-timings", "runs"]


class Page(HTMLParser):
    """The facts the tests check, collected from the HTML."""

    def __init__(self, text: str):
        super().__init__()
        self.verdict_rows: list[str] = []
        self.images: list[str] = []
        self.urls: list[str] = []
        self.ids: list[str] = []
        self.tags: set[str] = set()
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.add(tag)
        if tag == "tr" and "verdict" in (attrs.get("class") or "").split():
            self.verdict_rows.append(attrs.get("data-claim"))
        if tag == "img":
            self.images.append(attrs.get("src") or "")
        self.urls += [attrs[k] for k in ("src", "href", "action", "poster", "data") if attrs.get(k)]
        if attrs.get("id"):
            self.ids.append(attrs["id"])


@pytest.fixture(scope="module")
def html_text(report) -> str:
    return report["html"].read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def page(html_text) -> Page:
    return Page(html_text)


def test_writes_the_three_files(report):
    assert {k: p.name for k, p in report.items()} == {"html": "report.html", "markdown": "report.md",
                                                      "json": "verdicts.json"}
    assert all(p.is_file() and p.stat().st_size > 0 for p in report.values())


def test_verdicts_json_round_trips(report):
    doc = json.loads(report["json"].read_text())
    assert (doc["final"], doc["status"], doc["failed_runs"]) == (True, "final", [])  # not told otherwise: final
    rows = doc["verdicts"]
    assert [r["id"] for r in rows] == CLAIMS
    keys = {"id", "verdict", "statistic", "value", "reading", "n_seeds", "settings", "details", "summary", "fragile",
            "robustness", "parts", "interval", "test", "seeds", "init", "init_dependent", "other_init", "look",
            "scope", "primary", "family", "design",  # where it holds, the Holm step, the design seeds' verdict
            "depends_on", "outcome", "why", "needed", "unit", "unit_count",  # the typed outcome, what it is made of
            "bundled"}
    assert all(set(r) == keys for r in rows)
    for row, original in zip(rows, verdicts()):
        assert Verdict.from_dict(row).to_dict() == row
        expected = original.to_dict()
        expected["details"]["se"] = None  # NaN is not JSON: written as null
        assert row == json.loads(json.dumps(expected))


def test_markdown_has_the_study_info_table_and_summaries(report):
    text = report["markdown"].read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0].startswith("# ") and "preset: quick" in text.split("## Verdicts")[0]
    rows = [line for line in lines if line.startswith("| C")]
    assert len(rows) == 16 and all(line.count(" | ") == 5 for line in rows)  # "a | pipe" in details is not here
    assert "| claim | verdict | key number | seeds | init | robustness |" in lines
    assert "statistic of C3 = 0.1263" in text
    assert sum(line.startswith("### C") for line in lines) == 16  # a section per claim: summary, paper, failures
    assert sum(line.startswith("- robustness: ") for line in lines) == 16


def test_sub_verdicts_intervals_and_the_init_pass_are_shown(report, html_text):
    """C1 carries two sub-verdicts, an interval, its test and seeds, and an init pass that disagrees: the
    Markdown table gives each part a row under its claim, the marks and intervals show, and both say it."""
    text = report["markdown"].read_text(encoding="utf-8")
    c1 = next(line for line in text.splitlines() if line.startswith("| C1 "))
    assert "(init-dependent)" in c1 and "[0.081, 0.434]" in c1 and "| 5 |" in c1 and "xiong; gpt2: holds" in c1
    assert "| ↳ Post-LN needs warmup | ✅ holds |" in text
    assert "| ↳ Pre-LN is barely affected | ❔ inconclusive |" in text
    c2 = next(line for line in text.splitlines() if line.startswith("| C2 "))
    assert "init-dependent" not in c2 and "xiong; gpt2:" in c2
    assert ("- init: judged under xiong (does not hold); under gpt2: INIT-DEPENDENT, `holds`, -0.01 [-0.05, 0.03]"
            in text)
    assert "- test: paired t over 5 seeds, 95 % interval; seeds 0, 1, 2, 3, 4" in text
    assert html_text.count(">init-dependent</span>") == 1
    assert "0.257 nats &lt;b&gt;paired&lt;/b&gt;" in html_text  # a part's summary is escaped
    assert '<table class="data parts">' in html_text and "<b>Init:</b> judged under xiong" in html_text


def test_html_has_one_verdict_row_per_claim_and_a_section_each(page):
    assert page.verdict_rows == CLAIMS
    assert set(CLAIMS) <= set(page.ids)
    assert set(GENERAL_SECTIONS) <= set(page.ids)


def test_html_is_self_contained(page, html_text):
    assert not page.tags & {"script", "link", "iframe", "object", "embed"}
    external = [u for u in page.urls if u.lower().startswith(("http://", "https://", "//", "file:"))]
    assert not external
    assert all(u.startswith(("#", "data:image/png;base64,")) for u in page.urls)
    assert "@import" not in html_text and "url(" not in html_text.replace("data:image/png", "")


def test_every_image_is_an_embedded_png(page):
    assert len(page.images) >= 12
    for src in page.images:
        assert src.startswith("data:image/png;base64,")
        data = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert data.startswith(PNG_SIGNATURE)
        pixels = matplotlib.image.imread(io.BytesIO(data), format="png")
        assert pixels.ndim == 3 and pixels.shape[0] > 100 and pixels.shape[1] > 100


def test_text_is_escaped(html_text):
    assert "<script>" not in html_text
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; more" in html_text
    assert "A caption &lt;b&gt;." in html_text  # captions too
    assert "fig-error" not in html_text.split("</style>")[1]  # every synthetic figure drew


def test_missing_data_leaves_out_the_general_sections(tmp_path):
    kwargs = render_kwargs() | {"sections": [], "claim_figures": {}}
    paths = render_report(tmp_path, **kwargs)
    page = Page(paths["html"].read_text(encoding="utf-8"))
    assert page.verdict_rows == CLAIMS and not page.images
    assert not set(GENERAL_SECTIONS) & set(page.ids)


def test_a_figure_that_cannot_be_drawn_leaves_a_note(tmp_path):
    broken = Figure("ragged", "x", "y", kind="heatmap", matrix=[[1.0, 2.0], [3.0]], rows=["a", "b"], cols=["x"])
    line = Figure("fine", "x", "y", [Series("a", [1, 2], [1.0, math.nan])])
    paths = render_report(tmp_path, title=SCRIPT_TITLE, verdicts=[v.to_dict() for v in verdicts()[:1]],
                          claim_info={}, claim_figures={"C1": [broken, line]}, sections=[],
                          study_info={})
    text = paths["html"].read_text(encoding="utf-8")
    assert 'class="fig-error"' in text and text.count("data:image/png;base64,") == 1
    assert "<title>Post-LN needs warmup &lt;script&gt;" in text


@pytest.mark.parametrize("value, text", [(None, "—"), (True, "yes"), (3, "3"), (123456, "123,456"), (0.0, "0"),
                                         (2.0, "2"), (0.0123456, "0.01235"), (1.5e-7, "1.5e-7"), (2.5e6, "2.5e6"),
                                         (math.nan, "NaN"), ([1, 2.5], "[1, 2.5]"), ("post", "post")])
def test_fmt_value(value, text):
    assert fmt_value(value) == text


def test_fmt_duration():
    assert [fmt_duration(s) for s in (None, 12.34, 245, 7380)] == ["—", "12.3 s", "4 min 05 s", "2 h 03 min"]


SCRIPT = "<script>alert(1)</script>"


def test_markdown_escapes_user_strings(tmp_path):
    # a Markdown viewer renders inline HTML: an axis value, a title, a summary or study info must arrive as text
    rows = [Verdict("C1", "holds", "Δ <loss>", 0.1, 2, {}, {}, f"summary {SCRIPT} & more").to_dict()]
    info = {"description": SCRIPT, "axes": {"model.norm": ["layernorm", SCRIPT], SCRIPT: [1]}}
    paths = render_report(tmp_path, title=f"study {SCRIPT}", verdicts=rows, claim_info={"C1": {"title": SCRIPT}},
                          claim_figures={}, sections=[], study_info=info)
    text = paths["markdown"].read_text(encoding="utf-8")
    assert "<script" not in text and "<loss>" not in text
    # the title, the description, an axis key and an axis value, C1's title and its summary
    assert text.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 6
    assert "# study &lt;script&gt;" in text and "summary &lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in text


FAILED = [{"id": "abc123", "settings": {"model.scheme": "post", "train.lr": 0.01, "train.seed": 1}, "attempts": 3,
           "reason": f"RuntimeError: {SCRIPT}\nTraceback (most recent call last):\n  File \"x.py\""}]


def test_a_partial_report_says_so_first_and_lists_failed_runs(tmp_path):
    status = {"final": False, "status": "partial: 3 of 4 runs", "done": 3, "total": 4}
    paths = render_report(tmp_path, **render_kwargs() | {"sections": [], "claim_figures": {}},
                          completion=status, failed_runs=FAILED)
    md = paths["markdown"].read_text(encoding="utf-8")
    assert md.splitlines()[0] == "**partial: 3 of 4 runs — the verdicts below are not final.**"
    failed = md.split("## Failed runs")[1].split("##")[0]
    assert ("| abc123 | model.scheme = post, train.lr = 0.01, train.seed = 1 | 3 | "
            "RuntimeError: &lt;script&gt;alert(1)&lt;/script&gt; |") in failed and "Traceback" not in failed
    html = paths["html"].read_text(encoding="utf-8")
    body = html.split("<main>\n", 1)[1]
    assert body.startswith('<p class="partial" id="partial" role="alert">partial: 3 of 4 runs')
    assert "<title>[partial] " in html and 'href="#failed-runs"' in html
    section = html.split('<section id="failed-runs">')[1].split("</section>")[0]
    assert "<td>abc123</td>" in section and "RuntimeError: &lt;script&gt;alert(1)&lt;/script&gt;</td>" in section
    assert "Traceback" not in section and "<script" not in html
    doc = json.loads(paths["json"].read_text())
    assert {k: doc[k] for k in status} == status and doc["failed_runs"] == FAILED


def test_a_sweeps_x_values_are_its_ticks():
    """Learning rates on a log axis and depths on a linear one are labelled at the swept values."""
    from matplotlib.figure import Figure as MplFigure

    from normlab.report import plots
    from normlab.study.claims import Figure, Series

    lrs, depths = [3e-4, 1e-3, 3e-3, 1e-2, 3e-2], [2, 4, 8, 16]
    for xs, logx in ((lrs, True), (depths, False)):
        spec = Figure("t", "x", "y", [Series("pre", xs, [2.5 + 0.01 * i for i in range(len(xs))])], logx=logx)
        ax = MplFigure().add_subplot()
        plots._draw_on(ax, spec, plots.colors_for(spec), wrap=40)
        ax.figure.canvas = plots.FigureCanvasAgg(ax.figure)
        ax.figure.canvas.draw()
        assert list(ax.get_xticks()) == pytest.approx(xs)
        assert [t.get_text() for t in ax.get_xticklabels()] == [plots.fmt_value(float(x)) for x in xs]


def test_key_numbers_read_in_the_claims_direction_and_a_missing_one_says_n_a():
    from normlab.report.format import key_number
    from normlab.study.claims import CLAIMS

    assert CLAIMS.get("C12")().reading(-0.01084) == "Pre-LN uses 1.1 % more peak memory than Post-LN"
    assert CLAIMS.get("C10")().reading(0.92).startswith("RMSNorm's norm takes 0.92× LayerNorm's time")
    assert CLAIMS.get("C1")().reading(-0.05) == "dropping warmup helped Post-LN by 0.050 nats"
    assert key_number("Post-LN − Pre-LN val loss at 16 layers (nats)", None) == (
        "Post-LN − Pre-LN val loss at 16 layers (nats) = n/a")
    assert key_number("x", 1.5, "a reading") == "a reading"


def test_comparison_details_are_a_table_with_named_sides():
    from normlab.report.html import kv_cell
    from normlab.study.claims.decisions import compare
    from normlab.study.claims.grouping import Group
    from normlab.study.claims.statistics import Level

    a = Group([2.50, 2.52, 2.51], 3, 0, 0)
    b = Group([2.60, 2.61, 2.59], 3, 0, 0)
    _, info = compare(a, b, Level(), sides=("RMSNorm", "LayerNorm"))
    cell = kv_cell("comparison", info, 0, False)
    assert "(RMSNorm)" in cell and "(LayerNorm)" in cell and "<table" in cell and "mean_a" not in cell
    rows = kv_cell("by_scheme", {"pre": {"mean": 2.5, "n": 5}, "post": {"mean": 2.6, "n": 5}}, 2, False)
    assert "<table" in rows and "{" not in rows


def test_the_run_table_shows_every_setting_that_differs_and_marks_runs_that_did_not_train():
    from normlab.config import validate_config
    from normlab.study.sections import runs_section
    from normlab.study.records import RunRecord

    def record(rid, status, **changes):
        config = {"model": {"scheme": "pre", "norm": "layernorm", "n_layer": 4, "d_model": 64, "n_head": 4,
                            "final_norm": None},
                  "train": {"lr": 1e-3, "warmup_steps": 0, "seed": 0, "threads": 1}}
        for key, value in changes.items():
            section, name = key.split("__")
            config[section][name] = value
        return RunRecord(id=rid, config=validate_config(config), status=status, step=10, val_loss=2.5, reason=None,
                         val_curve=[], train_curve=[], tokens_per_s=None, elapsed_s=1.0)

    section = runs_section([record("a", "completed"), record("b", "failed_to_train", model__final_norm=False),
                            record("c", "diverged", train__threads=2)])
    assert {"final_norm", "threads"} <= set(section.table.headers)
    assert section.table.classes == ["status-completed", "status-failed_to_train", "status-diverged"]
    from normlab.report.html import CSS
    assert "tr.status-diverged td, table.data tr.status-failed_to_train td { color: var(--fails)" in CSS


def test_two_processes_rendering_one_report_at_once_never_collide(tmp_path):
    """Two `normlab study` on one directory both render at the end: each renames its own temporary file."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_write_many, args=(tmp_path / "report.html", i)) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert (tmp_path / "report.html").read_text().startswith("writer ")
    assert not list(tmp_path.glob("*.tmp"))


def _write_many(path, i):
    from normlab.report.render import _write

    for k in range(300):
        _write(path, f"writer {i} round {k}\n" * 200)
