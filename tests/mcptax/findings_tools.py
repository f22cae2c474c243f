"""Helpers shared by the findings tests (test_findings.py, test_findings_bulk.py): the tool-list
fixtures under tests/data/tools, and tools written inline."""

from __future__ import annotations

from pathlib import Path

from mcptax import findings, tokens

DATA = Path(__file__).resolve().parents[1] / "data" / "tools"


def load(name: str) -> list[dict]:
    return tokens.load_tools_document((DATA / name).read_text(encoding="utf-8"))[0]


def of_kind(found: list[findings.Finding], kind: str) -> list[findings.Finding]:
    return [f for f in found if f.kind == kind]


def make_tool(name: str, description: str | None = None, **properties) -> dict:
    tool: dict = {"name": name}
    if description is not None:
        tool["description"] = description
    tool["inputSchema"] = {"type": "object", "properties": properties}
    return tool


STRING = {"type": "string"}
