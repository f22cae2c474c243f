"""Fidelity pages: agents list, an agent family's page, the call drill-down, reference documents,
the price table, the overview panel, "paid but unused" on the server page, and GET /api/v1/fidelity.

The traffic is real: once per test session a real SDK client (two versions of one agent) pastes a
known document through the logging proxy into the lean example server; each test ingests that log
into its own team through the real pipeline (verdicts and rollups by the fidelity engine).
"""

from __future__ import annotations

import hashlib
import re
import sys
from decimal import Decimal
from pathlib import Path

import anyio
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from mcp import Client, StdioServerParameters
from mcp_types import Implementation

from ingest.capture import pipeline
from ingest.capture.models import Agent, BulkArgument, ToolCall
from ingest.fidelity import references
from ingest.fidelity.models import FidelityDaily, ModelPrice, ReferenceDocument
from tests.conftest import ROOT

pytestmark = [pytest.mark.timeout(300)]

PY = sys.executable
LABEL = "files-lean"


def _doc() -> str:
    lines = ["# Deploy runbook (café edition)", ""]
    lines += [
        f"step {i}: check part {i}, read the log, fix the cause, then run it again." for i in range(1, 50)
    ]
    return "\n".join(lines) + "\n"


DOC = _doc()
DOC_SHA = hashlib.sha256(DOC.encode()).hexdigest()
TRUNCATED = DOC[:1500]
EDIT_AT = DOC.index("step 7:")
EDITED = DOC[:EDIT_AT] + "step seven:" + DOC[EDIT_AT + len("step 7:") :]
UNRELATED = "notes nobody registered, typed from memory\n" * 40

# (client version, [(arguments, _meta)]) in the order the agent sends them.
SCRIPT: list[tuple[str, list[tuple[dict, dict | None]]]] = [
    (
        "2.0.14",
        [
            ({"target": "exact.md", "content": DOC, "expected_sha256": DOC_SHA}, None),  # exact
            ({"target": "nl.md", "content": DOC.rstrip("\n")}, {"sha256": DOC_SHA}),  # newline_only
            ({"target": "ref.md", "path": "exact.md"}, None),  # by_reference
        ],
    ),
    (
        "2.0.15",
        [
            (
                {"target": "crlf.md", "content": DOC.replace("\n", "\r\n")},
                {"sha256": DOC_SHA},
            ),  # line_endings
            ({"target": "cut.md", "content": TRUNCATED}, {"sha256": DOC_SHA}),  # truncated
            ({"target": "edit.md", "content": EDITED, "expected_sha256": DOC_SHA}, None),  # mutated, isError
            ({"target": "other.md", "content": UNRELATED}, None),  # unverifiable
        ],
    ),
]


def _through_proxy(log: Path, root: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=PY,
        args=["-m", "mcptax.proxy", "--server-label", LABEL, "--log", str(log), "--"]
        + [PY, "-m", "examples.servers.lean", "--transport", "stdio", "--root", str(root)],
        env={"PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )


async def _drive(log: Path, root: Path) -> list[bool]:
    errors = []
    for version, calls in SCRIPT:
        info = Implementation(name="claude-code", version=version)
        with anyio.fail_after(120):
            async with Client(_through_proxy(log, root), client_info=info) as client:
                await client.list_tools()
                for arguments, meta in calls:
                    result = await client.call_tool("write", arguments, meta=meta)
                    errors.append(result.is_error)
    return errors


def capture_log(directory: Path) -> Path:
    """Run the scripted agent through the real proxy into the lean server; return the envelope log."""
    root = directory / "root"
    root.mkdir()
    log = directory / "capture.jsonl"
    errors = anyio.run(_drive, log, root)
    # The lean server refused exactly the edited copy (expected_sha256 mismatch).
    assert errors == [False, False, False, False, False, True, False]
    return log


@pytest.fixture(scope="session")
def captured_log(tmp_path_factory) -> Path:
    """The envelope log of the scripted agent, captured once per session by the real proxy."""
    return capture_log(tmp_path_factory.mktemp("fidelity-capture"))


@pytest.fixture
def fidelity_team(team, captured_log):
    """``team`` with the reference document registered and the captured log ingested."""
    references.register_upload(team, DOC.encode(), name="runbook.md")
    job = pipeline.ingest_path(team, captured_log)
    assert job.status == "done", job.error
    return team


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


PASTES = {
    "exact": DOC,
    "newline_only": DOC.rstrip("\n"),
    "line_endings": DOC.replace("\n", "\r\n"),
    "truncated": TRUNCATED,
    "mutated": EDITED,
    "unverifiable": UNRELATED,
}


def _arg(team, verdict: str) -> BulkArgument:
    """The bulk argument that pasted the content scripted for ``verdict``."""
    return BulkArgument.objects.select_related("call").get(team=team, sha256=sha(PASTES[verdict]))


def test_the_captured_traffic_has_the_scripted_verdicts(fidelity_team):
    # The premise of every page test below: the engine judged the real capture as scripted.
    for verdict in PASTES:
        assert _arg(fidelity_team, verdict).verdict == verdict
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
    rows = {a.pk: r for r in response.context["page"] for a in [r.agent]}
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
    versions = [r.agent.version for r in response.context["page"]]
    assert versions == ["2.0.15", "2.0.14"]  # 0 % before 50 %
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
    assert re.findall(r'data-call="(\d+)"', body) == [str(_arg(team, "truncated").call_id)]
    assert body.lstrip().startswith('<section class="card flush" id="calls-region"')
    response = alice_client.get(url, {"verdict": "by_reference"})
    assert [c.is_reference_call for c in response.context["calls_page"]] == [True]
    old = Agent.objects.get(team=team, version="2.0.14")
    response = alice_client.get(url, {"agent": old.pk})
    assert len(response.context["calls_page"]) == 3


def test_agent_page_period_excludes_old_rollups(alice_client, fidelity_team):
    from datetime import timedelta

    # Move everything 40 days back: the 30-day view is empty, the 90-day view has it all.
    FidelityDaily.objects.filter(team=fidelity_team).update(
        day=FidelityDaily.objects.first().day - timedelta(days=40)
    )
    url = reverse("fidelity_agent", args=[fidelity_team.slug, "claude-code"])
    assert alice_client.get(url).context["report"].total.calls == 0
    assert alice_client.get(url, {"days": 90}).context["report"].total.calls == 7


def test_call_drill_down_shows_evidence_and_diff_context(alice_client, fidelity_team):
    team = fidelity_team
    # Dropped final newline: the expected side goes on with "↵" where the arrived text ends.
    arg = _arg(team, "newline_only")
    response = alice_client.get(reverse("fidelity_call", args=[team.slug, arg.call_id]))
    assert response.status_code == 200
    row = response.context["rows"][0]
    diff = row["diff"]
    assert diff["offset"] == len(DOC.rstrip("\n").encode())
    assert diff["arrived"]["at_end"] is True and diff["expected"]["after"] == "↵\n"
    html = response.content.decode()
    assert "end of text" in html and "the caller's hash in <code>_meta</code>" in html

    # Truncation: kept and expected bytes, and the point where the copy stops.
    arg = _arg(team, "truncated")
    response = alice_client.get(reverse("fidelity_call", args=[team.slug, arg.call_id]))
    html = response.content.decode()
    assert f"{len(TRUNCATED.encode()):,} of {len(DOC.encode()):,} bytes" in html
    assert response.context["rows"][0]["diff"]["arrived"]["at_end"] is True

    # The edited copy the server refused: isError, the caller's expected_sha256, first difference.
    arg = _arg(team, "mutated")
    response = alice_client.get(reverse("fidelity_call", args=[team.slug, arg.call_id]))
    html = response.content.decode()
    assert 'id="server-answer">server answered isError' in html
    assert "the caller's <code>expected_sha256</code> in the arguments" in html
    diff = response.context["rows"][0]["diff"]
    assert diff["offset"] == len(DOC[: EDIT_AT + len("step ")].encode())
    assert diff["arrived"]["after"].startswith("seven:") and diff["expected"]["after"].startswith("7:")

    # CRLF copy: the carriage returns are made visible.
    arg = _arg(team, "line_endings")
    response = alice_client.get(reverse("fidelity_call", args=[team.slug, arg.call_id]))
    assert "␍↵" in response.context["rows"][0]["diff"]["arrived"]["after"]
    assert "␍↵" in response.content.decode()

    # An exact copy whose server reported the sha256 it wrote: shown as agreeing.
    arg = _arg(team, "exact")
    response = alice_client.get(reverse("fidelity_call", args=[team.slug, arg.call_id]))
    assert response.context["rows"][0]["diff"] is None
    assert "agrees with the capture" in response.content.decode()


def test_a_big_team_re_judges_a_new_reference_on_the_worker(
    alice_client, fidelity_team, monkeypatch, django_capture_on_commit_callbacks
):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from ingest.fidelity import views as views_fidelity

    monkeypatch.setattr(views_fidelity, "INLINE_REJUDGE_MAX_CONTENTS", 0)
    team = fidelity_team
    url = reverse("fidelity_references", args=[team.slug])
    upload = SimpleUploadedFile("notes.txt", UNRELATED.encode(), content_type="text/plain")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = alice_client.post(url, {"action": "upload", "file": upload, "name": ""}, follow=True)
    assert "being recomputed by a worker" in response.content.decode()
    assert _arg(team, "unverifiable").verdict == "unverifiable"  # not yet: the request did not wait
    assert len(callbacks) == 1
    from ingest.fidelity.verdicts import rejudge_document_task

    document = ReferenceDocument.objects.get(team=team, name="notes.txt")
    rejudge_document_task.run(document.pk)  # what the worker runs
    assert _arg(team, "unverifiable").verdict == "exact"


def test_reference_documents_page_lists_matches_and_registers(alice_client, fidelity_team, settings):
    team = fidelity_team
    url = reverse("fidelity_references", args=[team.slug])
    response = alice_client.get(url)
    doc = response.context["page"][0]
    # Every paste but the unrelated one expected the runbook (the reference call has no argument).
    assert doc.name == "runbook.md" and doc.pastes == 5 and doc.exact_pastes == 1
    assert DOC_SHA in response.content.decode()

    # An upload: registered, with its figures, and the page says so.
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("notes.txt", UNRELATED.encode(), content_type="text/plain")
    response = alice_client.post(url, {"action": "upload", "file": upload, "name": ""}, follow=True)
    assert "Registered notes.txt" in response.content.decode()
    created = ReferenceDocument.objects.get(team=team, name="notes.txt")
    assert created.sha256 == sha(UNRELATED) and created.lines == 40
    # ...and the unrelated paste is now judged against it.
    assert _arg(team, "unverifiable").verdict == "exact"

    # A refused URL: loopback is not allowed, and the refusal is shown, nothing stored.
    settings.REFERENCE_ALLOWED_HOSTS = ["127.0.0.1"]
    response = alice_client.post(url, {"action": "url", "url": "http://127.0.0.1:9/x.md", "name": ""})
    assert response.status_code == 400
    assert "Refused:" in response.content.decode()
    assert ReferenceDocument.objects.filter(team=team).count() == 2
    # A host off the list is refused too.
    response = alice_client.post(url, {"action": "url", "url": "https://example.com/a.md"})
    assert response.status_code == 400 and "Refused:" in response.content.decode()


def test_price_table_edits_reprice_the_figures(alice_client, fidelity_team, user_factory):
    from dashboard.teams.models import Membership

    team = fidelity_team
    url = reverse("fidelity_prices", args=[team.slug])
    new = Agent.objects.get(team=team, version="2.0.15")
    before = alice_client.get(reverse("fidelity_agents", args=[team.slug]))
    cost_before = {r.agent.pk: r.tally.cost_usd for r in before.context["page"]}[new.pk]
    assert cost_before > 0

    # Override the global claude-code price for the team, then double it.
    global_price = ModelPrice.objects.get(team=None, model="claude-sonnet-4", agent_family="claude-code")
    response = alice_client.post(reverse("fidelity_price_override", args=[team.slug, global_price.pk]))
    own = ModelPrice.objects.get(team=team, agent_family="claude-code")
    assert response.status_code == 302 and response.url == reverse(
        "fidelity_price_edit", args=[team.slug, own.pk]
    )
    data = {
        "model": own.model,
        "agent_family": "claude-code",
        "input_usd_per_mtok": "3",
        "output_usd_per_mtok": "30",
        "note": "contract",
    }
    response = alice_client.post(reverse("fidelity_price_edit", args=[team.slug, own.pk]), data)
    assert response.status_code == 302
    after = alice_client.get(reverse("fidelity_agents", args=[team.slug]))
    cost_after = {r.agent.pk: r.tally.cost_usd for r in after.context["page"]}[new.pk]
    assert cost_after == pytest.approx(cost_before * 2)

    # Validation: a negative price is refused with a message.
    data["output_usd_per_mtok"] = "-1"
    response = alice_client.post(reverse("fidelity_price_edit", args=[team.slug, own.pk]), data)
    assert response.status_code == 400 and "cannot be negative" in response.content.decode()

    # A plain member sees the table but cannot edit it.
    bob = user_factory("bob")
    Membership.objects.create(team=team, user=bob, role=Membership.Role.MEMBER)
    alice_client.force_login(bob)
    assert alice_client.get(url).status_code == 200
    assert alice_client.post(url, data).status_code == 404
    assert alice_client.get(reverse("fidelity_price_edit", args=[team.slug, own.pk])).status_code == 404


def test_overview_panel_shows_agents_and_open_fidelity_alerts(alice_client, fidelity_team):
    from dashboard.alerts.models import Alert, Level, Measure

    team = fidelity_team
    Alert.objects.create(
        team=team,
        rule_key="agent:1:agent_exact_rate",
        measure=Measure.AGENT_EXACT_RATE,
        level=Level.ERROR,
        subject_label="claude-code 2.0.15",
        value=0,
        limit=95,
        message="claude-code 2.0.15: exact-match rate 0.0% over the last 3 bulk calls, under 95.0%.",
    )
    response = alice_client.get(reverse("team_overview", args=[team.slug]))
    html = response.content.decode()
    assert 'id="fidelity-panel"' in html
    panel = response.context["fidelity"]
    assert [(r.agent.version, r.tally.exact_rate) for r in panel.rows] == [("2.0.15", 0.0), ("2.0.14", 50.0)]
    assert "exact-match rate 0.0% over the last 3 bulk calls" in html


def test_server_page_lists_paid_but_unused_tools(alice_client, team, polled_example_servers, captured_log):
    lean = polled_example_servers["files-lean"]
    pipeline.ingest_path(team, captured_log)
    response = alice_client.get(reverse("server_detail", args=[team.slug, lean.code]))
    unused = response.context["unused_tools"]
    names = [t["name"] for t in unused]
    assert "write" not in names  # called in the capture
    assert names and set(names) < {t.name for t in lean.current_snapshot.tools.all()}
    html = response.content.decode()
    assert 'id="unused-tools"' in html and "Paid but unused" in html
    tax = lean.current_snapshot.fixed_tax_tokens
    first = unused[0]
    assert f"{100 * first['tokens'] / tax:.1f}%" in html


def test_api_fidelity_summary(client, fidelity_team, team_token):
    _, plaintext = team_token
    response = client.get("/api/v1/fidelity", HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 200
    body = response.json()
    by_version = {a["version"]: a for a in body["agents"]}
    assert body["days"] == 30
    assert by_version["2.0.14"]["exact_rate"] == 50.0 and by_version["2.0.14"]["reference_calls"] == 1
    assert by_version["2.0.15"]["verdicts"] == {
        "line_endings": 1,
        "truncated": 1,
        "mutated": 1,
        "unverifiable": 1,
    }
    assert client.get("/api/v1/fidelity?days=3", HTTP_AUTHORIZATION=f"Bearer {plaintext}").status_code == 400
    assert client.get("/api/v1/fidelity").status_code == 401
    assert "/api/v1/fidelity" in client.get("/api/v1/openapi.json").json()["paths"]


def test_another_teams_fidelity_objects_are_not_found(client, fidelity_team, user_factory, team_factory):
    team = fidelity_team
    mallory = user_factory("mallory")
    team_factory("Other", mallory)
    client.force_login(mallory)
    call = ToolCall.objects.filter(team=team).first()
    doc = ReferenceDocument.objects.get(team=team)
    own_price = ModelPrice.objects.create(
        team=team, model="m", input_usd_per_mtok=1, output_usd_per_mtok=1, agent_family="x"
    )
    urls = [
        reverse("fidelity_agents", args=[team.slug]),
        reverse("fidelity_agent", args=[team.slug, "claude-code"]),
        reverse("fidelity_call", args=[team.slug, call.pk]),
        reverse("fidelity_references", args=[team.slug]),
        reverse("fidelity_prices", args=[team.slug]),
        reverse("fidelity_price_edit", args=[team.slug, own_price.pk]),
    ]
    for url in urls:
        assert client.get(url).status_code == 404, url
    other = team_factory("Mine", mallory)
    # Through their own team's URLs, another team's call, agent and document are still 404.
    assert client.get(reverse("fidelity_call", args=[other.slug, call.pk])).status_code == 404
    assert client.get(reverse("fidelity_agent", args=[other.slug, "claude-code"])).status_code == 404
    assert client.post(reverse("fidelity_reference_delete", args=[other.slug, doc.code])).status_code == 404
    assert client.post(reverse("fidelity_price_delete", args=[other.slug, own_price.pk])).status_code == 404


def test_pages_need_login(client, team):
    for name, args in [("fidelity_agents", []), ("fidelity_references", []), ("fidelity_prices", [])]:
        response = client.get(reverse(name, args=[team.slug, *args]))
        assert response.status_code == 302 and "/login/" in response.url


def test_empty_states(alice_client, team):
    html = alice_client.get(reverse("fidelity_agents", args=[team.slug])).content.decode()
    assert "No agents yet" in html
    html = alice_client.get(reverse("fidelity_references", args=[team.slug])).content.decode()
    assert "No reference documents yet" in html
    html = alice_client.get(reverse("team_overview", args=[team.slug])).content.decode()
    assert "No captured agent traffic" in html
    assert alice_client.get(reverse("fidelity_agent", args=[team.slug, "nobody"])).status_code == 404


def _seed_rollups(team, agents: int, days: int) -> None:
    """Rollup rows and calls for ``agents`` agents (the query-count test needs volume, not realism)."""
    from datetime import timedelta

    from django.utils import timezone

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
    for name, args in [("fidelity_agents", []), ("fidelity_agent", ["fam1"]), ("team_overview", [])]:
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
        seen += [(c.request_ts, c.pk) for c in page]
        assert page.has_next == (number < 3)
    assert len(seen) == 60 == len(set(seen))
    assert seen == sorted(seen, reverse=True)


def test_rare_verdict_lookup_finds_the_same_calls_as_the_walk(alice_client, fidelity_team):
    from ingest.fidelity import views as views_fidelity

    team = fidelity_team
    ids = list(Agent.objects.filter(team=team).values_list("pk", flat=True))
    url = reverse("fidelity_agent", args=[team.slug, "claude-code"])
    for verdict in PASTES:
        walked = [c.pk for c in alice_client.get(url, {"verdict": verdict}).context["calls_page"]]
        keys = views_fidelity._rare_verdict_keys(team, ids, verdict, None, None, 0, 26)
        assert [pk for _, pk in keys] == walked == [_arg(team, verdict).call_id], verdict
