"""The README and docs/ against what they describe: every count is the registries', every time is its committed
result file's, the command list is the CLI's, every link resolves inside the repository, and no page speaks of
how the project was made. A stale figure fails here, not in a reader's hands.

Commands in the pages are checked by tests/test_readme.py; verdict tables by tests/test_results.py.
"""
from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from normlab.cli import app
from normlab.hf.families import by_model_type, export_layouts  # importing the families registers them
from normlab.nn.norms import NORMS
from normlab.nn.schemes import SCHEMES
from normlab.study.claims import CLAIMS
from normlab.study.presets import PRESETS

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text("utf-8")
DOCS = {p.name: p.read_text("utf-8") for p in sorted((ROOT / "docs").glob("*.md"))}
PAGES = {"README.md": README, **{f"docs/{name}": text for name, text in DOCS.items()}}
RESULTS = ROOT / "benchmarks" / "results"
MEASURED = json.loads((ROOT / "src" / "normlab" / "study" / "measured_cost.json").read_text("utf-8"))
README_MAX_LINES = 300
SCREEN = (100, 50)  # a help text fits one screen: at most 50 lines on a terminal 100 columns wide


def _claim_ids(family: str) -> list[int]:
    return sorted(int(c[1:]) for c in CLAIMS.names() if c.startswith(family))


# -- the README's shape --------------------------------------------------------------------------------------
def test_the_readme_is_short_and_puts_the_findings_first():
    assert len(README.splitlines()) <= README_MAX_LINES
    sections = re.findall(r"^## (.+)$", README, re.M)
    assert sections[0] == "What the standard study finds", sections
    assert sections.index("Install") < sections.index("Quick start") < sections.index("Presets")


def test_every_docs_page_the_readme_promises_exists():
    for page in ("claims", "methodology", "cost", "schemes", "training", "diagnostics", "huggingface",
                 "performance", "distributed", "frontier"):
        assert page + ".md" in DOCS, f"docs/{page}.md is missing"
        assert f"docs/{page}.md" in README, f"the README does not link docs/{page}.md"


# -- counts are the registries' ------------------------------------------------------------------------------
@pytest.mark.parametrize("page", PAGES)
def test_counts_of_schemes_normalizers_and_claims_are_the_registries(page):
    text = PAGES[page]
    for n in re.findall(r"\b(\d+) (?:placement )?schemes\b", text):
        assert int(n) == len(SCHEMES), f"{page} says {n} schemes; the registry has {len(SCHEMES)}"
    for n in re.findall(r"\b(\d+) normalizers\b", text):
        assert int(n) == len(NORMS), f"{page} says {n} normalizers; the registry has {len(NORMS)}"
    for family in ("C", "F"):
        ids = _claim_ids(family)
        assert ids == list(range(1, len(ids) + 1)), f"the {family} claims are not numbered 1..n: {ids}"
        # a range from 1 is the family, or the claims of the preset that starts it (the frontier's F1–F8)
        ends = {len(ids)} | {int(p.claims[-1][1:]) for p in PRESETS.values() if p.claims[0] == f"{family}1"}
        for last in re.findall(rf"\b{family}1[–-]{family}(\d+)\b", text):
            assert int(last) in ends, f"{page} says {family}1–{family}{last}; there are {len(ids)}"
        for n in re.findall(r"\ball (\d+) claims\b", text) if family == "C" else []:
            assert int(n) == len(ids), f"{page} says all {n} claims; there are {len(ids)} C claims"


def test_the_readme_lists_every_scheme_and_normalizer():
    models = README[README.index("## Models"):README.index("```python")]
    named = set(re.findall(r"`([\w-]+)`", models))
    assert set(SCHEMES.names()) <= named, set(SCHEMES.names()) - named
    assert set(NORMS.names()) <= named, set(NORMS.names()) - named


def test_the_lists_written_from_the_registries_are_current():
    """The README's normalizers and docs/schemes.md's table of them are written from the registry (`python -m
    normlab.cli.listings`, which reads each one's parameters from a built module): a page that no longer says what
    the registry says fails here."""
    from normlab.cli.listings import docs_lists, written

    for page, lists in docs_lists().items():
        assert written(PAGES[page], lists, page) == PAGES[page], f"{page} is stale: run python -m normlab.cli.listings"


def test_the_schemes_page_has_a_row_for_every_scheme_and_normalizer_and_no_other():
    rows = set(re.findall(r"^\| `([\w-]+)` \|", DOCS["schemes.md"], re.M)) - {"decoder", "encoder", "encoder-decoder"}
    assert rows == set(SCHEMES.names()) | set(NORMS.names())


def test_the_schemes_page_says_which_schemes_an_architecture_refuses():
    text = DOCS["schemes.md"]
    line = re.search(r"^- in an encoder–decoder: (.+?)\(", text, re.M).group(1)
    refused = {name for name, s in SCHEMES.items() if "encoder-decoder" in s.facts.undefined_architectures}
    assert set(re.findall(r"`(\w+)`", line)) == refused
    line = re.search(r"^- with `none`: (.+?)\(", text, re.M).group(1)
    assert set(re.findall(r"`(\w+)`", line)) == {n for n, s in SCHEMES.items() if "none" in s.facts.incompatible_norms}


def test_every_claim_has_its_statement_in_docs_claims():
    headings = dict(re.findall(r"^### ([CF]\d+) (.+)$", DOCS["claims.md"], re.M))
    assert set(headings) == set(CLAIMS.names())
    for cid, title in headings.items():
        assert title == CLAIMS.get(cid).title, f"docs/claims.md's {cid} heading is not its registered title"


def test_the_huggingface_page_names_every_family_and_layout():
    text = DOCS["huggingface.md"]
    rows = set(re.findall(r"`(\w+)`", "".join(re.findall(r"^\| [^|`]*\((`[^)]*)\) \|", text, re.M)))) - {"model_type"}
    assert rows == set(by_model_type()), "docs/huggingface.md's family table is not the adapters' model_types"
    export = text[text.index("## Export"):]
    for layout in export_layouts():
        assert f"`{layout.model_types[0]}`" in export, f"docs/huggingface.md does not list the layout {layout.family}"


# -- times are their files' ----------------------------------------------------------------------------------
def _minutes(preset: str) -> str:
    return f"{MEASURED[preset]['wall_s'] / 60:.1f} min"


@pytest.mark.parametrize("preset", sorted(MEASURED))
def test_preset_times_are_measured_cost_json(preset):
    m = MEASURED[preset]
    row = re.search(rf"^\| `{preset}`[^\n]*$", README, re.M).group(0)
    expected = f"{_minutes(preset)}, {m['runs']} runs, {m['machine']} ({m['date']})"
    assert expected in row, f"the README's {preset} row should say {expected!r} (measured_cost.json)"
    row = re.search(rf"^\| `{preset}` \|[^\n]*$", DOCS["cost.md"], re.M).group(0)
    expected = f"| {m['runs']} | {_minutes(preset)} ({m['wall_s']:,.1f} s) | {m['date']}, {m['machine']}"
    assert expected in row, f"docs/cost.md's {preset} row should hold {expected!r}"


def test_the_quick_start_quotes_the_standard_run_as_measured():
    m = MEASURED["standard"]
    said = f"{_minutes('standard')} for {m['runs']} runs on a {m['machine']}\n({m['date']}"
    assert said in README, f"the quick start should say {said!r} (measured_cost.json)"


def test_presets_without_a_measurement_are_not_given_a_time():
    for preset in ("quick", "deep", "full"):
        if preset not in MEASURED:
            row = re.search(rf"^\| `{preset}`[^\n]*$", README, re.M).group(0)
            assert not re.search(r"\d+(\.\d+)? (min|h|s)\b", row), row


def test_the_cost_figures_are_cpu_step_costs_json():
    m = json.loads((RESULTS / "cpu_step_costs_2core_cpu.json").read_text("utf-8"))
    text = DOCS["cost.md"]
    assert f"{m['rounds']} rounds" in text and m["cpu"] in text
    rows = [(m["context"]["base"]["ratio_32_over_64"], "4-layer base step"),
            (m["context"]["depth_cell"]["ratio_32_over_64"], "12-layer depth-cell step"),
            (m["context"]["c8"]["ratio_32_over_64"], "32-layer, 32-wide step"),
            (m["adamw_foreach"]["ratio_foreach_over_single"], "`foreach`"),
            (m["corpus_encoding"]["ratio_lookup_over_per_char"], "table lookup")]
    for ratio, where in rows:
        line = next(line for line in text.splitlines() if where in line)
        assert line.rstrip().endswith(f"| {ratio:.2f}× |"), (where, ratio, line)
    assert m["adamw_foreach"]["bit_identical"] and m["corpus_encoding"]["same_ids"]


def test_the_checkpointing_table_is_deep_checkpointing_json():
    m = json.loads((RESULTS / "deep_checkpointing_2core_cpu.json").read_text("utf-8"))
    text = DOCS["training.md"]
    assert m["cpu"].replace("(R)", "").startswith("Intel Xeon") and "2-core Intel Xeon" in text
    for depth in sorted({r["depth"] for r in m["rows"]}):
        plain, ckpt = (next(r for r in m["rows"] if r["depth"] == depth and r["activation_checkpointing"] is c)
                       for c in (False, True))
        row = (f"| {depth:,} ({plain['params_m']:.1f} M parameters) | {plain['step_s']:.2f} s | {ckpt['step_s']:.2f} s "
               f"| {plain['peak_mem_mb']:,.0f} MB | {ckpt['peak_mem_mb']:,.0f} MB |")
        assert row in text, f"docs/training.md should hold {row!r}"
    cost = DOCS["cost.md"]
    for depth in (100, 1000):
        ckpt = next(r for r in m["rows"] if r["depth"] == depth and r["activation_checkpointing"])
        assert f"{ckpt['step_s']:.2f} s ({depth:,} layers)" in cost


def test_the_stacking_table_is_multirun_json():
    rows = json.loads((RESULTS / "multirun_2core_cpu.json").read_text("utf-8"))
    text = DOCS["performance.md"]
    names = {"quick": "quick preset's model", "nanogpt": "nanoGPT recipe"}
    for shape in names:
        for threads in (1, 2):
            speedups = [f"{r['speedup']:.2f}×" for r in sorted(rows, key=lambda r: r["K"])
                        if r["shape"] == shape and r["threads"] == threads]
            line = next(line for line in text.splitlines()
                        if line.startswith(f"| {names[shape]}") and f"| {threads} |" in line)
            assert line.endswith("| " + " | ".join(speedups) + " |"), (shape, threads, line)


# -- the CLI is what the README lists ------------------------------------------------------------------------
def test_normlab_help_lists_exactly_the_readmes_commands():
    listed = re.findall(r"^\| `normlab ([\w-]+)` \|", README, re.M)
    assert len(listed) == len(set(listed))
    group = typer.main.get_command(app)
    assert set(listed) == set(group.commands), "README's command table and `normlab --help` differ"
    shown = CliRunner().invoke(app, ["--help"], terminal_width=SCREEN[0]).output
    commands = shown[shown.index("Commands:"):]
    assert set(re.findall(r"^  ([\w-]+) ", commands, re.M)) == set(listed)


@pytest.mark.parametrize("command", [[]] + [[c] for c in sorted(typer.main.get_command(app).commands)])
def test_each_help_fits_one_screen(command):
    width, height = SCREEN
    text = CliRunner().invoke(app, [*command, "--help"], terminal_width=width).output
    lines = sum(max(1, -(-len(line) // width)) for line in text.splitlines())  # a long line wraps
    assert lines <= height, f"`normlab {' '.join(command)} --help` takes {lines} lines at {width} columns"


# -- nothing outside the repository, nothing about how it was made -------------------------------------------
def _tracked(*suffixes: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / p for p in out.splitlines() if p.endswith(suffixes) and (ROOT / p).is_file()]


def test_nothing_points_outside_the_repository():
    for path in _tracked(".md", ".py", ".toml", "Makefile"):
        if path == Path(__file__).resolve():  # this test names what it looks for
            continue
        text = path.read_text("utf-8", errors="replace")
        assert "../shared" not in text and "../seeds" not in text, path.relative_to(ROOT)
        assert "pip install 'normlab[" not in text, f"{path.relative_to(ROOT)}: normlab is not on the package " \
                                                     "index; the hint is pip install -e '.[extra]'"


# how the project was made is not what a reader came for
DEVELOPMENT = [r"\bthis round\b", r"\b(the|a|previous|next|last) round\b", r"\bround before\b", r"\bissue \d+",
               r"\bthe issue\b", r"\bsessions?\b", r"\bthis machine\b", r"\blent\b", r"\bstored cop(y|ies)\b",
               r"\bhelper-\d+\b"]


@pytest.mark.parametrize("page", [*PAGES, "CHANGELOG.md"])
def test_no_page_speaks_of_how_the_project_was_made(page):
    text = PAGES.get(page) or (ROOT / page).read_text("utf-8")
    for pattern in DEVELOPMENT:
        found = re.search(pattern, text, re.I)
        assert not found, f"{page}: {found.group(0)!r}"


def test_every_relative_link_resolves():
    for page, text in PAGES.items():
        base = (ROOT / page).parent
        for target in re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", text):
            assert (base / target).exists(), f"{page} links {target}, which does not exist"


def test_the_license_file_is_the_license_pyproject_names():
    license_name = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["license"]
    text = (ROOT / "LICENSE").read_text("utf-8")
    assert license_name == "MIT" and text.startswith("MIT License")


def test_the_step_limit_table_is_its_json():
    data = json.loads((RESULTS / "step_limit_2core_cpu.json").read_text("utf-8"))
    text = DOCS["performance.md"]
    rows = {str(r["K"]): r for r in data["rows"]}
    for k, r in rows.items():
        s = r["step_ms"]
        assert (f"| {s['median']:.1f} ms ({s['min']:.1f}–{s['max']:.1f}) | {r['step_ms_per_run']:.1f} ms | "
                f"{r['matmuls_ms']['median']:.1f} ms | {r['step_over_matmuls']:.2f}× |") in text, k
    flat = " ".join(text.split())
    p16 = rows["16"]["profile_ms"]
    assert f"matmuls {p16['matmul']:.1f}, attention" in flat and f"GELU {p16['activation']:.1f}" in flat
    assert all(r["step_over_matmuls"] > 1.5 for r in rows.values())  # what the page says of the limit
    said = {"fused AdamW": "torch's fused AdamW (CPU kernel)", "compiled": "`torch.compile` of the model",
            "compiled + fused AdamW": "both"}
    for c in data["candidates"]:  # each candidate's row, and what the page says of them all
        row = (f"| {said[c['candidate']]} | {c['speedup']:.2f}× faster | {c['step_over_matmuls']:.2f}× (eager "
               f"{c['eager_over_matmuls']:.2f}×) |")
        assert row in text and f"{c['max_param_diff_from_eager']:.1e} from eager" in text, row
        assert c["bit_identical_rerun"] and c["step_over_matmuls"] > 1.8  # "reruns bit-identical", "none reaches"
        assert c["setup_s"] < 1 or (f"{c['setup_s']:.1f} s" in text and f"{c['steps_to_repay_setup']:,} steps" in text)


def test_the_residual_2026_cost_table_is_its_json():
    m = json.loads((RESULTS / "residual_2026_cost_2core_cpu.json").read_text("utf-8"))
    text = DOCS["performance.md"]
    assert f"{m['rounds']} interleaved rounds" in text and m["cpu"] in text
    for r in m["rows"]:
        row = (f"| {r['scheme']} | {r['step_ms']:.1f} ms | {r['ratio_to_pre']:.2f}× [{r['ratio_p10']:.2f}, "
               f"{r['ratio_p90']:.2f}] | {r['peak_mem_mb']:.1f} MB | {r['memory_ratio_to_pre']:.2f}× |")
        assert row in text, f"docs/performance.md should hold {row!r}"


def test_the_frontier_stacking_figures_are_multirun_frontier_json():
    rows = json.loads((RESULTS / "multirun_frontier_2core_cpu.json").read_text("utf-8"))
    assert {r["K"] for r in rows} == {8, 16, 32} and {r["shape"] for r in rows} == {"frontier"}
    text = " ".join(DOCS["cost.md"].split())
    for threads, words in ((1, "on one thread"), (2, "on two")):
        ratios = [r["speedup"] for r in rows if r["threads"] == threads]
        assert f"{min(ratios):.2f}–{max(ratios):.2f}× {words}" in text
