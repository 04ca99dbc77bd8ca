"""The report as a browser sees it: headless Chromium loads it with no console error and every image decoded."""
from __future__ import annotations

import pytest

from tests.report.browser import chromium, missing


@pytest.fixture(scope="module")
def page(report, tmp_path_factory):
    """The loaded page's facts, read once: console log, image states, verdict rows."""
    problem = missing()
    if problem:
        pytest.fail(problem)  # not a skip: CI installs the browser, so its absence is a broken set-up
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as driver:
        driver.get(report["html"].resolve().as_uri())
        images = driver.execute_script(
            "return Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.naturalHeight]);")
        rows = driver.execute_script(
            "return Array.from(document.querySelectorAll('tr.verdict')).map(r => r.dataset.claim);")
        scripts = driver.execute_script("return document.scripts.length;")
        title = driver.title
        log = driver.get_log("browser")
        views = {}
        for width in (1400, 700):  # what a reader sees at a desktop and a narrow window's width
            driver.set_window_size(width, 1200)
            driver.get(report["html"].resolve().as_uri())
            text = driver.execute_script("return document.body.innerText;")
            shot = tmp_path_factory.mktemp(f"shot-{width}") / "report.png"
            driver.save_screenshot(str(shot))
            # jump to a claim below the fold, as its link in the contents bar does; where is the heading then?
            driver.get(report["html"].resolve().as_uri() + "#C5")
            jump = driver.execute_script(
                "const h = document.getElementById('C5').querySelector('h3, h2') || document.getElementById('C5');"
                "const bar = document.querySelector('nav.toc').getBoundingClientRect();"
                "const sticky = getComputedStyle(document.querySelector('nav.toc')).position === 'sticky';"
                "return [h.getBoundingClientRect().top, sticky && bar.top <= 0 ? bar.bottom : 0];")
            fill = driver.execute_script(  # each claim's figures: [width of each image / its row's width]
                "return Array.from(document.querySelectorAll('article.claim .figs')).map(g => {"
                " const row = g.getBoundingClientRect().width;"
                " return Array.from(g.querySelectorAll('img')).map(i => i.getBoundingClientRect().width / row); });")
            wider = driver.execute_script(  # how far the page runs past the window's right edge
                "return document.documentElement.scrollWidth - document.documentElement.clientWidth;")
            views[width] = {"text": text, "shot": shot, "heading_top": jump[0], "bar_bottom": jump[1], "fill": fill,
                            "wider": wider,
                            "overflow": driver.execute_script(
                                "return Array.from(document.querySelectorAll('article.claim table')).filter(t => {"
                                " const card = t.closest('article').getBoundingClientRect();"
                                " let box = t;"  # the outermost scrolling wrapper holds it, if any
                                " for (let el = t; el && el.tagName !== 'ARTICLE'; el = el.parentElement)"
                                "  if (el.classList.contains('scroll')) box = el;"
                                " return box.getBoundingClientRect().right > card.right + 1; }).length;")}
    return {"images": images, "rows": rows, "scripts": scripts, "title": title, "log": log, "views": views}


def test_no_console_errors(page):
    errors = [entry for entry in page["log"] if entry.get("level") == "SEVERE"]
    assert not errors, errors


def test_every_image_decodes(page):
    assert len(page["images"]) >= 8
    broken = [i for i, (complete, width, height) in enumerate(page["images"]) if not (complete and width and height)]
    assert not broken, f"images not decoded: {broken}"


def test_one_verdict_row_per_claim_and_escaped_title(page):
    assert page["rows"] == [f"C{i}" for i in range(1, 17)]
    assert page["scripts"] == 0  # the "<script>" in a claim title stayed text
    assert page["title"] == "normlab study: quick"


@pytest.mark.parametrize("width", [1400, 700])
def test_no_raw_python_dicts_or_unnamed_sides_on_the_page(page, width):
    import re

    text = page["views"][width]["text"]
    assert not re.search(r"\{['\"]?\w+['\"]?: ", text), "a raw dict is printed"
    for raw in ("mean_a", "mean a", "mean b", "Sources:", "seed 00"):
        assert raw not in text, raw
    assert page["views"][width]["shot"].stat().st_size > 10_000  # the screenshot was taken and has content


@pytest.mark.parametrize("width", [1400, 700])
def test_the_sticky_contents_bar_never_covers_the_heading_jumped_to(page, width):
    view = page["views"][width]
    assert view["heading_top"] >= view["bar_bottom"], view


@pytest.mark.parametrize("width", [1400, 700])
def test_claim_tables_stay_inside_their_card(page, width):
    """Wide tables, tables nested in a table's cells included, scroll inside their card: the page itself never
    scrolls sideways."""
    assert page["views"][width]["overflow"] == 0
    assert page["views"][width]["wider"] <= 0


@pytest.mark.parametrize("width", [1400, 700])
def test_claim_figures_use_the_cards_width(page, width):
    """A claim's only figure spans its card; two or more share it, never leaving an empty column beside them."""
    fill = [shares for shares in page["views"][width]["fill"] if shares]  # a claim with no data has no image
    assert fill
    for shares in fill:
        wanted = 0.95 if len(shares) == 1 or width == 700 else 0.45
        assert min(shares) >= wanted, (width, shares)
