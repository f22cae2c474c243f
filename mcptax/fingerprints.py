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
from collections.abc import Callable, Hashable, Iterable, Mapping
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


def _head(text: str, size: int, make: Callable[[str], bytes]) -> bytes:
    """The first ``size`` bytes of ``make(text)``, computed over as short a prefix as gives them.

    ``make`` must map a prefix of the text to a prefix of ``make(text)`` give or take its last
    character (normalizing CRLF and collapsing whitespace do), so a longer result is exact.
    """
    span = 4 * size
    while span < len(text):
        part = make(text[:span])
        if len(part) > size:
            return part[:size]
        span *= 4
    return make(text)[:size]


def _tail(text: str, size: int, make: Callable[[str, bool], bytes]) -> bytes:
    """The last ``size`` bytes of ``make(text, True)``, over as short a suffix as gives them;
    ``make(suffix, False)`` must be a suffix of ``make(text, True)`` (a suffix is not the text's
    start, so a byte-order mark there is content, not a mark to drop)."""
    span = 4 * size
    while span < len(text):
        part = make(text[-span:], False)
        if len(part) > size:
            return part[-size:]
        span *= 4
    return make(text, True)[-size:]


def _normalized(text: str) -> bytes:
    return _utf8(normalize(text))


def _normalized_stripped(text: str, start: bool) -> bytes:
    return _utf8((normalize(text) if start else text.replace("\r\n", "\n")).rstrip())


def _collapsed(text: str, start: bool = True) -> bytes:
    return _utf8(" ".join((text.removeprefix("\ufeff") if start else text).split()))


def fingerprints(text: str, sha256: str | None = None) -> dict[str, str]:
    """All fingerprint keys of ``text`` as ``{kind: hex sha256}``, kinds as in :data:`KINDS`.

    Only the ends of a long text are normalized (the keys are the same as over the whole text);
    ``sha256``, when the caller knows the text's, saves hashing it again.
    """
    head = _head(text, HEAD_BYTES, _normalized)
    return {
        "sha256": sha256 or _sha256(_utf8(text)),
        "head": _sha256(head),
        "tail": _sha256(_tail(text, TAIL_BYTES, _normalized_stripped)),
        "head_ws": _sha256(_head(text, HEAD_BYTES, _collapsed)),
        "tail_ws": _sha256(_tail(text, TAIL_BYTES, _collapsed)),
        "head_short": _sha256(head[:HEAD_SHORT_BYTES]),
    }


def candidate_keys(text: str, sha256: str | None = None) -> list[tuple[str, str]]:
    """The ``(kind, value)`` pairs to look up for a paste, strongest kind first."""
    return list(fingerprints(text, sha256).items())


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
