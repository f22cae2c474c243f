"""The agents list and an agent family's page (figures, chart, call list), on real traffic: the
scripted agent of ``traffic.py`` captured by the real proxy and ingested through the real pipeline
(verdicts and rollups by the fidelity engine); and their query counts on seeded volume.
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from ingest.capture.models import Agent, BulkArgument, ToolCall
from ingest.fidelity.models import FidelityDaily
from ingest.fidelity.selectors.calls import rare_verdict_keys
from tests.ingest.fidelity.traffic import LABEL, PASTES, pasted_argument

pytestmark = [pytest.mark.timeout(300)]


def test_the_captured_traffic_has_the_scripted_verdicts(fidelity_team):
    # The premise of every page test below: the engine judged the real capture as scripted.
    for verdict in PASTES:
        assert pasted_argument(fidelity_team, verdict).verdict == verdict
    assert ToolCall.objects.filter(team=fidelity_team, is_reference_call=True).count() == 1
    assert set(Agent.objects.filter(team=fidelity_team).values_list("family", "version")) == {
        ("claude-code", "2.0.14"),
        ("claude-code", "2.0.15"),
    }


def test_agents_list_shows_rates_calls_adoption_and_cost(alice_client, fidelity_team):
    team = fidelity_team
    response = alice_client.get(reverse("fidelity_agents", args=[team.slug]))
    assert response.status_code == 200
    html = response.content.decode()
    old, new = (Agent.objects.get(team=team, version=v) for v in ("2.0.14", "2.0.15"))
    # One row per client, its versions under it.
    (group,) = response.context["page"]
    rows = {r.agent.pk: r for r in group.versions}
    assert group.agent == new  # the latest version stands for the client
    assert group.tally.bulk_calls == 2 + 4 and group.tally.judged == 2 + 3 and group.tally.exact == 1
    assert html.count('data-group="claude-code') == 1
    assert "{#" not in html and "One row of the agents list" not in html  # no template text leaks
    # 2.0.14: exact + newline_only judged, 1 exact -> 50 %; one reference call of three calls to write.
    assert rows[old.pk].tally.exact_rate == 50.0
    assert rows[old.pk].tally.bulk_calls == 2
    assert rows[old.pk].tally.reference_calls == 1
    assert rows[old.pk].tally.adoption == pytest.approx(100 / 3, abs=0.01)
    # 2.0.15: line_endings, truncated, mutated judged (unverifiable is not): 0 exact of 3.
    assert rows[new.pk].tally.exact_rate == 0.0
    assert rows[new.pk].tally.judged == 3
    assert rows[new.pk].tally.bulk_calls == 4
    assert rows[new.pk].tally.adoption == 0.0
    # Money: the seeded claude-code price (15 USD per million output tokens) over the pasted tokens.
    pasted = sum(BulkArgument.objects.filter(team=team, call__agent=new).values_list("tokens", flat=True))
    assert rows[new.pk].tally.billed_tokens == pasted
    assert rows[new.pk].tally.cost_usd == pytest.approx(Decimal(pasted) * Decimal(15) / Decimal(1_000_000))
    assert f'id="agent-{old.pk}"' in html and "50.0%" in html and "0.0%" in html
    assert reverse("fidelity_agent", args=[team.slug, "claude-code"]) in html


def test_agents_list_sorts_and_answers_htmx_with_the_region(alice_client, fidelity_team):
    url = reverse("fidelity_agents", args=[fidelity_team.slug])
    response = alice_client.get(url, {"sort": "rate"})
    versions = [r.agent.version for g in response.context["page"] for r in g.versions]
    assert versions == ["2.0.15", "2.0.14"]  # 0 % before 50 %, inside the client's row
    response = alice_client.get(url, {"sort": "-rate"}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert re.findall(r'data-agent="claude-code ([\d.]+)"', body) == ["2.0.14", "2.0.15"]
    assert body.lstrip().startswith('<div id="agents-region"') and "<html" not in body


def test_agent_page_breakdowns_chart_and_call_list(alice_client, fidelity_team):
    team = fidelity_team
    url = reverse("fidelity_agent", args=[team.slug, "claude-code"])
    response = alice_client.get(url)
    assert response.status_code == 200
    report = response.context["report"]
    assert report.total.by_verdict == {
        "exact": 1,
        "newline_only": 1,
        "line_endings": 1,
        "truncated": 1,
        "mutated": 1,
        "unverifiable": 1,
        "by_reference": 1,
    }
    assert report.total.exact_rate == 20.0
    # By tool: everything went to files-lean/write.
    assert [(s, t, tally.calls) for s, t, tally in report.by_tool] == [(LABEL, "write", 7)]
    # By size: the truncated copy is under 10 KB, like the others; the buckets are all five, in order.
    buckets = {b: tally.arguments for b, _, tally in report.by_size}
    assert list(buckets) == ["lt1k", "1-10k", "10-50k", "50-100k", "gt100k"]
    assert buckets["1-10k"] == 6 and sum(buckets.values()) == 6
    # The chart: one line per version, rate in percent.
    figure = response.context["figure"]
    names = [trace["name"] for trace in figure["data"]]
    assert names == ["2.0.14", "2.0.15"]
    assert figure["data"][0]["y"] == [50.0] and figure["data"][1]["y"] == [0.0]
    html = response.content.decode()
    assert 'id="rate-chart"' in html and "vendor/plotly.min.js" in html
    # Call list: all 7 calls, newest first; filter by verdict.
    assert len(response.context["calls_page"]) == 7 and not response.context["calls_page"].has_next
    assert 'id="calls-total">7<' in html
    response = alice_client.get(
        url, {"verdict": "truncated"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="calls-region"
    )
    body = response.content.decode()
    assert re.findall(r'data-call="(\d+)"', body) == [str(pasted_argument(team, "truncated").call_id)]
    assert body.lstrip().startswith('<section class="card flush" id="calls-region"')
    response = alice_client.get(url, {"verdict": "by_reference"})
    assert [r.call.is_reference_call for r in response.context["calls_page"]] == [True]
    old = Agent.objects.get(team=team, version="2.0.14")
    response = alice_client.get(url, {"agent": old.pk})
    assert len(response.context["calls_page"]) == 3


def test_agent_page_period_excludes_old_rollups(alice_client, fidelity_team):
    # Move everything 40 days back: the 30-day view is empty, the 90-day view has it all.
    FidelityDaily.objects.filter(team=fidelity_team).update(
        day=FidelityDaily.objects.first().day - timedelta(days=40)
    )
    url = reverse("fidelity_agent", args=[fidelity_team.slug, "claude-code"])
    assert alice_client.get(url).context["report"].total.calls == 0
    assert alice_client.get(url, {"days": 90}).context["report"].total.calls == 7


def test_empty_states(alice_client, team):
    html = alice_client.get(reverse("fidelity_agents", args=[team.slug])).content.decode()
    assert "No agents yet" in html
    html = alice_client.get(reverse("fidelity_references", args=[team.slug])).content.decode()
    assert "No reference documents yet" in html
    assert alice_client.get(reverse("fidelity_agent", args=[team.slug, "nobody"])).status_code == 404


def _seed_rollups(team, agents: int, days: int) -> None:
    """Rollup rows and calls for ``agents`` agents (the query-count test needs volume, not realism)."""
    today = timezone.now().date()
    for n in range(agents):
        agent = Agent.objects.create(team=team, family=f"fam{n % 3}", name=f"fam{n % 3}", version=f"1.{n}")
        rows = []
        for d in range(days):
            for verdict in ("exact", "truncated", "by_reference"):
                rows.append(
                    FidelityDaily(
                        team=team,
                        day=today - timedelta(days=d),
                        agent=agent,
                        server_label="files",
                        tool="write",
                        verdict=verdict,
                        size_bucket="" if verdict == "by_reference" else "1-10k",
                        calls=3,
                        arguments=0 if verdict == "by_reference" else 3,
                        pasted_tokens=100,
                        billed_tokens=100,
                    )
                )
        FidelityDaily.objects.bulk_create(rows)
        ToolCall.objects.bulk_create(
            [
                ToolCall(
                    team=team,
                    dedupe_key=f"{n}-{i}",
                    source_format="envelope",
                    agent=agent,
                    tool="write",
                    server_label="files",
                    argument_sha256="0" * 64,
                    request_ts=timezone.now() - timedelta(minutes=i * 7 + n),
                )
                for i in range(30)
            ]
        )


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_query_counts_do_not_grow_with_agents_or_days(alice_client, team, team_factory, alice):
    small = team
    large = team_factory("Large", alice)
    _seed_rollups(small, agents=2, days=2)
    _seed_rollups(large, agents=12, days=20)
    pages = [
        ("fidelity_agents", []),
        ("fidelity_agent", ["fam1"]),
        ("fidelity_overview_panel", []),
        ("team_overview", []),
    ]
    for name, args in pages:
        a = _queries(alice_client, reverse(name, args=[small.slug, *args]))
        b = _queries(alice_client, reverse(name, args=[large.slug, *args]))
        assert a == b, (name, a, b)
    call = ToolCall.objects.filter(team=large).first()
    assert _queries(alice_client, reverse("fidelity_call", args=[large.slug, call.pk])) < 15


def test_call_list_pages_newest_first_across_versions(alice_client, team):
    _seed_rollups(team, agents=6, days=1)  # fam1 has two versions with 30 calls each
    url = reverse("fidelity_agent", args=[team.slug, "fam1"])
    seen = []
    for number in (1, 2, 3):
        page = alice_client.get(url, {"page": number}).context["calls_page"]
        seen += [(r.call.request_ts, r.call.pk) for r in page]
        assert page.has_next == (number < 3)
    assert len(seen) == 60 == len(set(seen))
    assert seen == sorted(seen, reverse=True)


def test_rare_verdict_lookup_finds_the_same_calls_as_the_walk(alice_client, fidelity_team):
    team = fidelity_team
    ids = list(Agent.objects.filter(team=team).values_list("pk", flat=True))
    url = reverse("fidelity_agent", args=[team.slug, "claude-code"])
    for verdict in PASTES:
        walked = [r.call.pk for r in alice_client.get(url, {"verdict": verdict}).context["calls_page"]]
        keys = rare_verdict_keys(team, ids, verdict, None, None, 0, 26)
        assert [pk for _, pk in keys] == walked == [pasted_argument(team, verdict).call_id], verdict
