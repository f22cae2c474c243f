"""Provider-exact counts: Anthropic's token-counting endpoint asked about a new snapshot's tools.

Optional: only for a team that stored an Anthropic API key (encrypted at rest). Runs once per new
snapshot, as a `snapshot_recorded` receiver (after the poll's transaction commits), never for an
unchanged poll. The request goes through the outbound policy like every request made on a user's
behalf. Any failure (refused address, timeout, an error answer, a malformed one) is stored on the
ProviderCount row with its reason and never reaches the poll.

The request (`POST {ANTHROPIC_API_BASE_URL}/v1/messages/count_tokens`, headers `x-api-key`,
`anthropic-version`, `content-type: application/json`) carries the model, the tools as the `claude`
profile renders them and one one-word user message (the endpoint requires a message); the answer is
`{"input_tokens": N}`.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
from django.conf import settings

from dashboard import outbound
from dashboard.servers.models import ProviderCount, Snapshot
from mcptax import profiles
from mcptax.outbound import OutboundRefused
from mcptax.outbound.transport import PinnedTransport

log = logging.getLogger(__name__)
PROVIDER = "anthropic"
MESSAGE = "hi"


class ProviderError(Exception):
    pass


def request_body(snapshot: Snapshot, model: str) -> dict[str, Any]:
    return {
        "model": model,
        "tools": profiles.render("claude", snapshot.tools_raw, snapshot.server.name),
        "messages": [{"role": "user", "content": MESSAGE}],
    }


def count_tokens(api_key: str, body: dict[str, Any]) -> int:
    """The provider's input_tokens for `body`; ProviderError with the reason otherwise."""
    url = settings.ANTHROPIC_API_BASE_URL.rstrip("/") + "/v1/messages/count_tokens"
    headers = {
        "x-api-key": api_key,
        "anthropic-version": settings.ANTHROPIC_API_VERSION,
        "content-type": "application/json",
    }
    try:
        with httpx.Client(
            transport=PinnedTransport(outbound.policy()), timeout=settings.PROVIDER_COUNT_TIMEOUT
        ) as client:
            response = client.post(url, json=body, headers=headers)
    except OutboundRefused as exc:
        raise ProviderError(f"refused by the outbound policy: {exc}") from exc
    except httpx.HTTPError as exc:
        raise ProviderError(f"{type(exc).__name__}: {exc}") from exc
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if response.status_code != 200:
        detail = answer.get("error", {}).get("message") if isinstance(answer, dict) else None
        raise ProviderError(f"HTTP {response.status_code}: {detail or response.text[:300]}")
    tokens = answer.get("input_tokens") if isinstance(answer, dict) else None
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
        raise ProviderError(f"the answer has no input_tokens count: {response.text[:300]}")
    return tokens


def record(snapshot: Snapshot) -> ProviderCount | None:
    """Ask the provider about `snapshot` (None when its team stored no key)."""
    team = snapshot.server.team
    api_key = (team.provider_keys or {}).get(PROVIDER, "")
    if not api_key:
        return None
    ours = snapshot.figure(snapshot.encoding, "claude")
    row = ProviderCount(
        snapshot=snapshot,
        provider=PROVIDER,
        model=team.anthropic_model,
        ours=ours if ours is not None else 0,
        ours_encoding=snapshot.encoding,
    )
    try:
        row.input_tokens = count_tokens(api_key, request_body(snapshot, team.anthropic_model))
    except ProviderError as exc:
        row.error = str(exc)[:2000]
        log.warning("provider count of snapshot %s failed: %s", snapshot.pk, row.error)
    row.save()
    return row
