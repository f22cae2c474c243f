"""The diff page's snapshot pickers, built in Python in one pass, give the markup the template loop
gave: every snapshot newest first, its label, time (in the current time zone) and tax, the chosen
one selected; and the server chart's points, whose links are built from one reversed URL, still
link to their snapshots."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.template import Context, Template
from django.urls import reverse
from django.utils import timezone

from dashboard.servers import selectors
from dashboard.servers.diff import snapshot_options
from tests.dashboard.factories import embedded_figure, http_server, record, tool

pytestmark = pytest.mark.django_db

# What templates/servers/diff.html rendered per picker before.
LOOP = Template(
    '{% load taxfmt %}{% for p in history %}<option value="{{ p.pk }}" {% if a and p.pk == a.pk %}selected'
    '{% endif %}>{{ p.label }} · {{ p.first_seen|date:"Y-m-d H:i" }} · {{ p.tokens|tokens }} tokens</option>'
    "{% endfor %}"
)


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata"])
def test_options_match_the_template_loop(team, settings, zone):
    settings.TIME_ZONE = zone
    server = http_server(team, "files")
    start = timezone.now() - timedelta(days=30)
    for k in range(12):
        tools = [tool(f"t{j}", "Does <things> & more. " * (k + 1)) for j in range(1 + k % 3)]
        record(server, tools, f"1.{k}" if k % 4 else "", when=start + timedelta(hours=7 * k))
    history = list(reversed(selectors.snapshot_history(server)))
    chosen = history[3]
    timezone.activate(zone)
    try:
        expected = LOOP.render(Context({"history": history, "a": chosen}))
        assert str(snapshot_options(history, chosen.pk)) == expected
        assert str(snapshot_options(history, None)) == LOOP.render(Context({"history": history, "a": None}))
    finally:
        timezone.deactivate()
    assert expected.count("<option") == 12 and expected.count(" selected>") == 1


def test_diff_page_selects_the_two_snapshots(alice_client, team):
    server = http_server(team, "files")
    first = record(server, [tool("a", "A.")], "1.0", when=timezone.now() - timedelta(days=2))
    record(server, [tool("a", "A."), tool("b", "B.")], "1.1", when=timezone.now() - timedelta(days=1))
    last = record(server, [tool("b", "B.")], "1.2")
    html = alice_client.get(reverse("snapshot_diff", args=[team.slug, server.code]), {"a": first.pk}).content
    html = html.decode()
    a_select = html[html.index('id="diff-a"') : html.index("</select>", html.index('id="diff-a"'))]
    b_select = html[html.index('id="diff-b"') : html.index("</select>", html.index('id="diff-b"'))]
    assert f'<option value="{first.pk}" selected>' in a_select
    assert f'<option value="{last.pk}" selected>' in b_select
    assert a_select.count("<option") == b_select.count("<option") == 3


def test_server_chart_points_link_to_their_snapshots(alice_client, team):
    server = http_server(team, "files")
    snaps = [
        record(server, [tool("a", "A. " * (k + 1))], f"1.{k}", when=timezone.now() - timedelta(days=5 - k))
        for k in range(4)
    ]
    html = alice_client.get(reverse("server_detail", args=[team.slug, server.code])).content.decode()
    tax = embedded_figure(html)["data"][0]
    page = reverse("server_detail", args=[team.slug, server.code])
    links = [c[2] for c in tax["customdata"]]
    assert links[: len(snaps)] == [f"{page}?at={s.pk}" for s in snaps]
