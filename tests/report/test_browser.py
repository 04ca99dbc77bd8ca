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
    return {"images": images, "rows": rows, "scripts": scripts, "title": title, "log": log}


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
