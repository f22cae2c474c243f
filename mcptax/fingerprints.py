"""Head/tail fingerprints: find the registered reference document a paste was copied from.

A paste that is not an exact copy has a different sha256, so the exact-hash lookup misses it.
These fingerprints hash only the *ends* of a text, after normalizations that undo the common
kinds of copy damage, so a damaged copy still shares at least one key with its original:

=============  ===========================================================================
kind           value (hex sha256 of ...)
=============  ===========================================================================
``sha256``     the whole text's UTF-8 bytes, as is (the exact match)
``head``       the first 256 bytes of the text after normalization (see below)
``tail``       the last 256 bytes of the normalized text with trailing whitespace stripped
``head_ws``    the first 256 bytes after collapsing every whitespace run to one space and
               stripping both ends
``tail_ws``    the last 256 bytes of that whitespace-collapsed text
``head_short`` the first 64 bytes of the normalized text
=============  ===========================================================================

Normalization = drop a leading byte-order mark, then CRLF→LF. A text shorter than a window is
hashed whole, so a short key can only match a document that is itself that short.

What it finds (the copy shares at least one key with the document):

- exact copies (``sha256``);
- a final newline added or dropped (``head``; ``tail`` since trailing whitespace is stripped);
- CRLF↔LF conversion (``head``, ``tail``), lone-CR or tab/space changes (``head_ws``/``tail_ws``);
- whitespace re-indentation, trailing spaces stripped, leading blank lines dropped (``*_ws``);
- truncated copies at least 256 bytes long (``head``) or 64 bytes long (``head_short``);
- edits anywhere outside the first 256 and the last 256 bytes (``head`` and ``tail``);
- edits in one end only (the other end's key).

What it cannot find: a copy changed (other than in whitespace) both within its first 256
bytes and within its last 256 bytes — e.g. text prepended (a "Here is the file:" preamble)
*and* a truncation, or a change near the start of a truncated copy, or Unicode re-encoding
throughout (NFC↔NFD, smart quotes made ASCII, escaped characters); a truncated copy shorter than
64 bytes of a longer document; a document shorter than 64 bytes edited anywhere. A hit is a
*candidate*: the caller confirms it with ``mcptax.verdict_rules.judge_copy`` (and should prefer the candidate
matching the most, strongest keys: see :func:`rank_candidates`).

Storing and looking up: keep one row per (document, kind) with ``value`` a 64-character
column and an index on ``(kind, value)``; :func:`candidate_keys` gives the pairs to look up, so
the lookup is ``OR`` of indexed equalities (``Q(kind=k, value=v) | ...``), never a scan. A
single-column design works the same with :func:`lookup_key` strings (``"head:<hex>"``) and
``key__in=[...]``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Iterable, Mapping
from typing import TypeVar

HEAD_BYTES = 256
TAIL_BYTES = 256
HEAD_SHORT_BYTES = 64

# Strongest first; the weights rank candidate documents when a paste matches several (a
# 64-byte head is shared by many documents with the same boilerplate, an exact hash by none).
KIND_WEIGHTS: dict[str, int] = {
    "sha256": 100,
    "head": 8,
    "tail": 8,
    "head_ws": 4,
    "tail_ws": 4,
    "head_short": 1,
}
KINDS: tuple[str, ...] = tuple(KIND_WEIGHTS)

_K = TypeVar("_K", bound=Hashable)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _utf8(text: str) -> bytes:
    # surrogatepass: a lone surrogate from a JSON escape must not make fingerprinting fail.
    return text.encode("utf-8", "surrogatepass")


def normalize(text: str) -> str:
    """Drop a leading BOM and turn CRLF into LF (the damage every key should ignore)."""
    return text.removeprefix("\ufeff").replace("\r\n", "\n")


def fingerprints(text: str) -> dict[str, str]:
    """All fingerprint keys of ``text`` as ``{kind: hex sha256}``, kinds as in :data:`KINDS`."""
    normal_text = normalize(text)
    normalized = _utf8(normal_text)
    stripped = _utf8(normal_text.rstrip())
    collapsed = _utf8(" ".join(text.removeprefix("\ufeff").split()))
    return {
        "sha256": _sha256(_utf8(text)),
        "head": _sha256(normalized[:HEAD_BYTES]),
        "tail": _sha256(stripped[-TAIL_BYTES:]),
        "head_ws": _sha256(collapsed[:HEAD_BYTES]),
        "tail_ws": _sha256(collapsed[-TAIL_BYTES:]),
        "head_short": _sha256(normalized[:HEAD_SHORT_BYTES]),
    }


def candidate_keys(text: str) -> list[tuple[str, str]]:
    """The ``(kind, value)`` pairs to look up for a paste, strongest kind first."""
    return list(fingerprints(text).items())


def lookup_key(kind: str, value: str) -> str:
    """One-column form of a key, for a design that indexes a single ``key`` column."""
    return f"{kind}:{value}"


def match_score(kinds: Iterable[str]) -> int:
    """How strongly a set of matched kinds ties a paste to a document."""
    return sum(KIND_WEIGHTS[kind] for kind in set(kinds))


def rank_candidates(matches: Mapping[_K, Iterable[str]]) -> list[_K]:
    """Candidate documents ordered best first, given the kinds each one matched.

    Ties keep the mapping's order, so the caller can pre-sort by e.g. newest document.
    """
    scored = [(match_score(kinds), index, doc) for index, (doc, kinds) in enumerate(matches.items())]
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [doc for _, _, doc in scored]
