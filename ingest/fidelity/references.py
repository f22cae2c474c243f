"""Registering reference documents: by upload or by URL, then re-judging what they explain.

A document is kept once per (team, sha256) with its figures (bytes, lines, tokens, final newline,
CRLF count) and its head/tail fingerprints (``ReferenceFingerprint``, one row per kind), so a
paste is tied to it by indexed lookups. Registering re-judges the verdicts it can now decide
(``ingest.fidelity.verdicts.rejudge_for_document``), and the rollups move with them.

URL registration goes through ``ingest.fidelity.fetch.fetch_reference`` under the operator's settings:
``REFERENCE_ALLOWED_HOSTS`` (GitHub by default; ``github.com/.../blob/...`` becomes the raw file),
``REFERENCE_MAX_BYTES`` (over the limit is refused, never cut) and the outbound policy
(``OUTBOUND_ALLOW_NETWORKS``: inward addresses refused unless their network is allowed).
"""

from __future__ import annotations

import posixpath
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.db import IntegrityError, transaction

from dashboard import outbound
from dashboard.teams.models import Team
from dashboard.teams.validators import one_line
from ingest.fidelity import verdicts
from ingest.fidelity.fetch import FetchRefused, fetch_reference
from ingest.fidelity.models import ReferenceDocument, ReferenceFingerprint
from mcptax.bulk import text_figures
from mcptax.fingerprints import fingerprints


class ReferenceRefused(ValueError):
    """The document cannot be registered; the message says why (shown to the user as is)."""


def max_bytes() -> int:
    return int(settings.REFERENCE_MAX_BYTES)


def _decode(data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReferenceRefused(f"not UTF-8 text (invalid byte at offset {exc.start})") from None
    if "\x00" in text:
        raise ReferenceRefused("the file contains NUL characters; only text documents can be references")
    return text


def _store(
    team: Team, text: str, *, name: str, source: str, url: str = "", fetched_url: str = "", user: Any = None
) -> tuple[ReferenceDocument, bool]:
    figures = text_figures(text)
    existing = ReferenceDocument.objects.filter(team=team, sha256=figures.sha256).first()
    if existing is not None:
        return existing, False
    try:
        with transaction.atomic():
            document = ReferenceDocument.objects.create(
                team=team,
                # A default taken from a file name or URL may carry what a typed name may not.
                name=one_line(name)[:300] or figures.sha256[:12],
                source=source,
                url=url[:2000],
                fetched_url=fetched_url[:2000],
                sha256=figures.sha256,
                bytes=figures.bytes,
                lines=figures.lines,
                tokens=figures.tokens,
                ends_with_newline=figures.ends_with_newline,
                crlf_count=figures.crlf_count,
                text=text,
                created_by=user if getattr(user, "is_authenticated", False) else None,
            )
            ReferenceFingerprint.objects.bulk_create(
                [
                    ReferenceFingerprint(document=document, team=team, kind=kind, value=value)
                    for kind, value in fingerprints(text).items()
                ]
            )
    except IntegrityError:
        # Registered concurrently by someone else: theirs is the same document.
        return ReferenceDocument.objects.get(team=team, sha256=figures.sha256), False
    return document, True


def register_upload(
    team: Team, data: bytes, *, name: str, user: Any = None, rejudge: bool = True
) -> tuple[ReferenceDocument, bool]:
    """Register uploaded bytes; returns ``(document, created)``. Raises ReferenceRefused.

    With ``rejudge`` (the default) the affected verdicts are recomputed before returning; pages
    that prefer to answer at once pass False and call ``verdicts.queue_rejudge(document, enqueue)``.
    """
    if len(data) > max_bytes():
        raise ReferenceRefused(f"the file is {len(data):,} bytes; the limit is {max_bytes():,}")
    document, created = _store(
        team, _decode(data), name=posixpath.basename(name or "") or "upload", source="upload", user=user
    )
    if created and rejudge:
        verdicts.rejudge_for_document(document)
    return document, created


def register_url(
    team: Team, url: str, *, name: str = "", user: Any = None, rejudge: bool = True
) -> tuple[ReferenceDocument, bool]:
    """Fetch ``url`` under the operator's rules and register it. Raises ReferenceRefused."""
    try:
        fetched = fetch_reference(
            url,
            allowed_hosts=list(settings.REFERENCE_ALLOWED_HOSTS),
            max_bytes=max_bytes(),
            outbound=outbound.policy(),
        )
    except FetchRefused as exc:
        raise ReferenceRefused(str(exc)) from None
    except (httpx.HTTPError, OSError) as exc:
        raise ReferenceRefused(f"could not fetch {url}: {exc}") from None
    default_name = (
        posixpath.basename(urlsplit(fetched.final_url).path) or urlsplit(fetched.final_url).hostname
    )
    document, created = _store(
        team,
        _decode(fetched.content),
        name=name or default_name or url,
        source=ReferenceDocument.Source.URL,
        url=url.strip(),
        fetched_url=fetched.final_url,
        user=user,
    )
    if created and rejudge:
        verdicts.rejudge_for_document(document)
    return document, created


def remove_document(document: ReferenceDocument) -> int:
    """Delete a document and re-judge the verdicts that relied on it; returns how many changed."""
    team, sha = document.team, document.sha256
    document.delete()
    return verdicts.rejudge_without_document(team, sha)
