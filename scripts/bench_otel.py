"""Telemetry ingest speed: records per second through the receiver and through one worker.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/mcptax_bench .venv/bin/python scripts/bench_otel.py

Generates Claude Code sessions as the OpenTelemetry SDK's log records (a realistic mix per
session: MCP tool results with details and a 2 KB pasted argument, measured requests, a request
body with 20 tools, and events that are only ignored), encodes them in exporter-sized batches
(512 records) with the SDK's own OTLP encoders, protobuf and JSON, then for each encoding:

- *receive*: every body POSTed to ``/api/v1/otel/v1/logs`` in-process (auth, rate limit off,
  spooling, the storage, the job row): requests and records per second;
- *one worker*: every job run one after the other in this process (decode, classify, calls with
  their bulk arguments, verdicts and rollups, measured requests, sent tools counted in two
  encodings, discovery): records per second.

Creates and migrates the database when it is missing; each run uses a new team.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/mcptax_bench"
BATCH = 512


def _events(session: int) -> list[tuple[str, dict[str, Any]]]:
    """One session's events: (body, attributes)."""
    sid = f"bench-{session:06d}"
    base = {
        "session.id": sid,
        "app.version": "2.1.220",
        "terminal.type": "vscode",
        "prompt.id": f"p-{session}",
    }
    seq = iter(range(1, 10_000))

    def ev(name: str, **attrs: Any) -> tuple[str, dict[str, Any]]:
        n = next(seq)
        stamp = f"2026-11-30T10:{n // 60 % 60:02d}:{n % 60:02d}.000Z"
        return f"claude_code.{name}", {
            **base,
            "event.name": name,
            "event.sequence": n,
            "event.timestamp": stamp,
            **attrs,
        }

    tools = [
        {
            "name": f"mcp__docs__tool_{i}",
            "description": f"Tool {i} of the docs server. " * 4,
            "input_schema": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            },
        }
        for i in range(20)
    ]
    out = [ev("user_prompt", prompt_length="40", prompt="<REDACTED>")]
    out.append(
        ev(
            "api_request_body",
            model="claude-sonnet-5",
            body=json.dumps({"model": "claude-sonnet-5", "tools": tools}),
        )
    )
    for call in range(8):
        content = f"line {call} of the pasted document\n" * 60  # about 2 KB
        out.append(
            ev(
                "api_request",
                model="claude-sonnet-5",
                input_tokens="1200",
                output_tokens="300",
                cache_read_tokens="15000",
                cache_creation_tokens="800",
                cost_usd="0.04",
                duration_ms="3000",
            )
        )
        out.append(ev("tool_decision", tool_name="mcp__docs__tool_1", decision="accept", source="config"))
        out.append(
            ev(
                "tool_result",
                tool_name="mcp__docs__tool_1",
                tool_use_id=f"toolu_{session}_{call}",
                success="true",
                duration_ms="120",
                tool_parameters=json.dumps({"mcp_server_name": "docs", "mcp_tool_name": "tool_1"}),
                tool_input=json.dumps({"path": f"doc{call}.md", "content": content[:500]}),
            )
        )
        out.append(
            ev(
                "tool_result",
                tool_name="Bash",
                tool_use_id=f"toolu_b_{session}_{call}",
                success="true",
                duration_ms="40",
            )
        )
    return out


def bodies(records: int) -> tuple[list[bytes], list[bytes]]:
    """(protobuf bodies, JSON bodies) of ``records`` records in batches of BATCH."""
    from opentelemetry.exporter.otlp.json.common._internal._log_encoder import encode_logs as encode_json
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs as encode_proto
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource

    provider = LoggerProvider(
        resource=Resource.create({"service.name": "claude-code", "service.version": "2.1.220"})
    )
    memory = InMemoryLogRecordExporter()
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    logger = provider.get_logger("com.anthropic.claude_code.events")
    made, session = 0, 0
    while made < records:
        for body, attributes in _events(session):
            if made == records:
                break
            logger.emit(body=body, attributes=attributes, timestamp=1_796_032_800_000_000_000 + made)
            made += 1
        session += 1
    logs = list(memory.get_finished_logs())
    batches = [logs[i : i + BATCH] for i in range(0, len(logs), BATCH)]
    return (
        [encode_proto(b).SerializeToString() for b in batches],
        [encode_json(b).to_json().encode() for b in batches],
    )


def ensure_database(url: str) -> None:
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(base + "/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def run(label: str, payloads: list[bytes], content_type: str, records: int) -> dict[str, Any]:
    from django.conf import settings
    from django.test import Client

    from dashboard.teams.models import ApiToken, Team
    from ingest.capture import pipeline
    from ingest.capture.models import IngestJob

    settings.OTEL_RATE_PER_MINUTE = 0
    team = Team.objects.create(name=f"bench otel {label} {time.strftime('%H%M%S')} {os.getpid()}")
    _, token = ApiToken.issue(team, "bench")
    client = Client(HTTP_HOST="127.0.0.1")
    started = time.perf_counter()
    for payload in payloads:
        response = client.post(
            "/api/v1/otel/v1/logs", payload, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {token}"
        )
        assert response.status_code == 200, response.content
    received = time.perf_counter() - started
    jobs = list(IngestJob.objects.filter(team=team).order_by("pk").values_list("pk", flat=True))
    started = time.perf_counter()
    stored = read = 0
    for pk in jobs:
        job = pipeline.run_job(pk)
        assert job.status == "done", job.error
        stored += job.stored
        read += job.lines_read
    worked = time.perf_counter() - started
    assert read == records
    return {
        "encoding": label,
        "bodies": len(payloads),
        "MB": round(sum(map(len, payloads)) / 1e6, 2),
        "receive_req_s": round(len(payloads) / received, 1),
        "receive_records_s": round(records / received),
        "worker_records_s": round(records / worked),
        "stored": stored,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    args = parser.parse_args()
    os.environ.setdefault("DATABASE_URL", DEFAULT_DB)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if os.environ["DATABASE_URL"].startswith("postgres"):
        ensure_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command

    from mcptax import tokens

    call_command("migrate", verbosity=0, skip_checks=True)
    for enc in tokens.OFFLINE_ENCODINGS:
        tokens.count("warm up", enc)
    proto, as_json = bodies(args.records)
    rows = [
        run("protobuf", proto, "application/x-protobuf", args.records),
        run("json", as_json, "application/json", args.records),
    ]
    print(f"{args.records} records, batches of {BATCH}, database {django.db.connection.vendor}")
    print("| encoding | bodies | MB | receive (req/s) | receive (records/s) | one worker (records/s) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(
            f"| {r['encoding']} | {r['bodies']} | {r['MB']} | {r['receive_req_s']} | "
            f"{r['receive_records_s']:,} | {r['worker_records_s']:,} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
