"""Real headless Chromium for the browser tests: the `browser_page` fixture (a plugin of the root
conftest, so every test sees it) and the helpers those tests import (browser_login, axe-core).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import need as need_service

ROOT = Path(__file__).resolve().parent.parent


# -- real headless Chromium ----------------------------------------------------------------------

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def browser_page(live_server, monkeypatch):
    """A page in Debian's headless Chromium that records requests leaving the app's origin
    (`page.foreign_requests`) and JavaScript errors (`page.js_errors`)."""
    import shutil

    executable = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(executable):
        need_service("Debian's chromium is not installed")
    # Playwright's sync API keeps an event loop running in this thread; the test's own ORM calls
    # (fixtures, assertions) are still plain synchronous code.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1360, "height": 900})
        page.set_default_timeout(20_000)
        origin = live_server.url
        page.foreign_requests = []
        page.js_errors = []
        page.on(
            "request",
            lambda r: (
                None if r.url.startswith((origin + "/", "data:")) else page.foreign_requests.append(r.url)
            ),
        )
        page.on("pageerror", lambda exc: page.js_errors.append(str(exc)))
        yield page
        browser.close()


def browser_login(page, live_server, username: str, password: str) -> None:
    page.goto(live_server.url + "/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("form button")


AXE_DIR = ROOT / "var" / "axe"  # installed by the set-up phase (scripts/test_setup.py), never here
AXE_VERSION = "4"


def axe_core_script() -> Path:
    """axe-core's browser bundle, installed under var/axe by scripts/test_setup.py (the set-up phase
    of `make test`): a test never reaches npm, so it runs the same with the network cut."""
    script = AXE_DIR / "node_modules" / "axe-core" / "axe.min.js"
    if not script.exists():
        need_service("axe-core is not installed under var/axe: run scripts/test_setup.py (make test does)")
    return script


def chromium_executable() -> str:
    import shutil

    executable = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(executable):
        need_service("Debian's chromium is not installed")
    return executable
