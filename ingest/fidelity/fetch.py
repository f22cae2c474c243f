"""Fetch a reference document by URL the way a careful server would.

- Only allow-listed hosts (GitHub by default); `github.com/<owner>/<repo>/blob/<ref>/<path>` is
  turned into its raw file URL.
- Redirects are followed by hand, one hop at a time, and every hop must stay on the list.
- Every connection goes through the outbound policy (``mcptax.outbound``): the name is resolved
  once, an inward answer (private, loopback, link-local, CGNAT, ...) is refused unless the
  operator allows its network, and the connection goes to the address that was checked.
- https only; plain http only to a host whose addresses are all in a network the operator allows.
- The size limit is enforced by reading one byte past it: over the limit is refused, never cut.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx

from mcptax.bulk import count_lines
from mcptax.outbound import OutboundPolicy, OutboundRefused, PinnedTransport

DEFAULT_ALLOWED_HOSTS = ("github.com", "raw.githubusercontent.com", "gist.githubusercontent.com")
GITHUB_BLOB = re.compile(r"^https://github\.com/([^/]+)/([^/]+)/blob/(.+)$")
MAX_REDIRECTS = 5


class FetchRefused(Exception):
    """The URL may not be fetched, or what came back may not be kept. The message says why."""


@dataclass(frozen=True)
class FetchedDocument:
    url: str
    final_url: str
    content: bytes
    sha256: str
    bytes: int
    lines: int
    content_type: str


def normalize_url(url: str) -> str:
    """GitHub's HTML blob page becomes the raw file it shows."""
    match = GITHUB_BLOB.match(url.strip())
    if match:
        owner, repo, rest = match.groups()
        return f"https://raw.githubusercontent.com/{owner}/{repo}/{rest}"
    return url.strip()


def host_allowed(host: str, allowed_hosts: Sequence[str]) -> bool:
    host = host.lower().rstrip(".")
    for entry in allowed_hosts:
        entry = entry.lower().strip()
        if entry.startswith("*.") and (host == entry[2:] or host.endswith(entry[1:])):
            return True
        if host == entry:
            return True
    return False


def _check_url(url: str, allowed_hosts: Sequence[str], outbound: OutboundPolicy) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http"):
        raise FetchRefused(f"only http(s) URLs can be fetched, not {parts.scheme or 'a relative URL'!r}")
    host = parts.hostname or ""
    if not host_allowed(host, allowed_hosts):
        raise FetchRefused(f"host {host!r} is not on the allow-list ({', '.join(allowed_hosts)})")
    if parts.scheme == "http" and not _inside_allowed_networks(host, parts.port or 80, outbound):
        raise FetchRefused("plain http is refused; use https")


def _inside_allowed_networks(host: str, port: int, outbound: OutboundPolicy) -> bool:
    # Only decides the scheme; the connection itself is checked again when it is made.
    try:
        return all(outbound.operator_allowed(a) for a in outbound.resolve(host, port))
    except OSError:
        return False


def fetch_reference(
    url: str,
    *,
    allowed_hosts: Sequence[str] = DEFAULT_ALLOWED_HOSTS,
    max_bytes: int = 10 * 1024 * 1024,
    outbound: OutboundPolicy | None = None,
    timeout: float = 20.0,
) -> FetchedDocument:
    """Fetch `url` under the rules above, or raise FetchRefused with the reason.

    ``outbound`` is the operator's policy (public addresses only when None).
    """
    try:
        return _fetch(url, allowed_hosts, max_bytes, outbound or OutboundPolicy(), timeout)
    except OutboundRefused as exc:
        raise FetchRefused(f"refused by the outbound policy: {exc}") from None


def _fetch(
    url: str, allowed_hosts: Sequence[str], max_bytes: int, outbound: OutboundPolicy, timeout: float
) -> FetchedDocument:
    original = url
    url = normalize_url(url)
    with httpx.Client(
        timeout=timeout,
        follow_redirects=False,
        headers={"Accept-Encoding": "identity"},
        transport=PinnedTransport(outbound),
    ) as client:
        for _hop in range(MAX_REDIRECTS + 1):
            _check_url(url, allowed_hosts, outbound)
            with client.stream("GET", url) as response:
                if response.is_redirect:
                    location = response.headers.get("location", "")
                    if not location:
                        raise FetchRefused(f"{url} redirected without a Location")
                    url = normalize_url(urljoin(url, location))
                    continue
                if response.status_code != 200:
                    raise FetchRefused(f"{url} answered HTTP {response.status_code}")
                declared = response.headers.get("content-length")
                if declared and declared.isdigit() and int(declared) > max_bytes:
                    raise FetchRefused(f"{url} is {int(declared):,} bytes; the limit is {max_bytes:,}")
                body = bytearray()
                for chunk in response.iter_bytes():
                    body.extend(chunk)
                    # One byte past the limit is enough to know it is too large.
                    if len(body) > max_bytes:
                        raise FetchRefused(
                            f"{url} is larger than the limit of {max_bytes:,} bytes; refused, not cut"
                        )
                data = bytes(body)
                return FetchedDocument(
                    url=original,
                    final_url=url,
                    content=data,
                    sha256=hashlib.sha256(data).hexdigest(),
                    bytes=len(data),
                    lines=count_lines(data),
                    content_type=response.headers.get("content-type", ""),
                )
    raise FetchRefused(f"more than {MAX_REDIRECTS} redirects")
