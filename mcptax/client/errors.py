"""Classification of a failed fetch: every SDK or transport exception becomes one poll outcome.

The message is shown to every member of the team, so it names the failure's class, the JSON-RPC
code and the HTTP status, never text the server sent (a JSON-RPC error's message, a body pydantic
echoes while refusing it): a URL pointed at some internal service must not read its replies out.
The full detail goes to the log, for the operator.
"""

from __future__ import annotations

import logging

import httpx2
import mcp_types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from mcptax.client.tap import Capture
from mcptax.client.target import PollError, ServerTarget, exception_summary
from mcptax.outbound import OutboundRefused

log = logging.getLogger(__name__)

JSONRPC_CODE_NAMES = {
    mcp_types.PARSE_ERROR: "parse error",
    mcp_types.INVALID_REQUEST: "invalid request",
    mcp_types.METHOD_NOT_FOUND: "method not found",
    mcp_types.INVALID_PARAMS: "invalid params",
    mcp_types.INTERNAL_ERROR: "internal error",
}
# Messages the SDK itself writes (not the server), kept up to their first colon: what follows is
# the server's content type or pydantic's rendering of the server's body.
_SDK_MESSAGES = (
    "Unexpected content type",
    "Failed to parse JSON response",
    "Failed to parse SSE message",
    "Not Found",
    "Session terminated",
    "Server returned an error response",
)


def _jsonrpc_error_text(error: mcp_types.ErrorData, capture: Capture) -> str:
    if capture.http_status is not None:
        return f"HTTP {capture.http_status}"
    name = JSONRPC_CODE_NAMES.get(error.code, "server error")
    head = error.message.split(":", 1)[0]
    said = f": {head}" if head in _SDK_MESSAGES else ""
    return f"JSON-RPC error {error.code} ({name}){said}"


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
        if isinstance(leaf, OutboundRefused):
            return PollError("connect_error", f"refused by the outbound policy: {leaf}")
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
                return PollError("timeout", f"{where}: no answer to {capture.waiting_for()} in time")
            log.warning("%s answered with JSON-RPC error %s: %s", where, code, leaf.error.message)
            return PollError(
                "protocol_error", f"{where} answered with {_jsonrpc_error_text(leaf.error, capture)}"
            )
        if isinstance(leaf, ValidationError):
            log.warning("%s sent an answer that does not fit the protocol: %s", where, leaf)
            return PollError(
                "protocol_error",
                f"{where} sent an answer that does not fit the protocol ({exception_summary(leaf)})",
            )
        if isinstance(leaf, httpx2.HTTPError):
            return PollError("connect_error", f"{where}: {leaf!r}")
    # Nothing above recognised it: a failure of ours (or the SDK's), not evidence against the server.
    return PollError("internal_error", f"polling {where} failed in the dashboard's client: {exc!r}")
