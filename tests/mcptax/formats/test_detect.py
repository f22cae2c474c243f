"""Format detection and dispatch (mcptax/formats/__init__.py)."""

from __future__ import annotations

import pytest

from mcptax.formats import UnknownFormatError, detect_format, parse
from tests.mcptax.formats.helpers import LOGS, SAMPLES


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_detects_each_sample_format(name: str) -> None:
    assert detect_format((LOGS / name).read_bytes()[:65536]) == SAMPLES[name]


def test_detect_format_edge_cases() -> None:
    assert detect_format(b'\xef\xbb\xbf{"log": {"version": "1.2", "entries": []}}') == "har"
    # Detection reads a prefix: its last line is usually cut mid-way, and must not matter.
    cut = b'{"type":"summary","summary":"x","leafUuid":"u"}\n{"parentUuid":null,"sessionId":"s"'
    assert detect_format(cut) == "claude-code"
    assert detect_format(b'\n\n{"nope"\n{"session_id":"s","direction":"c2s","raw":{}}\n{"ses') == "envelope"
    assert detect_format(b'{"id":"a","timestamp":"2025-01-01T00:00:00Z","instructions":null}\n') == "codex"
    with pytest.raises(UnknownFormatError, match="cannot tell the log format.*envelope"):
        detect_format(b"hello world\n\x00\x01")
    with pytest.raises(UnknownFormatError, match="keys"):
        detect_format(b'{"foo": 1}\n')
    with pytest.raises(UnknownFormatError):
        list(parse([b"{}"], "syslog"))
