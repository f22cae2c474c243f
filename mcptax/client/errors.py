"""Classification of a failed fetch: every SDK or transport exception becomes one poll outcome."""

from __future__ import annotations

import httpx2
import mcp_types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from mcptax.client.tap import Capture
from mcptax.client.target import PollError, ServerTarget


def _leaf_exceptions(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        leaves: list[BaseException] = []
        for inner in exc.exceptions:
            leaves.extend(_leaf_exceptions(inner))
        return leaves
    return [exc]


def classify(exc: BaseException, target: ServerTarget, capture: Capture) -> PollError:
    """Map an SDK/transport failure to a poll outcome (a recorded fault has already won)."""
    leaves = _leaf_exceptions(exc)
    where = target.describe()
    for leaf in leaves:
        if isinstance(leaf, PollError):
            return leaf
    for leaf in leaves:
        if isinstance(leaf, httpx2.TimeoutException | TimeoutError):
            return PollError("timeout", f"{where}: no answer to {capture.waiting_for()} ({leaf!r})")
        if isinstance(leaf, httpx2.ConnectError | ConnectionRefusedError):
            return PollError("connect_error", f"cannot connect to {where}: {leaf}")
        if isinstance(leaf, httpx2.HTTPStatusError):
            return PollError("connect_error", f"{where} answered HTTP {leaf.response.status_code}")
        if isinstance(leaf, httpx2.RemoteProtocolError | httpx2.ReadError | ConnectionError):
            return PollError("crashed", f"{where} dropped the connection while answering: {leaf}")
    for leaf in leaves:
        if isinstance(leaf, MCPError):
            code = leaf.error.code
            if code == mcp_types.CONNECTION_CLOSED:
                return PollError(
                    "crashed", f"{where}: connection closed before the answer to {capture.waiting_for()}"
                )
            if code == mcp_types.REQUEST_TIMEOUT:
                return PollError("timeout", f"{where}: {leaf.error.message}")
            return PollError(
                "protocol_error", f"{where} answered with JSON-RPC error {code}: {leaf.error.message}"
            )
        if isinstance(leaf, ValidationError):
            return PollError(
                "protocol_error", f"{where} sent an answer that does not fit the protocol: {leaf}"
            )
        if isinstance(leaf, httpx2.HTTPError):
            return PollError("connect_error", f"{where}: {leaf!r}")
    # Nothing above recognised it: a failure of ours (or the SDK's), not evidence against the server.
    return PollError("internal_error", f"polling {where} failed in the dashboard's client: {exc!r}")
