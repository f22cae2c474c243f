"""docs/methodology.md defines every figure the loading modes and tool discovery report, each client
preset with its source, and every kind of advice: the names are read from the code, so a new figure,
preset or advice the doc does not name fails here."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest

from ingest.discovery.store import DiscoveryCounts
from mcptax import advice, loading
from mcptax.discovery import SessionDiscovery
from tests.conftest import ROOT

DOC = (ROOT / "docs" / "methodology.md").read_text()


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}.*?\n(.*?)(?=^## )", DOC, re.S | re.M)
    assert match, f"docs/methodology.md has no '## {title}' section"
    return match.group(1)


LOADING = section("Loading modes")
DISCOVERY = section("Discovery")


def named(text: str) -> set[str]:
    return set(re.findall(r"`([a-z_]+)`", text))


def test_every_loading_figure_is_defined():
    threshold = loading.Threshold(10.0, 200_000, 20_000, 1).to_dict()
    figures = {f.name for f in fields(loading.ModeFigures)} - {"mode", "tools"}
    figures |= {"upfront", "tools", "load_tokens", *threshold} - {"rule", "verdict"}
    assert figures - named(LOADING) == set()


@pytest.mark.parametrize("client", loading.CLIENTS)
def test_every_client_preset_has_its_row_and_source(client):
    rows = [
        line
        for line in LOADING.splitlines()
        if line.startswith("| `") and f"`{client}`" in line.split("|")[1]
    ]
    assert len(rows) == 1, f"no row for {client} in the client presets table"
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[-1] not in ("", "-", "–"), f"{client}: no source"
    assert loading.PRESETS[client].profile in cells[1]


def test_every_discovery_figure_is_defined():
    counts = set(SessionDiscovery().counts()) | {f.name for f in fields(DiscoveryCounts)}
    assert counts - named(DISCOVERY) == set()


def test_every_kind_of_advice_is_defined():
    kinds = {
        advice.ADD_INSTRUCTIONS,
        advice.SHORTEN_INSTRUCTIONS,
        advice.KEEP_EAGER,
        advice.REMOVE_UNUSED,
        advice.RENAME_MISSED,
    }
    assert kinds - named(LOADING + DISCOVERY) == set()
