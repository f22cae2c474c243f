"""The Codex rollout parser (mcptax/formats/codex.py)."""

from __future__ import annotations

import hashlib
import json

from mcptax.bulk import find_bulk_arguments
from tests.mcptax.formats.conftest import LOGS, calls_of, outcomes_of, run


def test_codex_raw_arguments_token_counts_and_results() -> None:
    items = run("codex_rollout.jsonl")
    calls = {c.tool: c for c in calls_of(items)}
    assert set(calls) == {"render_markdown", "load_rows"}
    render = calls["render_markdown"]
    line6 = json.loads((LOGS / "codex_rollout.jsonl").read_bytes().splitlines()[5])
    raw = line6["payload"]["arguments"]
    assert render.arguments_raw == raw and ", " in raw  # the model's own spacing is kept
    assert render.arguments_sha256 == hashlib.sha256(raw.encode()).hexdigest()
    assert render.arguments_raw_bytes == len(raw.encode())
    assert render.arguments == json.loads(raw)
    assert (render.server_label, render.client_call_id) == ("docs", "call_Rn4d8TqY2vXw")
    assert render.turn_output_tokens == 640 and render.turn_tool_calls == 2 and 0 < render.output_tokens < 640
    assert render.result["structuredContent"]["sha256"] and render.is_error is False
    assert (render.agent.family, render.agent.name, render.agent.version) == (
        "codex",
        "codex_cli_rs",
        "0.46.0",
    )
    rows = calls["load_rows"]
    assert rows.server_label == "data" and rows.output_tokens == 900 and rows.is_error is True
    assert find_bulk_arguments(rows.arguments)[0].elements == 150
    outcomes = outcomes_of(items)
    assert (outcomes[11].status, outcomes[11].reason) == ("quarantined", "invalid_arguments_json")
    assert outcomes[10].reason == "token_count" and outcomes[15].reason == "meta"
