"""The charts' figures (dashboard.servers.charts, ingest.fidelity.charts): user-controlled strings
reach Plotly escaped, since Plotly draws names, labels, ticks and hover text as a subset of HTML."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from ingest.capture.models import Agent
from ingest.fidelity.charts import exact_rate_figure
from tests.dashboard.factories import embedded_figure, http_server, record, tool

pytestmark = pytest.mark.django_db

EVIL = '<a href="https://evil.example">x</a>'
ESCAPED = '&lt;a href="https://evil.example"&gt;x&lt;/a&gt;'


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def test_a_release_version_with_markup_reaches_the_chart_escaped(alice_client, team) -> None:
    server = http_server(team, "docs")
    record(server, [tool("read", "Read a file.")], "1.0.0", when=timezone.now() - timedelta(days=2))
    record(server, [tool("read", "Read a file."), tool("write", "Write a file.")], EVIL)
    url = reverse("server_detail", args=[team.slug, server.code])
    for axis in ("date", "release"):
        figure = embedded_figure(alice_client.get(url, {"axis": axis}).content.decode())
        texts = _strings(figure)
        assert not any("<a" in s for s in texts), axis
        release = next(t for t in figure["data"] if t["name"] == "Release")
        assert release["text"] == ["1.0.0", ESCAPED]
        assert figure["data"][0]["customdata"][1][0] == ESCAPED  # the hover label of the line
        if axis == "release":
            assert figure["layout"]["xaxis"]["ticktext"] == ["1.0.0", ESCAPED]


def test_an_agent_name_with_markup_reaches_the_chart_escaped(team) -> None:
    agent = Agent.objects.create(team=team, family="x", name="<b>bold</b> & co", version="1<br>2")
    day = timezone.now().date()
    figure = exact_rate_figure([agent], {agent.pk: [(day, 3, 4)]})
    (trace,) = figure["data"]
    assert "<" not in trace["name"] and "&lt;b&gt;bold&lt;/b&gt; &amp; co" in trace["name"]
    assert "&lt;br&gt;" in json.dumps(figure)
