"""The receiver's answers to what goes wrong, each tested, and no other team's data moves:
a retried batch, a malformed record, an undecodable body, an oversize body, a wrong token, the
rate limit and the broker down."""

from __future__ import annotations

import gzip
import json

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.sdk._logs.export import LogRecordExportResult

from dashboard.teams.models import ApiToken
from ingest.capture import pipeline
from ingest.capture.models import IngestJob, LineRecord, ToolCall
from ingest.discovery.models import DiscoverySearch
from ingest.otel.models import MeasuredRequest, SentTools
from tests.ingest.otel.exporters import fixture, records, send
from tests.ingest.otel.support import run_to_end

URL = "/api/v1/otel/v1/logs"
CLAUDE = fixture("claude_code_session.json")


@pytest.fixture
def other_team(team_factory, user_factory):
    """Another team with telemetry of its own already stored: it must never move."""
    other = team_factory("Elsewhere", user_factory("bob"))
    body = json_body(CLAUDE["events"][2:4])
    job = pipeline.create_job(
        other, source="otel", filename="seed", format="otlp", storage_name=store(other, body)
    )
    run_to_end(job.pk)
    return other


def store(team, body: bytes) -> str:
    from ingest.capture.uploads import store_upload

    return store_upload(team, [body], "seed")


def snapshot(team) -> tuple:
    return (
        list(ToolCall.objects.filter(team=team).values_list("pk", "dedupe_key", "job_id").order_by("pk")),
        list(MeasuredRequest.objects.filter(team=team).values_list("pk", "key").order_by("pk")),
        list(IngestJob.objects.filter(team=team).values_list("pk", "status", "stored").order_by("pk")),
    )


def any_value(value):
    return {"stringValue": value} if isinstance(value, str) else {"intValue": str(value)}


def json_body(events, resource=CLAUDE["resource"]) -> bytes:
    """An OTLP/JSON body written by hand (what an exporter sends), for the malformed cases."""
    log_records = [
        {
            "timeUnixNano": "1796032800000000000",
            "body": {"stringValue": e["body"]},
            "attributes": [{"key": k, "value": any_value(v)} for k, v in e["attributes"].items()],
        }
        if isinstance(e, dict) and "body" in e
        else e
        for e in events
    ]
    document = {
        "resourceLogs": [
            {
                "resource": {"attributes": [{"key": k, "value": any_value(v)} for k, v in resource.items()]},
                "scopeLogs": [{"scope": {"name": CLAUDE["scope"]}, "logRecords": log_records}],
            }
        ]
    }
    return json.dumps(document).encode()


def post(client, token: str, body: bytes, content_type: str = "application/json", **headers):
    return client.post(URL, body, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {token}", **headers)


@pytest.mark.django_db(transaction=True)
def test_a_retried_batch_is_stored_once(live_server, team, team_token, other_team):
    before = snapshot(other_team)
    url = live_server.url + URL
    batch = records(CLAUDE)
    for _ in range(2):  # the exporter's retry sends the very same records again
        assert (
            send(url, team_token[1], batch, protocol="protobuf", gzip=True) == LogRecordExportResult.SUCCESS
        )
    jobs = [run_to_end(job.pk) for job in IngestJob.objects.filter(team=team, source="otel").order_by("pk")]
    # Whichever run commits first stores the records: in the services leg the session's worker can
    # run the retry's job before the first one's, or beside it. One stores all, the other none.
    stored, repeated = sorted(jobs, key=lambda job: -job.stored)
    assert (stored.stored, stored.duplicate) == (7, 0)
    assert (repeated.stored, repeated.duplicate, repeated.ignored) == (0, 7, 4)
    assert ToolCall.objects.filter(team=team).count() == 4
    assert MeasuredRequest.objects.filter(team=team).count() == 1
    assert SentTools.objects.filter(team=team).count() == 1
    # Running the storing job again (a redelivered task) changes nothing either.
    assert run_to_end(stored.pk).stored == 7 and ToolCall.objects.filter(team=team).count() == 4
    assert DiscoverySearch.objects.filter(session__team=team).count() == 1
    assert snapshot(other_team) == before


def test_a_malformed_record_is_rejected_as_partial_success_and_the_rest_kept(
    client, team, team_token, other_team
):
    before = snapshot(other_team)
    events = [CLAUDE["events"][2], {"timeUnixNano": "1", "attributes": "not a list"}, CLAUDE["events"][3]]
    response = post(client, team_token[1], gzip.compress(json_body(events)), HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 200
    reply = response.json()
    assert reply["partialSuccess"]["rejectedLogRecords"] == "1"
    assert "1 of 3 records" in reply["partialSuccess"]["errorMessage"]
    job = run_to_end(IngestJob.objects.get(team=team, source="otel").pk)
    assert (job.lines_read, job.stored, job.quarantined) == (3, 2, 1)
    (line,) = LineRecord.objects.filter(job=job, status="quarantined")
    assert line.line_no == 2 and line.reason.startswith("invalid_log_record")
    assert '"not a list"' in line.raw  # kept whole for inspection
    assert (
        ToolCall.objects.filter(team=team).count() == 1
        and MeasuredRequest.objects.filter(team=team).count() == 1
    )
    assert snapshot(other_team) == before


def test_an_unknown_event_is_quarantined_with_its_name(client, team, team_token):
    event = {
        "body": "claude_code.brand_new",
        "attributes": {**CLAUDE["events"][0]["attributes"], "event.name": "brand_new"},
    }
    response = post(client, team_token[1], json_body([event, CLAUDE["events"][2]]))
    assert response.status_code == 200 and response.json() == {}
    job = run_to_end(IngestJob.objects.get(team=team).pk)
    assert job.quarantined_reasons == {"unknown_event:claude_code.brand_new": 1} and job.stored == 1


def test_a_body_that_is_no_otlp_request_is_kept_quarantined_and_answered_400(
    client, team, team_token, other_team
):
    before = snapshot(other_team)
    response = post(client, team_token[1], b"\x0a\xff\xff\xff\xff", content_type="application/x-protobuf")
    assert response.status_code == 400 and "invalid_protobuf" in response.json()["detail"]
    job = run_to_end(IngestJob.objects.get(team=team).pk)
    assert (job.lines_read, job.quarantined, job.quarantined_reasons) == (1, 1, {"invalid_protobuf": 1})
    assert snapshot(other_team) == before


def test_a_success_reply_is_otlp_protobuf_for_a_protobuf_request(client, team, team_token):
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

    body = encode_logs(records(CLAUDE)).SerializeToString()
    response = post(client, team_token[1], body, content_type="application/x-protobuf")
    assert response.status_code == 200 and response["Content-Type"] == "application/x-protobuf"
    assert ExportLogsServiceResponse.FromString(response.content) == ExportLogsServiceResponse()


@pytest.mark.django_db(transaction=True)
def test_an_oversize_body_is_refused_with_413_and_nothing_kept(
    live_server, team, team_token, other_team, settings
):
    before = snapshot(other_team)
    settings.OTEL_MAX_BYTES = 2000  # the fixture's body is over 6 kB
    url = live_server.url + URL
    assert (
        send(url, team_token[1], records(CLAUDE), protocol="json", gzip=False)
        == LogRecordExportResult.FAILURE
    )
    # gzip makes it small on the wire; the limit holds for the unpacked body too.
    assert (
        send(url, team_token[1], records(CLAUDE), protocol="protobuf", gzip=True)
        == LogRecordExportResult.FAILURE
    )
    assert not IngestJob.objects.filter(team=team).exists()
    assert list((settings.MEDIA_ROOT).rglob("*otlp*")) == []
    assert snapshot(other_team) == before


def test_oversize_answer_names_the_limit(client, team, team_token, settings):
    settings.OTEL_MAX_BYTES = 100
    response = post(client, team_token[1], json_body(CLAUDE["events"]))
    assert response.status_code == 413 and "OTEL_MAX_BYTES" in response.json()["detail"]


@pytest.mark.django_db(transaction=True)
def test_a_wrong_token_is_refused_and_nothing_kept(live_server, team, team_token, other_team):
    before = snapshot(other_team)
    url = live_server.url + URL
    wrong = team_token[1][:-4] + "AAAA"
    assert send(url, wrong, records(CLAUDE), protocol="protobuf", gzip=False) == LogRecordExportResult.FAILURE
    revoked_row, revoked = ApiToken.issue(team, "old")
    revoked_row.revoke()
    assert send(url, revoked, records(CLAUDE), protocol="json", gzip=False) == LogRecordExportResult.FAILURE
    assert not IngestJob.objects.filter(team=team).exists()
    assert snapshot(other_team) == before


def test_a_wrong_token_answers_401(client, team):
    response = post(client, "mcpt_nothing_here", json_body(CLAUDE["events"]))
    assert response.status_code == 401


def test_the_rate_limit_answers_429_with_retry_after(client, team, team_token, settings):
    settings.OTEL_RATE_PER_MINUTE = 1
    assert post(client, team_token[1], json_body(CLAUDE["events"][:1])).status_code == 200
    limited = post(client, team_token[1], json_body(CLAUDE["events"][:1]))
    assert limited.status_code == 429 and 1 <= int(limited["Retry-After"]) <= 61
    assert "OTEL_RATE_PER_MINUTE" in limited.json()["detail"]


@pytest.mark.django_db(transaction=True)
def test_with_the_broker_down_the_body_is_kept_and_answered_success(
    client, team, team_token, other_team, settings, tmp_path
):
    from dashboard.system.models import OutageRecord
    from tests.dashboard.system.outage_helpers import celery_broker, closed_redis_url

    before = snapshot(other_team)
    settings.VAR_DIR = tmp_path  # this test's outage files
    with celery_broker(closed_redis_url()):
        response = post(client, team_token[1], json_body(CLAUDE["events"]))
    # Kept: the exporter must not resend (it would only make duplicates); the sweep runs it.
    assert response.status_code == 200 and response.json() == {}
    job = IngestJob.objects.get(team=team)
    assert job.status == "queued" and OutageRecord.objects.filter(kind="broker").exists()
    assert run_to_end(job.pk).stored == 7
    assert snapshot(other_team) == before
