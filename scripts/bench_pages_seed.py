"""The schema side of bench_pages.py's data: servers with a long snapshot history each.

`seed(team, servers, snapshots, owner)`: `servers` servers, each with `snapshots` snapshots (one
every 6 hours; the tool list changes every 25), ~15 SnapshotTool rows per snapshot, a poll run per
snapshot, three resolved alerts, budgets checked in every snapshot, and a stack holding every
server. The first two servers are named FIDELITY_LABELS, so the captured calls bench_pages.py
seeds with bench_fidelity.seed_calls land on their tools (the tool page shows both).
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

from django.utils import timezone

TOOLS_PER_SNAPSHOT = 15
# The server labels and tools of the captured calls (bench_fidelity.seed_calls's `tools`): the
# first tool of each label takes bulk arguments.
FIDELITY_LABELS = ["files", "docs"]
FIDELITY_TOOLS = {"files": ["tool_0", "tool_1", "tool_2", "tool_3"], "docs": ["tool_4", "tool_5"]}
FIDELITY_BULK_TOOLS = [("files", "tool_0"), ("docs", "tool_4")]


def _tools(variant: int) -> list[dict]:
    tools = []
    for j in range(TOOLS_PER_SNAPSHOT + variant % 3):
        tools.append(
            {
                "name": f"tool_{j}",
                "description": f"Tool {j}, release variant {variant}. "
                + "Explains at length. " * (5 + j % 4),
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "A path inside the root."},
                        "limit": {"type": "integer"},
                    },
                    "required": ["path"],
                },
            }
        )
    return tools


FINDINGS = [
    {
        "kind": "near_duplicate_tools",
        "severity": "warning",
        "tools": ["tool_1", "tool_2", "tool_3"],
        "title": "tool_1, tool_2 and tool_3 could be one tool",
        "detail": "They share the stem 'tool' and the parameters path, limit.",
        "estimated_savings_tokens": 420,
    },
    {
        "kind": "bulk_without_reference",
        "severity": "warning",
        "tools": ["tool_4"],
        "title": "tool_4 takes bulk content with no reference alternative",
        "detail": "Accept a path or URL next to the content.",
        "estimated_savings_tokens": None,
    },
]


def seed(team, servers: int, snapshots: int, owner) -> None:
    from dashboard.alerts.models import Alert
    from dashboard.servers.models import (
        McpServer,
        PollRun,
        Snapshot,
        SnapshotTool,
        Stack,
        ToolsDocument,
        Transport,
    )

    documents = []
    for variant in range(10):
        tools = _tools(variant)
        sha = hashlib.sha256(json.dumps(tools).encode()).hexdigest()
        documents.append(ToolsDocument.store(sha, tools))
    start = timezone.now() - timedelta(hours=snapshots * 6)
    created = []
    for n in range(servers):
        server = McpServer.objects.create(
            team=team,
            name=FIDELITY_LABELS[n] if n < len(FIDELITY_LABELS) else f"{team.slug}-server-{n:03d}",
            transport=Transport.HTTP,
            url="http://127.0.0.1:9/mcp",
        )
        created.append(server)
        rows = []
        for k in range(snapshots):
            variant = (k // 25) % 10
            doc = documents[variant]
            tax = 2000 + 40 * (k // 25) + (n * 7) % 300
            when = start + timedelta(hours=6 * k)
            rows.append(
                Snapshot(
                    server=server,
                    document=doc,
                    sha256=doc.sha256,
                    first_seen=when,
                    last_seen=when + timedelta(hours=5),
                    server_version=f"1.{k // 25}.0",
                    is_release=k % 25 == 0,
                    tool_count=len(doc.raw),
                    fixed_tax_tokens=tax,
                    overhead_tokens=-1 if k % 2 else 2,
                    instructions_tokens=40,
                    findings=FINDINGS,
                    budget_checks={
                        "fixed_tax_tokens": {
                            "limit": 2600,
                            "level": "error",
                            "value": tax,
                            "breached": tax > 2600,
                        }
                    },
                )
            )
        snaps = Snapshot.objects.bulk_create(rows)
        for prev, snap in zip(snaps, snaps[1:], strict=False):
            snap.previous = prev
            snap.tax_delta = snap.fixed_tax_tokens - prev.fixed_tax_tokens
        Snapshot.objects.bulk_update(snaps[1:], ["previous", "tax_delta"], batch_size=500)
        SnapshotTool.objects.bulk_create(
            [
                SnapshotTool(
                    snapshot=snap,
                    position=j,
                    name=tool["name"],
                    tokens=120 + j,
                    description_tokens=70 + j,
                    schema_tokens=40,
                    sha256=hashlib.sha256(f"{snap.sha256}{j}".encode()).hexdigest(),
                )
                for snap in snaps
                for j, tool in enumerate(snap.document.raw)
            ],
            batch_size=2000,
        )
        PollRun.objects.bulk_create(
            [
                PollRun(
                    server=server,
                    started=snap.first_seen,
                    duration_ms=400,
                    outcome="ok" if k % 50 else "timeout",
                    message="" if k % 50 else "timed out after 60 s",
                    snapshot=snap,
                    changed=True,
                    trigger="schedule",
                )
                for k, snap in enumerate(snaps)
            ],
            batch_size=2000,
        )
        Alert.objects.bulk_create(
            [
                Alert(
                    team=team,
                    rule_key=f"server:{server.pk}:fixed_tax_tokens:{i}",
                    measure="fixed_tax_tokens",
                    level="error",
                    server=server,
                    subject_label=server.name,
                    snapshot=snaps[-1 - (i * 40) % len(snaps)],
                    value=3000,
                    limit=2600,
                    message=f"{server.name} above budget",
                    state="resolved",
                    opened_at=snaps[-1 - (i * 40) % len(snaps)].first_seen,
                )
                for i in range(3)
            ]
        )
        McpServer.objects.filter(pk=server.pk).update(
            current_snapshot=snaps[-1], last_poll_at=snaps[-1].last_seen, last_outcome="ok", owner=owner
        )
    Stack.objects.create(team=team, name="everything").servers.set(created)
