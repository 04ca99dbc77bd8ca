"""Headless Chromium through Selenium, with the Debian packages' driver: nothing is ever downloaded."""
from __future__ import annotations

import importlib.util
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
INSTALL_HINT = "run `apt-get install -y chromium chromium-driver` (CI installs them)"


def missing() -> str | None:
    """Why the browser cannot start, or None."""
    if importlib.util.find_spec("selenium") is None:
        return "the selenium package is missing: pip install -e '.[test]'"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not path.exists():
            return f"{path} is missing: {INSTALL_HINT}"
    return None


@contextmanager
def chromium(profile_dir: Path, size: tuple[int, int] = (1400, 2400)) -> Iterator:
    """A headless Chromium driver with a fresh profile, the browser console logged."""
    # the explicit driver path already keeps Selenium Manager out; offline mode makes sure it never downloads
    os.environ["SE_OFFLINE"] = "true"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                f"--user-data-dir={profile_dir}", f"--window-size={size[0]},{size[1]}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
