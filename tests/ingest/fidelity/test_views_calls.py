"""The single-call drill-down: the verdict's evidence and the diff context around the first
difference, on the scripted agent's real traffic."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.ingest.fidelity.traffic import DOC, EDIT_AT, TRUNCATED, pasted_argument

pytestmark = [pytest.mark.timeout(300)]


def test_call_drill_down_shows_evidence_and_diff_context(alice_client, fidelity_team):
    team = fidelity_team
    # Dropped final newline: the expected side goes on with "↵" where the arrived text ends.
    arg = pasted_argument(team, "newline_only")
    response = alice_client.get(reverse("fidelity_call", args=[team.slug, arg.call_id]))
    assert response.status_code == 200
    row = response.context["rows"][0]
    diff = row["diff"]
    assert diff["offset"] == len(DOC.rstrip("\n").encode())
    assert diff["arrived"]["at_end"] is True and diff["expected"]["after"] == "↵\n"
    html = response.content.decode()
    assert "end of text" in html and "the caller's hash in <code>_meta</code>" in html

    # Truncation: kept and expected bytes, and the point where the copy stops.
    arg = pasted_argument(team, "truncated")
    response = alice_client.get(reverse("fidelity_call", args=[team.slug, arg.call_id]))
    html = response.content.decode()
    assert f"{len(TRUNCATED.encode()):,} of {len(DOC.encode()):,} bytes" in html
    assert response.context["rows"][0]["diff"]["arrived"]["at_end"] is True

    # The edited copy the server refused: isError, the caller's expected_sha256, first difference.
    arg = pasted_argument(team, "mutated")
    response = alice_client.get(reverse("fidelity_call", args=[team.slug, arg.call_id]))
    html = response.content.decode()
    assert 'id="server-answer">server answered isError' in html
    assert "the caller's <code>expected_sha256</code> in the arguments" in html
    diff = response.context["rows"][0]["diff"]
    assert diff["offset"] == len(DOC[: EDIT_AT + len("step ")].encode())
    assert diff["arrived"]["after"].startswith("seven:") and diff["expected"]["after"].startswith("7:")

    # CRLF copy: the carriage returns are made visible.
    arg = pasted_argument(team, "line_endings")
    response = alice_client.get(reverse("fidelity_call", args=[team.slug, arg.call_id]))
    assert "⟨CR⟩↵" in response.context["rows"][0]["diff"]["arrived"]["after"]
    assert "⟨CR⟩↵" in response.content.decode()

    # An exact copy whose server reported the sha256 it wrote: shown as agreeing.
    arg = pasted_argument(team, "exact")
    response = alice_client.get(reverse("fidelity_call", args=[team.slug, arg.call_id]))
    assert response.context["rows"][0]["diff"] is None
    assert "agrees with the capture" in response.content.decode()
