"""The poller's Streamable HTTP fast path (mcptax.client.fasthttp) against the SDK's client, on the
same servers: the example servers (built on the SDK's own server, both eras, paging), a hand-written
handshake-era server (JSON, SSE framing), and servers that fail. The SDK is the reference: a result
must be equal field by field (key order included), a failure must end with the same outcome and
message, and whatever leaves the fast path must reach the SDK."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from examples.servers.launch import serve_http
from mcptax.client import PollError, ServerTarget, fasthttp, fetch_tools_sync
from mcptax.outbound import OutboundPolicy
from tests.helpers import free_port
from tests.mcptax.client import stub_http
from tests.mcptax.client.support import LOOPBACK, MAX_BYTES, NEVER

pytestmark = pytest.mark.timeout(180)

EXAMPLES = {
    "lean (modern era)": ("lean",),
    "paged (modern era, 4 pages)": ("sprawling", "--page-size", "3"),
    "sprawling, grown": ("sprawling", "--grown"),
    "handshake era, quirky keys": ("misbehaving", "--mode", "quirky"),
}


def options(**overrides: Any) -> dict[str, Any]:
    return {**NEVER, "max_bytes": MAX_BYTES, "outbound": LOOPBACK, **overrides}


def sdk(url: str, **overrides: Any) -> Any:
    """What the SDK path concludes: the result as a dict (without its timing), or the failure."""
    try:
        result = fetch_tools_sync(ServerTarget("http", url=url), fast=False, **options(**overrides))
    except PollError as exc:
        return (exc.outcome, exc.message)
    return _fields(result)


def fast(url: str, headers: dict[str, str] | None = None, **overrides: Any) -> Any:
    """What the fast path concludes alone: None when it hands the server to the SDK."""
    try:
        result = fasthttp.fetch(ServerTarget("http", url=url, headers=headers or {}), **options(**overrides))
    except PollError as exc:
        return (exc.outcome, exc.message)
    return None if result is None else _fields(result)


def product(url: str, **overrides: Any) -> Any:
    """What a poll concludes (fast path first, the SDK for what leaves it)."""
    try:
        result = fetch_tools_sync(ServerTarget("http", url=url), **options(**overrides))
    except PollError as exc:
        return (exc.outcome, exc.message)
    return _fields(result)


def _fields(result: Any) -> dict[str, Any]:
    fields = dataclasses.asdict(result)
    fields.pop("elapsed_seconds")
    # How the tools were read (only the fast path knows it has seen no float), not what they are.
    fields.pop("float_free_json")
    fields["tools_json"] = json.dumps(result.tools)  # key order, exactly
    return fields


@pytest.fixture(scope="module", params=list(EXAMPLES))
def example_url(request):
    with serve_http(*EXAMPLES[request.param]) as url:
        yield url


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_an_example_server_gives_the_sdks_result_field_by_field(example_url, mode):
    reference = sdk(example_url, mode=mode)
    assert isinstance(reference, dict), reference
    assert fast(example_url, mode=mode) == reference
    assert reference["pages"] >= 1 and reference["tools"]


def test_both_eras_and_paging_are_among_the_example_servers():
    seen = {}
    for name in ("paged (modern era, 4 pages)", "handshake era, quirky keys"):
        with serve_http(*EXAMPLES[name]) as url:
            seen[name] = fast(url)
    assert seen["paged (modern era, 4 pages)"]["protocol_version"] == "2026-07-28"
    assert seen["paged (modern era, 4 pages)"]["pages"] > 1
    assert seen["handshake era, quirky keys"]["protocol_version"].startswith("2025-")


@pytest.mark.parametrize("scenario", ["json", "sse"])
def test_a_handshake_era_server_gets_the_sdks_requests_and_gives_its_result(scenario):
    with stub_http.serve(scenario) as stub:
        reference = sdk(stub.url)
        sdk_posts = stub.posts()
        stub.requests.clear()
        result = fast(stub.url)
        fast_posts = stub.posts()
    assert isinstance(reference, dict), reference
    assert result == reference
    assert result["prompts_count"] == 2 and result["server_title"] == "Stub"
    # The same messages, bytes and headers, the session ended with DELETE.
    assert [(p["method"], p["body"]) for p in fast_posts] == [(p["method"], p["body"]) for p in sdk_posts]
    assert [p["headers"] for p in fast_posts] == [p["headers"] for p in sdk_posts]
    # Byte for byte: each header's name as written, in the order the SDK's client writes them.
    assert [p["raw"] for p in fast_posts] == [p["raw"] for p in sdk_posts]
    assert fast_posts[-1]["method"] == "DELETE"
    assert fast_posts[-1]["headers"]["mcp-session-id"] == "session-7"


def test_headers_and_cookies_belong_to_one_poll_only():
    with stub_http.serve() as first, stub_http.serve() as second:
        assert fast(first.url, headers={"Authorization": "Bearer s3cret"}) is not None
        assert fast(second.url) is not None
        assert fast(first.url) is not None
    secret = [r["headers"].get("authorization") for r in first.posts()]
    assert secret[: len(secret) // 2] == ["Bearer s3cret"] * (len(secret) // 2)
    assert all("authorization" not in r["headers"] for r in second.posts())
    assert all("authorization" not in r["headers"] for r in first.posts()[len(secret) // 2 :])
    # The cookie set by initialize is sent within that poll (as by the SDK), never in the next.
    # (the probe, then initialize, then the rest of the session).
    half = len(secret) // 2
    first_poll_cookies = [r["headers"].get("cookie") for r in first.posts()[:half]]
    assert first_poll_cookies[:2] == [None, None]
    assert first_poll_cookies[2:] and all(cookie == "poll=1" for cookie in first_poll_cookies[2:])
    assert [r["headers"].get("cookie") for r in first.posts()[half : half + 2]] == [None, None]
    assert all("cookie" not in r["headers"] for r in second.posts()[:2])


@pytest.mark.parametrize(
    "scenario", ["status_500", "status_404", "status_401", "bad_sse", "asks", "text", "redirect"]
)
def test_a_server_off_the_plain_path_is_handed_to_the_sdk(scenario):
    with stub_http.serve(scenario) as stub:
        assert fast(stub.url) is None
        assert product(stub.url) == sdk(stub.url)


def test_an_http_error_ends_as_the_sdk_paths_failure():
    with stub_http.serve("status_500") as stub:
        outcome = product(stub.url)
    assert outcome[0] == "protocol_error" and "HTTP 500" in outcome[1]


def test_an_oversize_answer_is_the_sdk_paths_refusal():
    with serve_http("misbehaving", "--mode", "huge", "--huge-mb", "1") as url:
        assert fast(url, max_bytes=100_000) is None
        outcome, message = product(url, max_bytes=100_000)
        reference = sdk(url, max_bytes=100_000)
    assert outcome == reference[0] == "refused_too_large"
    assert "100000 bytes" in message


def test_a_payload_over_the_limit_across_pages_is_refused_alike(paged_sprawl_url):
    small = 3000
    reference = sdk(paged_sprawl_url, max_bytes=small)
    assert reference[0] == "refused_too_large"
    assert fast(paged_sprawl_url, max_bytes=small) == reference


@pytest.mark.parametrize(
    ("mode", "waiting_for", "budget"),
    [
        ("hang", "server/discover", "connect timeout (1 s)"),
        ("hang_tools", "tools/list", "total timeout (2 s)"),
    ],
)
def test_a_timeout_ends_on_the_fast_path_with_the_sdks_message(mode, waiting_for, budget):
    with serve_http("misbehaving", "--mode", mode) as url:
        reference = sdk(url, connect_timeout=1, total_timeout=2)
        result = fast(url, connect_timeout=1, total_timeout=2)
    assert result == reference
    assert result == ("timeout", f"no answer to {waiting_for} within the {budget}")


def test_a_refused_address_ends_on_the_fast_path_with_the_sdks_message():
    with stub_http.serve() as stub:
        reference = sdk(stub.url, outbound=OutboundPolicy())
        result = fast(stub.url, outbound=OutboundPolicy())
        assert stub.requests == [], "nothing reached the refused address"
    assert result == reference
    assert result[0] == "connect_error" and "loopback" in result[1]


def test_a_refused_connection_is_the_sdks_account_of_it():
    url = f"http://127.0.0.1:{free_port()}/mcp"
    assert fast(url) is None
    assert product(url) == sdk(url)
    assert product(url)[0] == "connect_error"


def test_a_server_that_dies_mid_answer_is_the_sdks_crash_not_asked_again():
    with serve_http("misbehaving", "--mode", "exit_mid") as first:
        reference = sdk(first)
    with serve_http("misbehaving", "--mode", "exit_mid") as second:
        result = fast(second)
    assert reference[0] == "crashed" and "dropped the connection while answering" in reference[1]
    assert result == (reference[0], reference[1].replace(first, second))


def test_an_sse_answer_cut_short_is_the_sdks_crash():
    with stub_http.serve("cut_sse") as stub:
        reference = sdk(stub.url)
        assert fast(stub.url) == reference
    assert reference[0] == "crashed" and reference[1].startswith(f"{stub.url}: connection closed before")


def test_a_header_httpx_will_not_send_is_the_sdks_account_of_it():
    with stub_http.serve() as stub:
        assert fast(stub.url, headers={"X-Broken": "a\nb"}) is None
        target = ServerTarget("http", url=stub.url, headers={"X-Broken": "a\nb"})
        outcomes = []
        for fast_path in (True, False):
            with pytest.raises(PollError) as caught:
                fetch_tools_sync(target, fast=fast_path, **options())
            outcomes.append((caught.value.outcome, caught.value.message))
    assert outcomes[0] == outcomes[1]
