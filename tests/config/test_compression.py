"""Pages travel gzip-compressed to a client that accepts it: a chart page carries its figures in the
page (every snapshot of the history), which is most of its weight after the chart bundle."""

from __future__ import annotations

import gzip
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.dashboard.factories import http_server, record, tool

pytestmark = pytest.mark.django_db


@pytest.fixture
def chart_page(team):
    server = http_server(team, "files")
    start = timezone.now() - timedelta(days=80)
    for k in range(80):
        tools = [tool(f"t{j}", "Reads a file. " * (3 + (k + j) % 7)) for j in range(4)]
        record(server, tools, f"1.{k}", when=start + timedelta(days=k))
    return reverse("server_detail", args=[team.slug, server.code])


def _figure(body: bytes) -> str:
    found = re.search(rb'<script id="tax-chart-data" type="application/json">(.*?)</script>', body, re.S)
    assert found, "the page has no chart figure"
    return found.group(1).decode()


def test_a_chart_page_is_sent_gzipped_when_the_client_accepts_it(alice_client, chart_page):
    plain = alice_client.get(chart_page)
    packed = alice_client.get(chart_page, HTTP_ACCEPT_ENCODING="gzip, deflate, br")
    assert plain.status_code == packed.status_code == 200
    assert "Content-Encoding" not in plain
    assert packed["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in packed["Vary"]
    unpacked = gzip.decompress(packed.content)
    assert _figure(unpacked) == _figure(plain.content)
    assert "1.79" in _figure(unpacked)  # the newest release is on the chart
    # The figures of 80 snapshots repeat themselves: the page shrinks to well under a third.
    assert len(packed.content) * 3 < len(plain.content), (len(packed.content), len(plain.content))


def test_a_client_that_does_not_accept_gzip_gets_the_page_as_is(alice_client, chart_page):
    response = alice_client.get(chart_page, HTTP_ACCEPT_ENCODING="identity")
    assert response.status_code == 200
    assert "Content-Encoding" not in response
    assert b"<html" in response.content
