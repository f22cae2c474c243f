"""POST /api/v1/ingest and friends (ingest.capture.api): gzip, size limit, rate limit, tokens,
queued mode, the OpenAPI document, and the logging proxy pushing to the real API.

The API only stores and queues a batch; here the Celery task runs in-process (eager) as the commit
sends it, so ``?wait=true`` sees the job done and answers with its counts. A real worker takes the
job in tests/ingest/capture/test_api_worker.py.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import sys

import pytest

from dashboard.teams.models import ApiToken
from ingest.capture.models import (
    Agent,
    IngestJob,
    ToolCall,
)
from tests.conftest import ROOT, make_envelope_log
from tests.helpers import wait_until
from tests.ingest.capture.logs import (
    API,
    bearer,
    spooled_files,
    stored_bytes,
)

API_WAIT = f"{API}?wait=true"
pytestmark = pytest.mark.django_db(transaction=True)  # the commit sends the job, as in production


@pytest.fixture(autouse=True)
def worker_in_process(eager_celery):
    return eager_celery


def test_api_ingests_gzip_and_reingesting_stores_nothing_new(client, team, team_token):
    _, plaintext = team_token
    data = make_envelope_log(4, bad_lines=2)
    response = client.post(
        API_WAIT,
        gzip.compress(data),
        content_type="application/x-ndjson",
        HTTP_CONTENT_ENCODING="gzip",
        **bearer(plaintext),
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "done" and body["format"] == "envelope" and body["source"] == "api"
    assert (body["lines_read"], body["stored"], body["ignored"], body["quarantined"]) == (12, 8, 2, 2)
    assert body["reconciles"] is True and body["calls_stored"] == 4
    job = IngestJob.objects.get(code=body["code"])
    assert job.team == team
    assert stored_bytes(job.storage_name) == data  # kept decompressed, in the ingest storage

    again = client.post(
        API_WAIT, gzip.compress(data), content_type="application/gzip", **bearer(plaintext)
    ).json()
    assert (again["stored"], again["duplicate"], again["calls_stored"]) == (0, 8, 0)
    assert ToolCall.objects.filter(team=team).count() == 4

    status = client.get(f"{API}/{body['code']}", **bearer(plaintext))
    assert status.status_code == 200 and status.json()["stored"] == 8


def test_api_accepts_plain_jsonl_and_concatenated_gzip_members(client, team, team_token):
    _, plaintext = team_token
    first, second = make_envelope_log(2, session="a"), make_envelope_log(2, session="b")
    body = gzip.compress(first) + gzip.compress(second)  # `cat a.gz b.gz`
    response = client.post(API_WAIT, body, content_type="application/gzip", **bearer(plaintext))
    assert response.status_code == 200 and response.json()["calls_stored"] == 4
    plain = client.post(
        API_WAIT, make_envelope_log(1, session="c"), content_type="application/x-ndjson", **bearer(plaintext)
    )
    assert plain.status_code == 200 and plain.json()["calls_stored"] == 1


def test_api_size_limit_applies_to_the_body_and_to_the_decompressed_data(client, team, team_token, settings):
    _, plaintext = team_token
    settings.INGEST_API_MAX_BYTES = 5_000
    data = make_envelope_log(5)
    assert len(data) > 5_000
    response = client.post(API, data, content_type="application/x-ndjson", **bearer(plaintext))
    assert response.status_code == 413
    assert (
        "larger than the ingest limit" in response.json()["detail"]
        and "INGEST_API_MAX_BYTES" in response.json()["detail"]
    )
    # A small gzip that unpacks past the limit (a gzip bomb) is refused the same way.
    bomb = gzip.compress(b"\n" * 1_000_000)
    assert len(bomb) < 5_000
    response = client.post(API, bomb, content_type="application/gzip", **bearer(plaintext))
    assert response.status_code == 413
    assert not IngestJob.objects.exists() and spooled_files(settings) == []


def test_api_rejects_broken_gzip_empty_body_and_unknown_format(client, team, team_token, settings):
    _, plaintext = team_token
    truncated = gzip.compress(make_envelope_log(2))[:-20]
    response = client.post(API, truncated, content_type="application/gzip", **bearer(plaintext))
    assert response.status_code == 400 and "gzip" in response.json()["detail"]
    garbage = b"\x1f\x8b" + os.urandom(64)
    assert client.post(API, garbage, content_type="application/gzip", **bearer(plaintext)).status_code == 400
    response = client.post(API, b"", content_type="application/x-ndjson", **bearer(plaintext))
    assert response.status_code == 400 and "empty" in response.json()["detail"]
    response = client.post(
        f"{API}?format=xml", b"{}\n", content_type="application/x-ndjson", **bearer(plaintext)
    )
    assert response.status_code == 400 and "Unknown format" in response.json()["detail"]
    assert not IngestJob.objects.exists() and spooled_files(settings) == []


def test_api_rate_limit_per_token_answers_429_with_retry_after(
    client, team, team_token, settings, rate_clock
):
    settings.INGEST_API_RATE_PER_MINUTE = 2
    _, plaintext = team_token
    _, other_plaintext = ApiToken.issue(team, "second")
    for n in range(2):
        ok = client.post(
            API, make_envelope_log(1, seed=str(n)), content_type="application/x-ndjson", **bearer(plaintext)
        )
        assert ok.status_code == 202
    limited = client.post(
        API, make_envelope_log(1, seed="3"), content_type="application/x-ndjson", **bearer(plaintext)
    )
    assert limited.status_code == 429
    assert limited["Retry-After"] == "51"  # 10 s into the minute: 50 s left, rounded up
    assert "2 ingest requests per minute" in limited.json()["detail"]
    assert IngestJob.objects.count() == 2  # the refused batch was not read
    # The budget is per token.
    other = client.post(
        API, make_envelope_log(1, seed="4"), content_type="application/x-ndjson", **bearer(other_plaintext)
    )
    assert other.status_code == 202


@pytest.mark.parametrize(
    ("method", "path"),
    [("post", API), ("get", f"{API}/00000000-0000-0000-0000-000000000000"), ("get", "/api/v1/agents")],
)
def test_api_needs_a_valid_token(client, team, team_token, method, path):
    token, plaintext = team_token
    kwargs = {"content_type": "application/x-ndjson"} if method == "post" else {}
    data = (make_envelope_log(1),) if method == "post" else ()
    assert getattr(client, method)(path, *data, **kwargs).status_code == 401
    assert getattr(client, method)(path, *data, **kwargs, **bearer(plaintext + "x")).status_code == 401
    token.revoke()
    assert getattr(client, method)(path, *data, **kwargs, **bearer(plaintext)).status_code == 401
    assert not IngestJob.objects.exists()


def test_api_job_status_and_agents_are_team_scoped(client, team, team_token, user_factory, team_factory):
    _, plaintext = team_token
    other = team_factory("Other", user_factory("bob"))
    _, other_plaintext = ApiToken.issue(other, "theirs")
    theirs = client.post(
        API, make_envelope_log(2, session="b"), content_type="x", **bearer(other_plaintext)
    ).json()
    ours = client.post(API_WAIT, make_envelope_log(3), content_type="x", **bearer(plaintext)).json()
    assert client.get(f"{API}/{theirs['code']}", **bearer(plaintext)).status_code == 404
    assert client.get(f"{API}/{ours['code']}", **bearer(plaintext)).status_code == 200

    agents = client.get("/api/v1/agents", **bearer(plaintext)).json()
    assert agents["count"] == 1
    (agent,) = agents["items"]
    assert (agent["family"], agent["name"], agent["version"], agent["calls"]) == (
        "claude-code",
        "claude-code",
        "2.0.14",
        3,
    )
    assert Agent.objects.filter(team=other).count() == 1  # theirs exists, but is not listed for us


@pytest.mark.django_db  # inside the test's transaction: the commit (and the task) waits for us
def test_api_answers_once_queued_and_the_worker_ingests_after(
    client, team, team_token, eager_celery, django_capture_on_commit_callbacks
):
    _, plaintext = team_token
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(
            f"{API}?filename=batch-7", make_envelope_log(2), content_type="x", **bearer(plaintext)
        )
    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "queued" and body["filename"] == "batch-7" and body["lines_read"] == 0
    for callback in callbacks:
        callback()  # what the commit would do: the Celery task (eager here) runs the job
    job = IngestJob.objects.get(code=body["code"])
    assert job.status == "done" and job.calls_stored == 2 and job.reconciles


def test_api_is_in_the_openapi_document(client):
    schema = client.get("/api/v1/openapi.json").json()
    assert {"/api/v1/ingest", "/api/v1/ingest/{code}", "/api/v1/agents"} <= set(schema["paths"])


def test_the_json_schema_of_the_status_matches_the_job(client, team, team_token):
    _, plaintext = team_token
    body = client.post(API, make_envelope_log(1), content_type="x", **bearer(plaintext)).json()
    job = IngestJob.objects.get(code=body["code"])
    assert body["url"] == f"/api/v1/ingest/{job.code}"
    assert json.loads(json.dumps(body))["total_bytes"] == job.total_bytes == len(make_envelope_log(1))


def test_gzip_sniffing_without_a_header(client, team, team_token):
    _, plaintext = team_token
    body = gzip.compress(make_envelope_log(2))
    response = client.post(API_WAIT, body, content_type="application/octet-stream", **bearer(plaintext))
    assert response.status_code == 200 and response.json()["calls_stored"] == 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_the_logging_proxy_pushes_to_the_real_api(live_server, team, settings, tmp_path):
    """A real MCP client (official SDK) through the proxy with --push: every envelope it pushed is
    accounted for by the API's jobs, and the pasted text's call carries its exact sha256."""

    import anyio
    from mcp import Client, StdioServerParameters

    root = ROOT
    _, plaintext = ApiToken.issue(team, "proxy")
    text = "".join(f"line {n}: the quick brown fox\n" for n in range(200))  # ~6 KB, a bulk argument
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "mcptax.proxy",
            "--server-label",
            "echo",
            "--push",
            f"{live_server.url}/api/v1/ingest",
            "--token",
            plaintext,
            "--",
            sys.executable,
            str(root / "tests" / "servers" / "echo_hash_server.py"),
        ],
        cwd=str(root),
        env={"PYTHONPATH": str(root)},
    )

    async def paste() -> None:
        with anyio.fail_after(60):
            async with Client(params) as client:
                result = await client.call_tool("digest", {"text": text})
        assert not result.is_error

    anyio.run(paste)
    # The proxy drains its push buffer before it exits; the API ingests each batch as it arrives,
    # so the call can be stored while the job of a later batch is still running: wait for both.
    wait_until(
        lambda: (
            ToolCall.objects.filter(team=team, tool="digest").exists()
            and not IngestJob.objects.filter(team=team, source="api")
            .exclude(status__in=["done", "failed"])
            .exists()
        ),
        timeout=60,
        message="the pushed call, and every job of the push finished",
    )
    jobs = list(IngestJob.objects.filter(team=team, source="api"))
    assert jobs and all(j.status == "done" and j.reconciles for j in jobs)
    call = ToolCall.objects.get(team=team, tool="digest")
    (bulk,) = call.bulk_arguments.all()
    assert bulk.sha256 == hashlib.sha256(text.encode()).hexdigest() and bulk.pointer == "/text"
    # The proxy held the request back until its response could travel in the same batch, and the
    # session still knows its client in batches after the one holding `initialize`.
    assert not call.unanswered and call.response_ts is not None and call.is_error is False
    assert call.agent is not None and call.agent.name == "mcp"


def test_an_api_upload_named_with_a_nul_is_refused_and_writes_nothing(client, team, settings):
    _, token = ApiToken.issue(team, "push")
    response = client.post(
        "/api/v1/ingest?filename=log%00.jsonl",
        data=b'{"a": 1}\n',
        content_type="application/x-ndjson",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 400
    assert not IngestJob.objects.exists()
    assert spooled_files(settings) == []


def _post_chunked(address, plaintext: str, blocks: list[bytes], **headers: str) -> tuple[int, dict]:
    import http.client

    conn = http.client.HTTPConnection(*address, timeout=60)
    # An iterable body without Content-Length: http.client sends it chunked, one chunk per block.
    conn.request(
        "POST",
        API_WAIT,
        body=iter(blocks),
        headers={"Authorization": f"Bearer {plaintext}", "Content-Type": "application/x-ndjson", **headers},
        encode_chunked=True,
    )
    response = conn.getresponse()
    body = json.loads(response.read())
    conn.close()
    return response.status, body


@pytest.mark.timeout(120)
def test_a_chunked_body_is_accepted_up_to_the_limit(gunicorn_url, team, settings):
    _, plaintext = ApiToken.issue(team, "proxy")
    data = make_envelope_log(3)
    blocks = [data[i : i + 700] for i in range(0, len(data), 700)]
    status, body = _post_chunked(gunicorn_url, plaintext, blocks)
    assert status == 200, body
    assert body["calls_stored"] == 3 and body["reconciles"] and body["lines_read"] == data.count(b"\n")
    # Gzip, chunked: the same rules as with a Content-Length.
    packed = gzip.compress(make_envelope_log(1, session="z"))
    status, body = _post_chunked(gunicorn_url, plaintext, [packed[:50], packed[50:]])
    assert status == 200 and body["calls_stored"] == 1
    # Past the limit: 413, and nothing kept.
    settings.INGEST_API_MAX_BYTES = 5_000
    status, body = _post_chunked(gunicorn_url, plaintext, blocks + blocks)
    assert status == 413 and "INGEST_API_MAX_BYTES" in body["detail"]
    assert IngestJob.objects.count() == 2


def test_the_push_api_detects_a_log_whose_first_line_is_long(client, team, team_token):
    """The proxy pushes with format auto: a first frame of 100 KiB+ must still read as envelope."""
    from tests.ingest.capture.logs import EnvelopeLog

    _, plaintext = team_token
    log = EnvelopeLog().initialize().call("write_file", {"path": "a", "content": "p" * (100 * 1024)})
    body = b"".join([log.lines[3], *log.lines[:3], log.lines[4]])
    assert body.index(b"\n") > 100 * 1024
    response = client.post(
        f"{API_WAIT}&format=auto", body, content_type="application/x-ndjson", **bearer(plaintext)
    )
    assert response.status_code == 200, response.json()
    assert response.json()["format"] == "envelope" and response.json()["calls_stored"] == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_a_chunked_body_the_server_did_not_pass_on_is_411_not_empty(live_server, team, settings):
    """Django's development server (live_server) drops a chunked body: say so, not "empty"."""
    from urllib.parse import urlsplit

    _, plaintext = ApiToken.issue(team, "proxy")
    address = urlsplit(live_server.url)
    status, body = _post_chunked((address.hostname, address.port), plaintext, [make_envelope_log(1)])
    assert status == 411 and "chunked" in body["detail"] and "Content-Length" in body["detail"]
    assert not IngestJob.objects.exists() and spooled_files(settings) == []
