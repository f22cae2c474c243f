"""The fixed-tax pages: the team overview, a server's page, poll now, registration, stacks.

Figures come from real polls of the example servers (the `polled_example_servers` fixture) or from
tool lists recorded through the real `record_snapshot` path; nothing on the page is faked.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.http import HttpResponse
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from dashboard.alerts.models import Alert
from dashboard.servers.models import McpServer, PollRun, Snapshot, Stack
from dashboard.servers.pending import FIRST_POLL_WAIT, PENDING_POLL_GRACE, pending_token
from dashboard.teams.models import Membership
from tests.dashboard.factories import (
    embedded_figure,
    http_server,
    independent_tool_tokens,
    overview_row,
    page_text,
    record,
    tool,
)
from tests.helpers import wait_until

pytestmark = pytest.mark.django_db


@pytest.mark.slow
def test_overview_shows_real_figures_from_polled_example_servers(alice_client, team, polled_example_servers):
    sprawl, lean = polled_example_servers["files-sprawl"], polled_example_servers["files-lean"]
    response = alice_client.get(reverse("team_overview", args=[team.slug]))
    assert response.status_code == 200
    html = response.content.decode()

    current = sprawl.current_snapshot
    grown_from = Snapshot.objects.get(server=sprawl, server_version="1.4.0")
    row = page_text(overview_row(html, sprawl))
    assert f"{current.fixed_tax_tokens:,}" in row
    growth = current.fixed_tax_tokens - grown_from.fixed_tax_tokens
    assert growth > 0, "the demo's 1.5.0 release must grow the tax"
    assert f"+{growth:,}" in row
    assert f"+{100 * growth / grown_from.fixed_tax_tokens:.1f}%" in row
    assert f"{100 * current.fixed_tax_tokens / team.context_window:.2f}%" in row
    assert f" {current.tool_count} " in row
    assert "no budget" in row
    # The growth links to the release diff of exactly those two snapshots.
    assert f"?a={grown_from.pk}&b={current.pk}" in overview_row(html, sprawl)

    # The lean server went back to its smaller release: a negative change, shown with a minus.
    lean_prev = Snapshot.objects.filter(server=lean, server_version="2.1.0").get()
    shrink = lean.current_snapshot.fixed_tax_tokens - lean_prev.fixed_tax_tokens
    assert shrink < 0 and f"\u2212{-shrink:,}" in page_text(overview_row(html, lean))

    total = sprawl.current_snapshot.fixed_tax_tokens + lean.current_snapshot.fixed_tax_tokens
    # Claude Code with ENABLE_TOOL_SEARCH unset defers: the eager total stands beside the headline.
    assert f"Sending every schema would cost {total:,} tokens per request" in page_text(html)
    team.tool_search = "false"
    team.save()
    html = alice_client.get(reverse("team_overview", args=[team.slug])).content.decode()
    assert f"pays {total:,} tokens per request" in page_text(html)
    assert f"{100 * total / team.context_window:.1f}% of a 200,000-token context window" in page_text(html)
    # Sparklines: one polyline point per snapshot (sprawl has two, lean three).
    points = re.search(r'<polyline points="([^"]+)"', overview_row(html, lean)).group(1).split()
    assert len(points) == 3


def test_overview_sorts_filters_and_reports_budget_status(alice_client, team):
    small, big, _unpolled = (
        http_server(team, "alpha"),
        http_server(team, "beta"),
        http_server(team, "gamma"),
    )
    record(small, [tool("a", "Read a file.")], "1")
    big_snap = record(
        big, [tool(f"t{i}", "Does a thing with a file, verbosely. " * 8) for i in range(6)], "1"
    )
    big_snap.budget_checks = {
        "fixed_tax_tokens": {"limit": 100, "level": "error", "value": 999, "breached": True}
    }
    big_snap.save(update_fields=["budget_checks"])
    small.current_snapshot.budget_checks = {
        "fixed_tax_tokens": {"limit": 5000, "level": "warning", "breached": False}
    }
    small.current_snapshot.save(update_fields=["budget_checks"])
    McpServer.objects.filter(pk__in=[small.pk, big.pk]).update(last_poll_at=timezone.now(), last_outcome="ok")
    url = reverse("team_overview", args=[team.slug])

    def order(**params) -> list[str]:
        html = alice_client.get(url, params).content.decode()
        return re.findall(r'<tr id="server-row-\d+" data-server="([^"]+)"', html)

    assert order() == ["beta", "alpha", "gamma"]  # default: largest tax first, unpolled last
    assert order(sort="name") == ["alpha", "beta", "gamma"]
    assert order(sort="-name") == ["gamma", "beta", "alpha"]
    assert order(sort="tax") == ["gamma", "alpha", "beta"]
    assert order(sort="-budget") == ["beta", "alpha", "gamma"]
    assert order(sort="nonsense") == ["beta", "alpha", "gamma"]
    assert order(status="over_budget") == ["beta"]
    assert order(status="ok") == ["alpha"]
    assert order(status="never") == ["gamma"]

    html = alice_client.get(url, {"status": "over_budget"}).content.decode()
    assert "over budget" in overview_row(html, big)
    # The total stays the team's, whatever the filter shows.
    total = small.current_snapshot.fixed_tax_tokens + big_snap.fixed_tax_tokens
    assert f"Sending every schema would cost {total:,} tokens" in page_text(html)
    # A sorted header links to the reverse order.
    assert (
        'data-sort="name">Server <span class="arrow">▲'
        in alice_client.get(url, {"sort": "name"}).content.decode()
    )
    # htmx asks for the region only.
    partial = alice_client.get(url, {"sort": "name"}, HTTP_HX_REQUEST="true").content.decode()
    assert partial.lstrip().startswith('<div id="servers-region"') and "<html" not in partial


@pytest.mark.slow
def test_server_page_chart_breakdown_findings_and_history(alice_client, team, polled_example_servers):
    sprawl = polled_example_servers["files-sprawl"]
    current = sprawl.current_snapshot
    older = Snapshot.objects.get(server=sprawl, server_version="1.4.0")
    current.budget_checks = {
        "fixed_tax_tokens": {"limit": 4000, "level": "error", "value": 4125, "breached": True}
    }
    current.save(update_fields=["budget_checks"])
    Alert.objects.create(
        team=team,
        rule_key=f"server:{sprawl.pk}:fixed_tax_tokens",
        measure="fixed_tax_tokens",
        level="error",
        server=sprawl,
        subject_label=sprawl.name,
        snapshot=current,
        value=current.fixed_tax_tokens,
        limit=4000,
        message="files-sprawl fixed tax above 4000",
    )
    url = reverse("server_detail", args=[team.slug, sprawl.code])
    response = alice_client.get(url)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-bundle="/static/vendor/plotly.min.js" defer></script>' in html
    assert 'rel="preload"' not in html  # fetched once the page is parsed, never during

    figure = response.context["figure"]
    traces = {t["name"]: t for t in figure["data"]}
    assert traces["Fixed tax"]["y"][:2] == [older.fixed_tax_tokens, current.fixed_tax_tokens]
    releases = traces["Release"]
    assert releases["text"] == ["1.4.0", "1.5.0"]
    diff_url = reverse("snapshot_diff", args=[team.slug, sprawl.code]) + f"?a={older.pk}&b={current.pk}"
    assert releases["customdata"][1][0] == diff_url
    assert traces["Budget (error)"]["y"][0] == 4000
    assert traces["Alert"]["text"] == ["files-sprawl fixed tax above 4000"]
    assert traces["Alert"]["y"] == [current.fixed_tax_tokens]
    # The same figure is in the page for plotly.js.
    embedded = {t["name"]: t for t in embedded_figure(html)["data"]}
    assert embedded["Release"]["text"] == ["1.4.0", "1.5.0"]
    assert figure["data"][-1]["name"] == "Release"  # on top, so it takes the click

    by_release = alice_client.get(
        url, {"axis": "release"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="chart-region"
    )
    fig = embedded_figure(by_release.content.decode())
    assert fig["layout"]["xaxis"]["ticktext"] == ["1.4.0", "1.5.0"]
    assert fig["data"][0]["x"] == [0, 1]
    assert by_release.content.decode().lstrip().startswith('<section class="card" id="chart-region"')

    tools = {t.name: t for t in response.context["tools"]}
    assert len(tools) == current.tool_count
    # Every row's tokens are tiktoken's count of that tool's visible JSON, computed here.
    assert {name: t.tokens for name, t in tools.items()} == independent_tool_tokens(current.tools_raw)
    new_tools = {name for name, t in tools.items() if t.delta is None}
    assert new_tools == {
        "compare_files",
        "compute_file_checksum",
        "get_directory_tree_summary",
        "find_duplicate_files",
    }
    assert tools["read_file"].delta == 0
    assert all(t.description_tokens + t.schema_tokens <= t.tokens for t in tools.values())
    text = page_text(html)
    assert f"Instructions {current.instructions_tokens}" in text

    # Findings name the tool families and the content-without-reference tool, with savings.
    assert "read_file, read_file_chunked and read_file_with_encoding could be one tool" in html
    assert "list_directory and list_directory_recursive could be one tool" in html
    assert "write_file takes bulk content with no reference alternative" in html
    assert re.search(r"saves ~[\d,]+ tokens", html)

    # Tool table sorting, as an htmx region.
    by_name = alice_client.get(url, {"tsort": "name"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="tools-region")
    names = re.findall(r'<tr data-tool="([^"]+)"', by_name.content.decode())
    assert len(names) == current.tool_count and names == sorted(names)
    assert 'id="tools-region"' in by_name.content.decode() and "<html" not in by_name.content.decode()

    # An older snapshot can be opened, with its own findings and breakdown.
    old_page = alice_client.get(url, {"at": older.pk})
    assert old_page.context["snapshot"].pk == older.pk
    assert len(old_page.context["tools"]) == older.tool_count
    assert "15 tools cost" in old_page.content.decode()


@pytest.mark.slow
def test_lean_server_has_no_findings(alice_client, team, polled_example_servers):
    lean = polled_example_servers["files-lean"]
    html = alice_client.get(reverse("server_detail", args=[team.slug, lean.code])).content.decode()
    assert "No findings: nothing here looks bloated." in html
    assert 'class="finding' not in html


def test_negative_overhead_is_shown_as_negative(alice_client, team):
    server = http_server(team, "odd")
    snapshot = record(server, [tool("a", "x")], "1")
    Snapshot.objects.filter(pk=snapshot.pk).update(overhead_tokens=-3)
    html = alice_client.get(reverse("server_detail", args=[team.slug, server.code])).content.decode()
    assert "\u22123" in page_text(html)


def test_server_without_snapshots_has_an_empty_state(alice_client, team):
    server = http_server(team, "fresh")
    response = alice_client.get(reverse("server_detail", args=[team.slug, server.code]))
    assert response.status_code == 200
    assert "No snapshot yet" in response.content.decode()
    diff = alice_client.get(reverse("snapshot_diff", args=[team.slug, server.code]))
    assert diff.status_code == 200 and "no snapshots yet" in diff.content.decode()


def test_poll_history_shows_errors_and_paginates(alice_client, team):
    server = http_server(team, "flaky")
    for n in range(20):
        PollRun.objects.create(server=server, outcome="connect_error", message=f"refused #{n}")
    url = reverse("server_detail", args=[team.slug, server.code])
    html = alice_client.get(url).content.decode()
    assert "refused #19" in html and "refused #0" not in html
    assert "page 1 of 2" in html
    second = alice_client.get(url, {"polls_page": 2}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="polls-region")
    assert "refused #0" in second.content.decode()


@pytest.mark.slow
def test_poll_now_runs_a_real_poll_and_updates_the_overview_row(
    alice_client, team, polled_example_servers, eager_celery, django_capture_on_commit_callbacks
):
    lean = polled_example_servers["files-lean"]
    runs_before = PollRun.objects.filter(server=lean).count()
    url = reverse("poll_now", args=[team.slug, lean.code]) + "?from=overview&sort=name"
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = alice_client.post(url, HTTP_HX_REQUEST="true")
        # The task is enqueued only after commit; until the poll ends the row says so and polls.
        assert response.status_code == 200
        html = response.content.decode()
        assert html.lstrip().startswith('<div id="servers-region"')
        assert "polling…" in overview_row(html, lean) and 'hx-trigger="every 2s"' in html
        refresh = re.search(r'hx-get="([^"]+)" hx-trigger="every 2s"', html).group(1).replace("&amp;", "&")
        assert "pending=" in refresh and "refresh=1" in refresh

    assert len(callbacks) == 1
    # Now the commit: the enqueued poll runs (eagerly) with everything it commits in turn.
    with django_capture_on_commit_callbacks(execute=True):
        callbacks[0]()
    run = PollRun.objects.filter(server=lean).order_by("-pk").first()
    assert PollRun.objects.filter(server=lean).count() == runs_before + 1
    assert run.trigger == "manual" and run.outcome == "ok"
    # The region's next refresh shows the finished poll and tells htmx to stop polling.
    done = alice_client.get(refresh, HTTP_HX_REQUEST="true")
    assert done.status_code == 286
    row = page_text(overview_row(done.content.decode(), lean))
    assert "OK" in row and " s ago" in row and "polling…" not in row
    assert 'hx-trigger="every 2s"' not in done.content.decode()


def test_overview_polls_only_while_a_poll_runs(alice_client, team):
    server = http_server(team, "slow")
    url = reverse("team_overview", args=[team.slug])
    McpServer.objects.filter(pk=server.pk).update(polling_since=timezone.now())
    page = alice_client.get(url).content.decode()
    assert 'hx-trigger="every 2s"' in page and "polling…" in overview_row(page, server)
    running = alice_client.get(url, {"refresh": "1"}, HTTP_HX_REQUEST="true")
    assert running.status_code == 200
    McpServer.objects.filter(pk=server.pk).update(
        polling_since=None, last_poll_at=timezone.now(), last_outcome="ok"
    )
    idle = alice_client.get(url, {"refresh": "1"}, HTTP_HX_REQUEST="true")
    assert idle.status_code == 286  # htmx stops polling, and still swaps in the final rows
    assert "polling…" not in idle.content.decode() and "OK" in overview_row(idle.content.decode(), server)


def test_requested_poll_counts_as_running_until_the_worker_finishes(alice_client, team):
    server = http_server(team, "queued")
    requested = timezone.now()
    token = pending_token(server, requested)
    url = reverse("server_status", args=[team.slug, server.code])
    waiting = alice_client.get(url, {"pending": token}, HTTP_HX_REQUEST="true")
    assert waiting.status_code == 200 and "polling…" in waiting.content.decode()
    McpServer.objects.filter(pk=server.pk).update(
        last_poll_at=requested + timedelta(seconds=2), last_outcome="ok"
    )
    done = alice_client.get(url, {"pending": token}, HTTP_HX_REQUEST="true")
    assert done.status_code == 286
    assert json.loads(done["HX-Trigger"]) == {"pollFinished": {"server": str(server.code)}}
    # A request the worker never picked up stops counting after the grace period.
    stale = pending_token(server, requested - PENDING_POLL_GRACE - timedelta(seconds=5))
    # (An older server: a new one's first poll is awaited on its own, see test_first_poll_refresh.)
    McpServer.objects.filter(pk=server.pk).update(
        last_poll_at=None, created=timezone.now() - FIRST_POLL_WAIT - timedelta(seconds=5)
    )
    assert alice_client.get(url, {"pending": stale}, HTTP_HX_REQUEST="true").status_code == 286


def test_add_edit_and_delete_a_server(alice_client, team, user_factory):
    add = reverse("server_add", args=[team.slug])
    response = alice_client.post(
        add,
        {
            "name": "docs",
            "transport": "http",
            "url": "http://127.0.0.1:9999/mcp",
            "poll_interval_seconds": 900,
            "enabled": "on",
            "headers_text": "Authorization: Bearer s3cret-value",
        },
    )
    server = McpServer.objects.get(team=team, name="docs")
    assert response.status_code == 302 and response["Location"].endswith(f"/servers/{server.code}/")
    assert server.headers == {"Authorization": "Bearer s3cret-value"}
    edit = reverse("server_edit", args=[team.slug, server.code])
    page = alice_client.get(edit).content.decode()
    assert "s3cret-value" not in page  # secrets are write-only
    alice_client.post(
        edit, {"name": "docs2", "transport": "http", "url": server.url, "poll_interval_seconds": 600}
    )
    server.refresh_from_db()
    assert (server.name, server.poll_interval_seconds, server.headers) == (
        "docs2",
        600,
        {"Authorization": "Bearer s3cret-value"},
    )

    # A plain member may not register a stdio server (it runs a command on the worker).
    carol = user_factory("carol")
    Membership.objects.create(team=team, user=carol, role=Membership.Role.MEMBER)
    carol_client = Client()
    carol_client.force_login(carol)
    refused = carol_client.post(
        add, {"name": "sh", "transport": "stdio", "command_line": "python -m x", "poll_interval_seconds": 900}
    )
    assert refused.status_code == 200 and "Only team owners and admins" in refused.content.decode()
    assert not McpServer.objects.filter(name="sh").exists()
    # ... nor edit or delete a server someone else registered.
    assert carol_client.get(edit).status_code == 404

    delete = reverse("server_delete", args=[team.slug, server.code])
    assert "cannot be undone" in alice_client.get(delete).content.decode()
    assert alice_client.post(delete).status_code == 302
    assert not McpServer.objects.filter(pk=server.pk).exists()


@pytest.mark.slow
def test_stacks_import_a_client_config_and_sum_their_tax(alice_client, team, polled_example_servers):
    url = reverse("stacks", args=[team.slug])
    config = {
        "mcpServers": {
            "remote-docs": {
                "type": "http",
                "url": "http://127.0.0.1:9/mcp",
                "headers": {"X-Key": "${DOCS_KEY}"},
            }
        }
    }
    response = alice_client.post(
        url, {"stack_name": "cursor", "config_text": json.dumps(config)}, follow=True
    )
    assert response.status_code == 200
    assert "Stack cursor: 1 servers added" in response.content.decode()
    stack = Stack.objects.get(team=team, name="cursor")
    assert [s.name for s in stack.servers.all()] == ["remote-docs"]

    html = alice_client.get(url).content.decode()
    demo_stack = re.search(r'<tr data-stack="coding-agent">.*?</tr>', html, re.S).group(0)
    total = sum(s.current_snapshot.fixed_tax_tokens for s in polled_example_servers.values())
    assert f"{total:,}" in demo_stack
    assert "not polled" in re.search(r'<tr data-stack="cursor">.*?</tr>', html, re.S).group(0)
    bad = alice_client.post(url, {"stack_name": "x", "config_text": "{not json"})
    assert "not valid JSON or JSONC" in bad.content.decode()


@pytest.mark.slow
def test_pages_reference_no_other_origin(alice_client, team, polled_example_servers):
    sprawl = polled_example_servers["files-sprawl"]
    for url in (
        reverse("team_overview", args=[team.slug]),
        reverse("server_detail", args=[team.slug, sprawl.code]),
        reverse("snapshot_diff", args=[team.slug, sprawl.code]),
        reverse("stacks", args=[team.slug]),
    ):
        html = alice_client.get(url).content.decode()
        assert not re.search(r'(src|href)="(https?:)?//', html), url


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_poll_now_through_a_real_worker_updates_the_row(
    postgres_and_redis, celery_worker_process, alice_client, team, alice
):
    from dashboard.demo import ensure_example_servers

    lean = next(s for s in ensure_example_servers(team, owner=alice) if s.name == "files-lean")
    url = reverse("poll_now", args=[team.slug, lean.code]) + "?from=overview"
    html = alice_client.post(url, HTTP_HX_REQUEST="true").content.decode()
    refresh = re.search(r'hx-get="([^"]+)" hx-trigger="every 2s"', html).group(1).replace("&amp;", "&")

    def finished() -> HttpResponse | None:
        response = alice_client.get(refresh, HTTP_HX_REQUEST="true")
        if response.status_code == 286:  # htmx: stop polling, the region is final
            return response
        assert response.status_code == 200 and "polling…" in overview_row(response.content.decode(), lean)
        return None

    response = wait_until(finished, timeout=90, interval=0.5, message="the worker to finish the poll")
    lean.refresh_from_db()
    run = lean.poll_runs.get()
    assert (run.trigger, run.outcome) == ("manual", "ok")
    row = page_text(overview_row(response.content.decode(), lean))
    assert f"{lean.current_snapshot.fixed_tax_tokens:,}" in row and "OK" in row


def test_overview_says_when_no_worker_is_running(alice_client, team):
    from datetime import timedelta

    from django.utils import timezone

    from dashboard.system.models import WorkerHeartbeat

    url = reverse("team_overview", args=[team.slug])
    assert b"No Celery worker has checked in yet" in alice_client.get(url).content
    beat = WorkerHeartbeat.beat("worker-1", ["poll", "ingest", "notify", "celery"])
    assert b"worker-banner" not in alice_client.get(url).content
    WorkerHeartbeat.objects.filter(pk=beat.pk).update(last_seen=timezone.now() - timedelta(minutes=10))
    page = alice_client.get(url).content.decode()
    assert "No worker is running" in page and "10\xa0minutes ago" in page


def test_fidelity_regions_load_from_their_own_urls_and_history_restore_gets_the_page(alice_client, team):
    server = http_server(team, "loaded")
    record(server, [tool("a", "Read a file.")], "1")
    overview_url = reverse("team_overview", args=[team.slug])
    html = alice_client.get(overview_url).content.decode()
    assert f'hx-get="{reverse("fidelity_overview_panel", args=[team.slug])}" hx-trigger="load"' in html
    page = alice_client.get(reverse("server_detail", args=[team.slug, server.code])).content.decode()
    assert (
        f'hx-get="{reverse("fidelity_unused_tools", args=[team.slug, server.code])}" hx-trigger="load"'
        in page
    )

    # htmx restoring history after a cache miss asks for the pushed URL: it must get the whole page.
    restore = alice_client.get(overview_url, HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true")
    assert "<html" in restore.content.decode() and "HX-Request" in restore["Vary"]
    region = alice_client.get(overview_url, HTTP_HX_REQUEST="true")
    assert "<html" not in region.content.decode() and "HX-Request" in region["Vary"]
