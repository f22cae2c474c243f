"""httpx transports whose connections go only where the outbound policy allowed.

The seam is httpcore's network backend: the connection pool asks it for a TCP stream to
``(host, port)`` whenever it opens a connection. Our backend resolves the host through the
policy (once), refuses inward answers, and opens the stream to one of the checked addresses.
Everything above the socket stays as it was: the URL and the Host header keep the name, TLS sends
the name as SNI and verifies the certificate against it, and the pool keys connections by name.
Rewriting the URL to the IP and passing ``sni_hostname`` would get TLS right too, but the pool
would then share a connection between two names that resolve to the same address.

httpx builds its pool without a way to pass a backend, so the transports below build the pool
themselves; environment proxies are never used (a proxy would resolve the name instead of us).
Two flavours: ``httpx``/``httpcore`` (synchronous: channels, reference documents) and the MCP
SDK's ``httpx2``/``httpcore2`` (asynchronous: the poller).
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Callable, Iterable
from typing import Any

import anyio.to_thread
import httpcore
import httpcore2
import httpx
import httpx2

from mcptax.outbound.policy import IPAddress, OutboundPolicy

# What httpx gives its own pool by default.
POOL_LIMITS: dict[str, Any] = {
    "max_connections": 100,
    "max_keepalive_connections": 20,
    "keepalive_expiry": 5.0,
}


class GraceStream(httpcore.NetworkStream):
    """A connection whose reads can be cut short: while ``grace`` is set, a read waits at most that
    many seconds. A client holding the answer it wanted reads the rest of the response this way, to
    keep the connection for its next request when the response ends at once, without hanging on
    a server that keeps it open (the read times out, and the connection is closed as before)."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner
        self.grace: float | None = None

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self.grace is not None and (timeout is None or timeout > self.grace):
            timeout = self.grace
        return self._inner.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> GraceStream:
        return GraceStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class PinnedBackend(httpcore.NetworkBackend):
    """Resolve through the policy, connect to a checked address (synchronous httpcore)."""

    def __init__(self, policy: OutboundPolicy) -> None:
        self._policy = policy
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        addresses = _resolve(self._policy, host, port, httpcore.ConnectError)
        failure: Exception | None = None
        for address in addresses:
            try:
                stream = self._inner.connect_tcp(
                    str(address), port, timeout, local_address=local_address, socket_options=socket_options
                )
            except httpcore.ConnectError as exc:
                failure = exc
            else:
                return GraceStream(stream)
        assert failure is not None  # resolve() never returns an empty list
        raise failure

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not outbound connections")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class AsyncPinnedBackend(httpcore2.AsyncNetworkBackend):
    """The same for the asynchronous httpcore2 the MCP SDK uses; DNS runs in a worker thread."""

    def __init__(self, policy: OutboundPolicy) -> None:
        self._policy = policy
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> Any:
        addresses = await anyio.to_thread.run_sync(_resolve, self._policy, host, port, httpcore2.ConnectError)
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address), port, timeout, local_address=local_address, socket_options=socket_options
                )
            except httpcore2.ConnectError as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> Any:
        raise httpcore2.ConnectError("unix sockets are not outbound connections")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def _resolve(policy: OutboundPolicy, host: str, port: int, connect_error: type[Exception]) -> list[IPAddress]:
    # A name that does not resolve is a connection failure like any other; a refusal is not
    # (OutboundRefused passes through httpx untouched, so callers can tell the two apart).
    try:
        return policy.resolve(host, port)
    except OSError as exc:
        raise connect_error(f"cannot resolve {host}: {exc}") from exc


@functools.cache
def _default_tls() -> ssl.SSLContext:
    # Loading the CA bundle (load_verify_locations) is most of what a transport costs to build:
    # one context per process serves every connection that verifies against the system's CAs.
    return httpx.create_ssl_context(trust_env=False)


@functools.cache
def _default_tls_async() -> ssl.SSLContext:
    return httpx2.create_ssl_context(trust_env=False)


class _PinnedPool(httpcore.ConnectionPool):
    """A pool that builds its TLS context on its first ``https`` connection, never for ``http``."""

    def __init__(self, tls: Callable[[], ssl.SSLContext], **kwargs: Any) -> None:
        super().__init__(ssl_context=None, **kwargs)
        self._tls = tls

    def create_connection(self, origin: httpcore.Origin) -> httpcore.ConnectionInterface:
        if origin.scheme == b"https" and self._ssl_context is None:
            self._ssl_context = self._tls()
        return super().create_connection(origin)


class _AsyncPinnedPool(httpcore2.AsyncConnectionPool):
    def __init__(self, tls: Callable[[], ssl.SSLContext], **kwargs: Any) -> None:
        super().__init__(ssl_context=None, **kwargs)
        self._tls = tls

    def create_connection(self, origin: Any) -> Any:
        if origin.scheme == b"https" and self._ssl_context is None:
            self._ssl_context = self._tls()
        return super().create_connection(origin)


# httpx's own __init__ builds a pool (and a verifying TLS context) that ours replaces at once; an
# unverifying context costs nothing to build and is never used.
_UNUSED_TLS = False


def pinned_pool(policy: OutboundPolicy, verify: ssl.SSLContext | bool = True) -> httpcore.ConnectionPool:
    """An httpcore connection pool whose every connection goes through ``PinnedBackend``, with
    httpx's default limits. ``verify`` is httpx's (the system's CAs by default; an
    ``ssl.SSLContext`` to trust others)."""
    if verify is True:
        tls: Callable[[], ssl.SSLContext] = _default_tls
    else:
        context = httpx.create_ssl_context(verify=verify, trust_env=False)
        tls = lambda: context  # noqa: E731
    return _PinnedPool(tls, network_backend=PinnedBackend(policy), **POOL_LIMITS)


class PinnedTransport(httpx.HTTPTransport):
    """``httpx.HTTPTransport`` over a ``pinned_pool``."""

    def __init__(self, policy: OutboundPolicy, verify: ssl.SSLContext | bool = True) -> None:
        super().__init__(trust_env=False, verify=_UNUSED_TLS)
        self._pool = pinned_pool(policy, verify)


class AsyncPinnedTransport(httpx2.AsyncHTTPTransport):
    """``httpx2.AsyncHTTPTransport`` whose every connection goes through ``AsyncPinnedBackend``."""

    def __init__(self, policy: OutboundPolicy) -> None:
        super().__init__(trust_env=False, verify=_UNUSED_TLS)
        self._pool = _AsyncPinnedPool(
            _default_tls_async, network_backend=AsyncPinnedBackend(policy), **POOL_LIMITS
        )
