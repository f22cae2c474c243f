"""The replay server (examples/servers/replay.py) polled through the product: every capture of the
corpus comes back as a snapshot holding the captured tools exactly, with the formula's fixed tax."""

from __future__ import annotations

import pytest

from dashboard.servers.models import McpServer, Snapshot, Transport
from dashboard.tasks import poll as poll_server
from examples.servers.launch import serve_http, stdio_command
from tests.corpus.conftest import CAPTURES, load_capture, oracle_tax
from tests.helpers import compact

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


def _assert_replayed(summary, document: dict) -> None:
    assert summary.outcome == "ok", summary.message
    snapshot = Snapshot.objects.get(pk=summary.snapshot_id)
    # Key order included: the stored text is the capture's tools, not a re-serialisation.
    assert compact(snapshot.tools_raw) == compact(document["tools"])
    assert snapshot.fixed_tax_tokens == oracle_tax(document["tools"])
    assert snapshot.server_version == document["initialize"]["serverInfo"]["version"]
    assert snapshot.instructions == (document["initialize"].get("instructions") or "")
    assert snapshot.analysis_errors == []


# Four captures stand for the corpus over stdio (about 3 s each): what the transport can get wrong
# shows in these; every capture's tools go through record_snapshot in test_corpus.py.
REPRESENTATIVE = {
    "paged": "chrome-devtools@1.11.0",  # the most tools: 32, seven pages of 5
    "quirky key order": "duckduckgo@0.7.0",  # description, inputSchema, then name
    "largest": "notion@2.5.2",  # 132,870 bytes
    "smallest": "postgres@0.6.2",  # 350 bytes
}


def test_the_representatives_are_still_what_they_stand_for():
    documents = {p.stem: load_capture(p) for p in CAPTURES}
    sizes = {p.stem: p.stat().st_size for p in CAPTURES}
    assert max(documents, key=lambda n: len(documents[n]["tools"])) == REPRESENTATIVE["paged"]
    assert list(documents[REPRESENTATIVE["quirky key order"]]["tools"][0])[:3] == [
        "description",
        "inputSchema",
        "name",
    ]
    assert max(sizes, key=sizes.__getitem__) == REPRESENTATIVE["largest"]
    assert min(sizes, key=sizes.__getitem__) == REPRESENTATIVE["smallest"]


@pytest.mark.parametrize("name", REPRESENTATIVE.values(), ids=list(REPRESENTATIVE))
def test_representative_captures_replay_over_stdio_in_pages(team, name):
    path = next(p for p in CAPTURES if p.stem == name)
    command, args, env = stdio_command("replay", str(path), "--page-size", "5")
    server = McpServer.objects.create(
        team=team, name=path.stem[:100], transport=Transport.STDIO, command=command, args=args, env=env
    )
    _assert_replayed(poll_server(server.pk), load_capture(path))


def test_a_capture_replays_over_streamable_http(team):
    path = next(p for p in CAPTURES if p.name.startswith("playwright@"))
    with serve_http("replay", str(path)) as url:
        server = McpServer.objects.create(team=team, name="replay", transport=Transport.HTTP, url=url)
        _assert_replayed(poll_server(server.pk), load_capture(path))
