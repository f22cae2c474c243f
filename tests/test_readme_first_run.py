"""The README's "First run, without the demo", followed word for word: its shell commands run as
written (on a fresh VAR_DIR), then its numbered steps are done in real headless Chromium against
the app `make serve` started. The steps below are the README's own text; a change to either side
fails here until the other follows."""

from __future__ import annotations

import re
import shlex
import subprocess

import pytest

from tests.browser import CHROMIUM_ARGS, chromium_executable
from tests.conftest import ROOT
from tests.helpers import EmbeddedRun, embedded_env, free_port

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(600)]

COMMANDS = [
    "make install",
    ".venv/bin/python manage.py migrate",
    ".venv/bin/python manage.py createsuperuser --username alice --email alice@example.com",
    "make serve",
]
STEPS = [
    "Open http://127.0.0.1:8000/ and log in as `alice`.",
    "On **Create your team**, type `Platform` and press **Create team**.",
    "Press **Overview**, then **Add server**; name it `files`, choose **stdio (command)** as **Transport**, enter the "
    "**Command** `.venv/bin/python -m examples.servers.lean`, and press **Add server**.",
    "Wait on the server's page: its first poll is due, and the page fills in the fixed tax (700 "
    "tokens, 5 tools) when the poll lands.",
]
PASSWORD = "first-run-pw-2026"


def _section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## First run, without the demo\n")
    return text[start : text.index("\n## ", start + 3)]


def test_the_readme_first_run_section_is_what_this_test_follows():
    section = _section()
    commands = re.search(r"```sh\n(.*?)```", section, re.S)
    assert commands is not None and commands.group(1).splitlines() == COMMANDS
    steps = re.findall(r"^\d+\. (.*)$", section, re.M)
    assert steps == STEPS
    assert "set `DJANGO_SUPERUSER_PASSWORD` and add\n`--noinput`" in section
    assert "`PORT=8001 make serve` for another port" in section


def _run(command: str, env: dict[str, str]) -> None:
    if command.startswith(".venv/bin/python manage.py createsuperuser"):
        # The README's way in a script: DJANGO_SUPERUSER_PASSWORD and --noinput.
        env = {**env, "DJANGO_SUPERUSER_PASSWORD": PASSWORD}
        command += " --noinput"
    done = subprocess.run(
        shlex.split(command), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{command}: {done.stdout}\n{done.stderr}"


def test_following_the_readme_first_run_gives_a_polled_server(tmp_path):
    if subprocess.run(["make", "--question", "install"], cwd=ROOT).returncode != 0:
        pytest.skip("the .venv is not current: `make install` would reach the package registry")
    port = free_port()
    # The test's own VAR_DIR and port; the README's address names the default port.
    env = embedded_env(tmp_path, PORT=str(port))
    for command in COMMANDS[:3]:
        _run(command, env)
    with EmbeddedRun(shlex.split(COMMANDS[3]), env, ROOT) as serve:
        serve.wait_for_address(timeout=180)
        url = f"http://127.0.0.1:{port}/"
        assert serve.last_line().startswith(f"Dashboard: {url}")
        _follow_steps(url, tmp_path)


def _follow_steps(url: str, tmp_path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_executable(), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1360, "height": 900})
        page.set_default_timeout(30_000)
        # 1. Open the address and log in as alice.
        page.goto(url)
        page.fill("input[name=username]", "alice")
        page.fill("input[name=password]", PASSWORD)
        page.click("form button")
        # 2. Create your team: Platform.
        page.wait_for_selector("h1:text('Create your team')")
        page.fill("input[name=name]", "Platform")
        page.click("#create-team button:text('Create team')")
        page.wait_for_selector("text=Team Platform created")
        # 3. Overview, then Add server: files, stdio (command), the lean example server's command.
        page.click("nav a:text-is('Overview')")
        page.click("a:text-is('Add server')")
        page.fill("input[name=name]", "files")
        page.select_option("select[name=transport]", label="stdio (command)")
        page.fill("input[name=command_line]", ".venv/bin/python -m examples.servers.lean")
        page.click("button:text-is('Add server')")
        # 4. Wait on the server's page until the first poll lands: 700 tokens, 5 tools.
        page.wait_for_selector("#no-snapshot")
        assert "first poll is due now" in page.locator("#no-snapshot").inner_text()
        page.wait_for_function(
            "() => (document.querySelector('#current-tax') || {}).textContent === '700'", timeout=120_000
        )
        assert page.locator("#tools tbody tr[data-tool]").count() == 5
        page.screenshot(path=str(tmp_path / "first-run.png"), full_page=True)
        page.screenshot(path="/tmp/shots/readme-first-run.png", full_page=True)
        browser.close()
