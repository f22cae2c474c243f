"""The instructions advice is remembered by content: a second page view does not tokenize the
server's tools again, gives the same advice, and a new tool list is advised afresh."""

from __future__ import annotations

import pytest

from ingest.discovery import advice as advice_mod
from ingest.discovery.advice import history_advice
from ingest.discovery.figures import Catalog
from mcptax.advice import ADD_INSTRUCTIONS
from tests.dashboard.factories import http_server, record, tool

pytestmark = pytest.mark.django_db


def _tools(n: int, words: int) -> list[dict]:
    return [tool(f"tool_{j}", "Does a thing at length. " * words) for j in range(n)]


def test_instructions_advice_is_remembered_by_content(team, monkeypatch):
    server = http_server(team, "big")
    record(server, _tools(40, 30), "1.0")
    computed = []
    real = advice_mod.loading.server_figures

    def counting(*args, **kwargs):
        computed.append(kwargs["server"])
        return real(*args, **kwargs)

    monkeypatch.setattr(advice_mod.loading, "server_figures", counting)
    advice_mod._INSTRUCTIONS_ADVICE.clear()
    first = history_advice(Catalog(team), None)
    second = history_advice(Catalog(team), None)
    assert [a.kind for a in first] == [ADD_INSTRUCTIONS]
    assert first == second
    assert computed == ["big"]
    # A new tool list: advised again, with its own saving.
    record(server, _tools(60, 30), "2.0")
    third = history_advice(Catalog(team), None)
    assert computed == ["big", "big"]
    assert [a.kind for a in third] == [ADD_INSTRUCTIONS]
    assert third[0].saving_tokens > first[0].saving_tokens
