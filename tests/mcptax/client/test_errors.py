"""mcptax.client.errors: every way a server can fail maps to one poll outcome, and faults other
than silence are noticed when they happen, not when a timeout runs out."""

from __future__ import annotations

import re
import time

import pytest

from examples.servers.launch import free_port, serve_http
from mcptax.client import ENVELOPE_SLACK_BYTES, PollError, ServerTarget
from tests.mcptax.client.support import CONNECT_TIMEOUT, MAX_BYTES, NEVER, TOTAL_TIMEOUT, fetch, stdio_target

pytestmark = pytest.mark.timeout(180)

# How much the stdio transport reads in one go: a refusal may have read the limit plus one read.
READ_CHUNK_BYTES = 64 * 1024


# -- faults -----------------------------------------------------------------------------------

FAULTS = [
    pytest.param("stdio", "hang", "timeout", marks=pytest.mark.slow),
    pytest.param("stdio", "hang_tools", "timeout", marks=pytest.mark.slow),
    ("stdio", "exit_mid", "crashed"),
    ("stdio", "invalid_json", "protocol_error"),
    ("stdio", "huge", "refused_too_large"),
    pytest.param("http", "hang", "timeout", marks=pytest.mark.slow),
    pytest.param("http", "hang_tools", "timeout", marks=pytest.mark.slow),
    ("http", "exit_mid", "crashed"),
    ("http", "invalid_json", "protocol_error"),
    ("http", "huge", "refused_too_large"),
]


@pytest.mark.parametrize(("transport", "mode", "outcome"), FAULTS)
def test_misbehaving_server_maps_to_outcome_within_the_timeout(
    transport: str, mode: str, outcome: str
) -> None:
    # Silence is given the short timeouts it must run into; every other fault gets timeouts it
    # could never reach, so being reported as itself (not as a timeout) proves it was noticed
    # when it happened.
    limits = (
        {"connect_timeout": CONNECT_TIMEOUT, "total_timeout": TOTAL_TIMEOUT}
        if outcome == "timeout"
        else NEVER
    )

    def attempt(target: ServerTarget) -> tuple[PollError, float]:
        started = time.monotonic()
        with pytest.raises(PollError) as caught:
            fetch(target, **limits)
        return caught.value, time.monotonic() - started

    if transport == "stdio":
        error, elapsed = attempt(stdio_target("misbehaving", "--mode", mode))
    else:
        with serve_http("misbehaving", "--mode", mode) as url:
            error, elapsed = attempt(ServerTarget("http", url=url))

    assert error.outcome == outcome, error.message
    if outcome == "timeout":
        # Which deadline fired is in the message; a deadline never fires early (a one-sided
        # check that load on the machine cannot break).
        budget, which = (CONNECT_TIMEOUT, "connect") if mode == "hang" else (TOTAL_TIMEOUT, "total")
        assert elapsed >= budget - 0.2
        assert ("server/discover" if mode == "hang" else "tools/list") in error.message
        if transport == "stdio":
            assert f"within the {which} timeout ({budget:g} s)" in error.message
    if outcome == "refused_too_large":
        assert str(MAX_BYTES) in error.message


def test_huge_answer_is_refused_after_reading_only_about_the_limit() -> None:
    # 24 MB on offer, 64 KiB limit: reading stops within one read of the limit.
    limit = 64 * 1024 + ENVELOPE_SLACK_BYTES
    with pytest.raises(PollError) as caught:
        fetch(stdio_target("misbehaving", "--mode", "huge", "--huge-mb", "24"), max_bytes=64 * 1024, **NEVER)
    assert caught.value.outcome == "refused_too_large"
    assert f"{limit} bytes" in caught.value.message
    read = int(re.search(r"\((\d+) read\)", caught.value.message).group(1))  # type: ignore[union-attr]
    assert limit < read <= limit + READ_CHUNK_BYTES


def test_unreachable_servers_are_connect_errors() -> None:
    with pytest.raises(PollError) as missing:
        fetch(ServerTarget("stdio", command="/nonexistent/mcp-server"))
    assert missing.value.outcome == "connect_error"
    with pytest.raises(PollError) as refused:
        fetch(ServerTarget("http", url=f"http://127.0.0.1:{free_port()}/mcp"))
    assert refused.value.outcome == "connect_error"


def test_server_that_exits_at_once_is_a_crash() -> None:
    with pytest.raises(PollError) as caught:
        fetch(ServerTarget("stdio", command="/bin/sh", args=["-c", "echo starting up >&2; exit 7"]), **NEVER)
    assert caught.value.outcome == "crashed"
    assert "code 7" in caught.value.message and "starting up" in caught.value.message


def test_a_failure_nothing_recognises_is_ours_not_the_servers() -> None:
    # A bug on our side (or the SDK's) must not be recorded as the server crashing or misspeaking.
    from mcptax.client.errors import classify
    from mcptax.client.tap import Capture

    target = ServerTarget("http", url="http://127.0.0.1:9/mcp")
    error = classify(ExceptionGroup("task group", [KeyError("surprise")]), target, Capture(1024))
    assert error.outcome == "internal_error"
    assert "failed in the dashboard's client" in str(error) and "surprise" in str(error)
    recognised = classify(ConnectionRefusedError("refused"), target, Capture(1024))
    assert recognised.outcome == "connect_error"
