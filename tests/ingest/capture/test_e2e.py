"""End to end: a real SDK client pastes a 60 KB file through the logging proxy into the lean example
server (stdio and Streamable HTTP), the log is ingested, and the stored hash is the file's hash and
the server's. Then the same traffic captured by mitmproxy (HAR) ingests to the same calls.

mitmproxy cannot live in our virtualenv (it pins its own h11): the set-up phase of `make test`
(scripts/test_setup.py) installs it from PyPI into var/mitm-venv, so the test never reaches a
registry; without it the HAR test skips locally and fails with CI=true.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp_types import Implementation

from examples.servers.launch import free_port, serve_http
from ingest.capture import pipeline
from ingest.capture.models import BulkArgument, ToolCall
from tests.conftest import ROOT
from tests.helpers import need, sha, wait_for_port

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

PY = sys.executable
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
MITM_VENV = Path(os.environ.get("MITM_VENV") or ROOT / "var" / "mitm-venv")


def pasted_file(tmp_path: Path) -> tuple[Path, bytes]:
    """A 60 KB multi-byte text with CRLF here and there and no final newline: easy to get wrong."""
    lines, size, i = [], 0, 0
    while size < 60 * 1024:
        end = "\r\n" if i % 17 == 0 else "\n"
        line = f"{i:05d} pâté, naïve café — ✓ {'x' * (i % 29)}{end}"
        lines.append(line)
        size += len(line.encode())
        i += 1
    data = ("".join(lines) + "the end, without a newline").encode("utf-8")
    path = tmp_path / "paste.txt"
    path.write_bytes(data)
    return path, data


@contextlib.contextmanager
def running(cmd: list[str], port: int | None = None, **kwargs) -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, start_new_session=True, **kwargs)
    try:
        if port is not None:
            wait_for_port(port, proc)
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # mitmdump writes its HAR on a clean shutdown
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


async def paste(server: StdioServerParameters | str, text: str, client_name: str) -> dict:
    """Paste ``text``, then copy it by reference."""
    info = Implementation(name=client_name, version="9.1.0")
    with anyio.fail_after(90):
        async with Client(server, client_info=info) as client:
            await client.list_tools()
            result = await client.call_tool("write", {"target": "pasted.txt", "content": text})
            ref = await client.call_tool("write", {"target": "copy.txt", "path": "pasted.txt"})
    assert not result.is_error and not ref.is_error, (result, ref)
    return result.structured_content


def lean_stdio_through_proxy(log: Path, root: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=PY,
        args=[
            "-m",
            "mcptax.proxy",
            "--server-label",
            "lean",
            "--log",
            str(log),
            "--",
            PY,
            "-m",
            "examples.servers.lean",
            "--transport",
            "stdio",
            "--root",
            str(root),
        ],
        env={"PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )


def assert_paste_ingested(team, log: Path, data: bytes, reported: dict, root: Path, transport: str) -> None:
    expected = sha(data)
    # The bytes the server received and wrote are the bytes the client sent.
    assert (root / "pasted.txt").read_bytes() == data
    assert reported["sha256"] == expected and reported["bytes"] == len(data)

    job = pipeline.ingest_path(team, log)
    assert job.status == "done" and job.reconciles and job.quarantined == 0, job.error
    paste_call = ToolCall.objects.get(job=job, tool="write", is_reference_call=False)
    arg = BulkArgument.objects.get(call=paste_call, pointer="/content")
    assert arg.sha256 == expected
    assert paste_call.server_reported_sha256 == expected
    assert arg.bytes == len(data) and arg.crlf_count == data.count(b"\r\n") and not arg.ends_with_newline
    assert arg.content.text.encode("utf-8") == data
    assert paste_call.agent.name == f"e2e-{transport}" and paste_call.agent.version == "9.1.0"
    ref = ToolCall.objects.get(job=job, is_reference_call=True)
    assert (ref.reference_key, ref.reference_value) == ("path", "pasted.txt")
    assert ref.server_reported_sha256 == expected  # the server copied the same bytes


@pytest.mark.django_db
def test_sdk_client_through_the_stdio_proxy_to_the_lean_server(team, tmp_path):
    path, data = pasted_file(tmp_path)
    root = tmp_path / "root"
    root.mkdir()
    log = tmp_path / "stdio.jsonl"
    reported = anyio.run(paste, lean_stdio_through_proxy(log, root), data.decode(), "e2e-stdio")
    assert_paste_ingested(team, log, data, reported, root, "stdio")


@pytest.mark.django_db
def test_sdk_client_through_the_http_proxy_to_the_lean_server(team, tmp_path):
    path, data = pasted_file(tmp_path)
    root = tmp_path / "root"
    root.mkdir()
    log = tmp_path / "http.jsonl"
    port = free_port()
    with serve_http("lean", "--root", str(root)) as upstream:
        cmd = [PY, "-m", "mcptax.proxy", "--server-label", "lean", "--log", str(log)]
        with running([*cmd, "--listen", f"127.0.0.1:{port}", "--upstream", upstream], port):
            reported = anyio.run(paste, f"http://127.0.0.1:{port}/mcp", data.decode(), "e2e-http")
    assert_paste_ingested(team, log, data, reported, root, "http")


# -- mitmproxy ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def mitmdump() -> str:
    """Path of the mitmdump the set-up phase installed into its own virtualenv."""
    binary = MITM_VENV / "bin" / "mitmdump"
    if not binary.exists():
        need(f"mitmproxy is not installed in {MITM_VENV}: run scripts/test_setup.py (make test does)")
    return str(binary)


def _signature(calls) -> list[tuple]:
    rows = []
    for call in calls.order_by("request_ts", "pk"):
        bulk = tuple(call.bulk_arguments.values_list("pointer", "sha256", "bytes", "lines", "crlf_count"))
        rows.append(
            (
                call.tool,
                call.argument_sha256,
                call.argument_bytes,
                bulk,
                call.server_reported_sha256,
                call.is_error,
            )
        )
    return rows


@pytest.mark.django_db
def test_a_mitmproxy_har_ingests_to_the_same_calls_as_the_proxy_log(team, team_factory, tmp_path, mitmdump):
    path, data = pasted_file(tmp_path)
    root = tmp_path / "root"
    root.mkdir()
    log, har = tmp_path / "proxy.jsonl", tmp_path / "mitm.har"
    mitm_port, proxy_port = free_port(), free_port()
    confdir = tmp_path / "mitm-conf"
    with serve_http("lean", "--root", str(root)) as upstream:
        upstream_base = upstream.rsplit("/mcp", 1)[0]
        mitm_cmd = [
            mitmdump,
            "--mode",
            f"reverse:{upstream_base}",
            "--listen-host",
            "127.0.0.1",
            "--listen-port",
            str(mitm_port),
            "--set",
            f"hardump={har}",
            "--set",
            f"confdir={confdir}",
            "--quiet",
        ]
        # client -> our proxy -> mitmdump -> lean: both captures see the very same requests.
        with running(mitm_cmd, mitm_port):
            cmd = [PY, "-m", "mcptax.proxy", "--server-label", "lean", "--log", str(log)]
            target = f"http://127.0.0.1:{mitm_port}/mcp"
            with running([*cmd, "--listen", f"127.0.0.1:{proxy_port}", "--upstream", target], proxy_port):
                reported = anyio.run(paste, f"http://127.0.0.1:{proxy_port}/mcp", data.decode(), "e2e-har")
    assert har.exists() and har.stat().st_size > len(data), "mitmdump wrote no HAR"
    assert reported["sha256"] == sha(data)

    envelope_job = pipeline.ingest_path(team, log)
    other = team_factory("HAR side")
    har_job = pipeline.ingest_path(other, har)
    assert har_job.format == "har" and har_job.status == "done" and har_job.reconciles, har_job.error
    assert har_job.quarantined == 0 and envelope_job.quarantined == 0
    from_proxy = _signature(ToolCall.objects.filter(job=envelope_job))
    from_har = _signature(ToolCall.objects.filter(job=har_job))
    assert len(from_proxy) == 2 and from_har == from_proxy
    paste_sha = [b[1] for row in from_har for b in row[3]]
    assert paste_sha == [sha(data)]
    agents = {c.agent.name for c in ToolCall.objects.filter(job=har_job)}
    assert agents == {"e2e-har"}


@pytest.mark.django_db
def test_demo_capture_is_real_traffic_from_three_agents(team, settings, tmp_path):
    from dashboard.servers.models import McpServer
    from ingest.demo import ROUNDS, build_capture_demo

    settings.VAR_DIR = tmp_path
    lean = McpServer.objects.create(team=team, name="files-lean", transport="stdio", command="x")
    job = build_capture_demo(team)
    assert job.status == "done" and job.reconciles and job.quarantined == 0, job.error
    calls = ToolCall.objects.filter(job=job)
    assert calls.count() == 12 * len(ROUNDS)
    assert sorted(set(calls.values_list("agent__family", flat=True))) == [
        "claude-code",
        "codex",
        "gemini-cli",
    ]
    assert calls.filter(is_reference_call=True).count() == 2 * len(ROUNDS)
    # The lean server refused the mismatching pastes: two a round, one once Claude Code improved.
    assert calls.filter(is_error=True).count() == 2 * 2 + 1 * (len(ROUNDS) - 2)
    # Rounds are back-dated: the capture spans the demo's history, newest today.
    days = {c.request_ts.date() for c in calls}
    assert len(days) == len(ROUNDS)
    assert set(calls.filter(server_label="files-lean").values_list("server", flat=True)) == {lean.pk}
    # Every paste the lean server accepted reports the very hash the capture computed.
    for call in calls.filter(server_label="files-lean", is_error=False, is_reference_call=False):
        assert call.server_reported_sha256 == call.bulk_arguments.get().sha256
    assert build_capture_demo(team) is None  # once per team
