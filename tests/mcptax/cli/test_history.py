"""`mcp-tax measure --history`: the dashboard's history advice from transcripts, without a database,
against the real files-lean example server measured by the command.

The fixture folder tests/data/logs/history_lean (README there) holds four Claude Code sessions that
used lean's tools under ToolSearch, one of them twice (a copied file), and a session whose ToolSearch
result is broken. Every expected figure is tiktoken's count of the text docs/methodology.md
describes, written out here, never mcptax's.
"""

from __future__ import annotations

import json
from pathlib import Path

from mcptax.loading import CLAUDE_CODE_TOOL_SEARCH
from tests.helpers import compact
from tests.mcptax.cli.support import CL100K, fetched, mcp_tax, server_entry, write_config

LOGS = Path(__file__).resolve().parents[2] / "data" / "logs"
HISTORY = LOGS / "history_lean"


def n(text: str) -> int:
    return len(CL100K.encode_ordinary(text))


def definition(name: str) -> int:
    """A lean tool as Claude Code sends it once loaded (the `claude` rendering)."""
    (tool,) = [t for t in fetched("lean").tools if t["name"] == name]
    rendered = {"name": f"mcp__lean__{name}"}
    if "description" in tool:
        rendered["description"] = tool["description"]
    rendered["input_schema"] = tool.get("inputSchema", {"type": "object"})
    return n(compact(rendered))


def entry(name: str) -> int:
    return n(f"mcp__lean__{name}\n")


def deferred_upfront() -> int:
    """lean alone under Claude Code deferring: its name list, ToolSearch and its instructions."""
    names = "".join(f"mcp__lean__{t['name']}\n" for t in fetched("lean").tools)
    listing = n("<available-deferred-tools>\n" + names + "</available-deferred-tools>")
    return listing + n(compact(CLAUDE_CODE_TOOL_SEARCH)) + n(fetched("lean").instructions or "")


def run_json(tmp_path: Path, *extra: str) -> dict:
    config = write_config(tmp_path / "mcp.json", {"lean": server_entry("lean")})
    run = mcp_tax("measure", str(config), "--json", *extra)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_history_gives_each_piece_of_advice_with_its_saving(tmp_path):
    out = run_json(
        tmp_path,
        "--history",
        str(HISTORY),
        str(LOGS / "claude_code_tool_search.jsonl"),
        "--unused-sessions",
        "4",
    )
    history = out["history"]
    # Six files; the copied session counts once; the ToolSearch fixture's session searched too but
    # used none of lean's tools; the broken session never searched (its one search is quarantined).
    assert len(history["files"]) == 6 and history["unread"] == []
    assert (history["sessions"], history["deferring_sessions"]) == (6, 5)
    (bad,) = history["quarantined_lines"]
    assert bad["path"].endswith("2026-05-05-malformed.jsonl") and bad["line"] == 4
    assert bad["reason"].startswith("malformed_tool_search")

    advice = {(a["kind"], a["tool"]): a for a in out["stacks"][0]["advice"]}
    assert {a["source"] for a in advice.values()} == {"history"}
    assert set(advice) == {
        ("keep_eager", "read"),
        ("remove_unused", "write"),
        ("remove_unused", "help"),
        ("rename_missed", None),
    }
    # read: called in all 4 sessions. Per session, deferred costs its name-list line in every
    # request and its definition in the requests after its load; eager its definition in every
    # request. (requests, requests after the load): h1 (4, 2), h2 (4, 3), h3 (4, 3), h4 (3, 2).
    sessions = [(4, 2), (4, 3), (4, 3), (3, 2)]
    per_session = [entry("read") * r + definition("read") * (after - r) for r, after in sessions]
    keep = advice[("keep_eager", "read")]
    assert keep["saving_tokens"] == round(sum(per_session) / 4) and keep["per"] == "session"
    assert "called in 4 of 4 deferring sessions" in keep["message"]
    # write and help were never loaded nor called in the last 4 sessions: each definition, per request.
    for tool in ("write", "help"):
        remove = advice[("remove_unused", tool)]
        assert (remove["saving_tokens"], remove["per"]) == (definition(tool), "request")
        assert f"{entry(tool):,} in the deferred name list" in remove["message"]
    # One keyword search found nothing before read was called in that session: it cost one request
    # carrying lean's deferred upfront.
    rename = advice[("rename_missed", None)]
    assert rename["saving_tokens"] == deferred_upfront() and '"open a document"' in rename["message"]

    # The thresholds are options: with the default 20 sessions, no tool is called unused yet.
    default = run_json(tmp_path, "--history", str(HISTORY))
    kinds = {a["kind"] for a in default["stacks"][0]["advice"]}
    assert "remove_unused" not in kinds and "keep_eager" in kinds
    # Below --min-sessions a server gets no history advice at all.
    few = run_json(tmp_path, "--history", str(HISTORY), "--min-sessions", "5")
    assert few["stacks"][0]["advice"] == []


def test_history_in_markdown_and_text_says_what_was_read(tmp_path):
    config = write_config(tmp_path / "mcp.json", {"lean": server_entry("lean")})
    missing = tmp_path / "nowhere"
    run = mcp_tax(
        "measure",
        str(config),
        "--markdown",
        "--history",
        str(HISTORY),
        str(missing),
        "--unused-sessions",
        "4",
    )
    assert run.returncode == 0, run.stderr
    assert "**Advice:**" in run.stdout
    keep = [line for line in run.stdout.splitlines() if line.startswith("- `lean`: Keep read loaded")]
    assert len(keep) == 1 and "tokens per session, from the sessions read)" in keep[0]
    assert f"(saves {definition('write'):,} tokens per request, from the sessions read)" in run.stdout
    assert "_history: 5 files, 5 sessions (4 deferring), 1 line quarantined, 1 not read_" in run.stdout
    assert f"- not read: {missing}: no such file or folder" in run.stdout

    text = mcp_tax("measure", str(config), "--history", str(HISTORY), "--unused-sessions", "4")
    assert text.returncode == 0, text.stderr
    assert "advice (lean): Remove write or merge it into another tool" in text.stdout
    assert "history: 5 files, 5 sessions (4 deferring), 1 line quarantined" in text.stdout


def test_the_thresholds_default_to_the_dashboards():
    from mcptax.advice import HistoryRules
    from mcptax.cli.main import build_parser

    args = build_parser().parse_args(["measure", "--history", "logs"])
    assert HistoryRules(args.keep_eager_percent, args.unused_sessions, args.min_sessions) == HistoryRules()
