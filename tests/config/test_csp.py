"""The Content-Security-Policy (django-csp, config/settings.py): on every response, strict, and
templates that need nothing it forbids (the browser side is tests/config/test_browser_csp.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.urls import reverse

from dashboard.alerts.notify.models import Channel, ChannelKind
from tests.conftest import ROOT
from tests.dashboard.factories import http_server, record, tool

pytestmark = pytest.mark.django_db

TEMPLATES = ROOT / "templates"
# What a strict policy refuses in markup: an inline <script> (JSON data blocks are not scripts),
# an on* handler attribute, a javascript: URL, an htmx hx-on handler, a style attribute or element.
FORBIDDEN = {
    "inline script": re.compile(r"<script\b(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")", re.I),
    "handler attribute": re.compile(r"\son[a-z]+\s*=", re.I),
    "javascript: URL": re.compile(r"javascript:", re.I),
    "hx-on": re.compile(r"\bhx-on", re.I),
    "style attribute": re.compile(r"\sstyle\s*=", re.I),
    "style element": re.compile(r"<style\b", re.I),
}


def _directives(header: str) -> dict[str, list[str]]:
    return {part.split()[0]: part.split()[1:] for part in (p.strip() for p in header.split(";")) if part}


def test_templates_hold_nothing_the_policy_forbids() -> None:
    found = []
    for path in sorted(TEMPLATES.rglob("*.html")):
        text = path.read_text()
        for what, pattern in FORBIDDEN.items():
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{Path(path).relative_to(ROOT)}:{line}: {what}")
    assert found == []


def test_every_page_carries_the_strict_policy(alice_client, client, team, team_token) -> None:
    server = http_server(team, "docs")
    record(server, [tool("read", "Read a file.")], "1.0.0")
    channel = Channel.objects.create(team=team, name="ops", kind=ChannelKind.EMAIL, config={"to": ["o@x.io"]})
    slug = team.slug
    pages = [
        reverse("team_overview", args=[slug]),
        reverse("server_detail", args=[slug, server.code]),
        reverse("stacks", args=[slug]),
        reverse("alert_list", args=[slug]),
        reverse("channel_detail", args=[slug, channel.code]),
        reverse("ingest_home", args=[slug]),
        reverse("fidelity_agents", args=[slug]),
        reverse("fidelity_prices", args=[slug]),
        reverse("team_settings", args=[slug]),
    ]
    responses = [alice_client.get(page) for page in pages]
    responses.append(alice_client.get(pages[1], HTTP_HX_REQUEST="true", HTTP_HX_TARGET="chart-region"))
    responses.append(client.get(reverse("login")))
    responses.append(client.get("/admin/login/"))
    _, plaintext = team_token
    responses.append(client.get("/api/v1/team", HTTP_AUTHORIZATION=f"Bearer {plaintext}"))
    for response in responses:
        assert response.status_code == 200, response.request["PATH_INFO"]
        policy = _directives(response["Content-Security-Policy"])
        assert policy["default-src"] == ["'self'"]
        assert policy["script-src"] == ["'self'"]
        assert policy["style-src"] == ["'self'"]
        assert policy["img-src"] == ["'self'", "data:"]
        assert policy["frame-ancestors"] == ["'none'"]
        assert policy["form-action"] == ["'self'"]
        assert policy["object-src"] == ["'none'"]
        assert "unsafe" not in response["Content-Security-Policy"]
