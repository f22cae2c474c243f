"""The operator's outbound policy (``OUTBOUND_ALLOW_NETWORKS``) for every request the product makes
on a user's behalf, and the check forms run at save time. The policy itself is
``mcptax.outbound``; this module only reads the setting."""

from __future__ import annotations

import functools

from django.conf import settings

from mcptax.outbound import OutboundPolicy, OutboundRefused


def policy() -> OutboundPolicy:
    """Public addresses, plus the networks the operator allows (the setting is read at each call,
    so a test or a settings override applies at once; the policy built of it is kept: a poll
    asks for it twice)."""
    return _policy(tuple(settings.OUTBOUND_ALLOW_NETWORKS))


@functools.lru_cache(maxsize=8)
def _policy(entries: tuple[str, ...]) -> OutboundPolicy:
    return OutboundPolicy.from_entries(entries)


def url_problem(url: str) -> str | None:
    """Why a URL a user gives may not be used (its host resolves inward), or None.

    A host that does not resolve now passes: the same policy decides again at every connection,
    since DNS answers change.
    """
    try:
        policy().check_url(url)
    except OutboundRefused as exc:
        return str(exc)
    return None
