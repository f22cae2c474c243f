"""The methodology page: its worked example reproduced here from the capture with tiktoken directly,
and the page rendered in headless Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.urls import reverse

from dashboard.servers.methodology import CAPTURE
from tests.browser import browser_login
from tests.helpers import compact, tiktoken_reference

ROOT = Path(__file__).resolve().parents[3]
CORPUS_COPY = ROOT / "tests" / "data" / "servers" / CAPTURE.name


def expected_figures() -> dict[str, int]:
    tools = json.loads(CORPUS_COPY.read_text(encoding="utf-8"))["tools"]
    cl100k, o200k = tiktoken_reference("cl100k_base"), tiktoken_reference("o200k_base")
    visible = [{k: t[k] for k in ("name", "description", "inputSchema") if k in t} for t in tools]
    lint = sum(
        len(
            cl100k.encode_ordinary(
                compact({("input_schema" if k == "inputSchema" else k): v for k, v in t.items()})
            )
        )
        for t in visible
    )
    sorted_visible = json.dumps(visible, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    return {
        "mcp": len(cl100k.encode_ordinary(compact(visible))),
        "mcp-o200k": len(o200k.encode_ordinary(compact(visible))),
        "wire": len(cl100k.encode_ordinary(compact({"tools": tools}))),
        "toolbill": len(o200k.encode_ordinary(sorted_visible)),
        "lint": lint,
    }


def test_the_shipped_capture_is_the_corpus_capture():
    assert CAPTURE.read_bytes() == CORPUS_COPY.read_bytes()


@pytest.mark.django_db
def test_the_page_shows_the_worked_example_figures(alice_client):
    figures = expected_figures()
    html = alice_client.get(reverse("methodology")).content.decode()
    for anchor in ("formula", "counted", "profiles", "encodings", "worked-example"):
        assert f'id="{anchor}"' in html
    row = re.search(r'<tr data-profile="mcp">(.*?)</tr>', html, re.S).group(1)
    assert f'data-encoding="cl100k_base">{figures["mcp"]:,}<' in row
    assert f'data-encoding="o200k_base">{figures["mcp-o200k"]:,}<' in row
    peers = html[html.index('id="example-peers"') :]
    for name in ("wire", "toolbill", "lint"):
        assert f">{figures[name]:,}<" in peers, name
    assert "the client&#x27;s own system prompt" in html or "client's own system prompt" in html


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_methodology_page_in_chromium(browser_page, live_server, team, alice):
    page = browser_page
    alice.set_password("pw-for-browser-123")
    alice.save()
    browser_login(page, live_server, "alice", "pw-for-browser-123")
    page.wait_for_url(re.compile(r"/t/"))
    page.goto(live_server.url + reverse("methodology"))
    assert page.locator("h1").inner_text() == "How every figure is counted"
    figures = expected_figures()
    mcp_row = page.locator('#example-matrix tr[data-profile="mcp"] td[data-encoding="cl100k_base"]')
    assert mcp_row.inner_text() == f"{figures['mcp']:,}"
    assert page.locator("#example-matrix tbody tr").count() == 4
    assert page.locator("#profiles").is_visible() and page.locator("#worked-example").is_visible()
    assert page.js_errors == [] and page.foreign_requests == []
