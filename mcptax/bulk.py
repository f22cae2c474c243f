"""Bulk arguments of a ``tools/call`` and their figures (docs/definitions.md). Pure Python, no Django.

A bulk argument is, at any depth of the arguments:
- a string of at least 1,024 UTF-8 bytes;
- any string (even empty) directly under a content-like key (``text``, ``content``, ``body`` ...,
  compared case-insensitively);
- an array of at least 100 elements (figures over ``canonical(array)``; its elements are not
  searched further, so one pasted array is one bulk argument, not a hundred);
- a redacted value ``{"$digest": {...}}``: figures come from the digest, the content is unknown.

Each is addressed by an RFC 6901 JSON pointer from the arguments object (``/files/0/text``).

``lines`` = number of ``"\\n"`` in the text, plus 1 if the text is non-empty and does not end with
``"\\n"`` (so ``""`` -> 0, ``"a"`` -> 1, ``"a\\n"`` -> 1, ``"a\\nb"`` -> 2). A lone ``"\\r"`` is
not a line break.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcptax import tokens
from mcptax.fastjson import canonical_bytes
from mcptax.formats.records import sha256_hex, utf8

BULK_STRING_MIN_BYTES = 1024
BULK_ARRAY_MIN_ELEMENTS = 100
CONTENT_KEYS = frozenset(
    {
        "text",
        "content",
        "body",
        "markdown",
        "code",
        "csv",
        "data",
        "source",
        "document",
        "html",
        "json",
        "yaml",
    }
)
# Ordered by how surely the key names a fetchable reference.
REFERENCE_KEYS: tuple[str, ...] = (
    "url",
    "uri",
    "source_url",
    "file_url",
    "href",
    "path",
    "file_path",
    "filepath",
    "file",
    "filename",
    "source_path",
    "document_url",
    "document_path",
)
EXPECTED_HASH_KEYS: tuple[str, ...] = ("expected_sha256", "sha256")
DIGEST_KEY = "$digest"
# Bulk arguments are always counted in cl100k_base (docs/definitions.md), whatever the team's encodings.
TOKEN_ENCODING = "cl100k_base"

_SHA256_RE = re.compile(r"^[0-9a-fA-F]{64}$")


@functools.cache
def _counter() -> Callable[[str], int]:
    return tokens.counter(TOKEN_ENCODING)


def count_tokens(text: str) -> int:
    """cl100k_base tokens of ``text``; special-token text such as ``<|endoftext|>`` is ordinary text.
    Lone surrogates are counted as tiktoken counts them (each replaced by U+FFFD)."""
    return _counter()(text)


def count_lines(content: str | bytes) -> int:
    """Number of ``\\n`` plus one for a non-empty unterminated last line (see module docstring),
    of text or of its UTF-8 bytes (the same figure either way)."""
    if isinstance(content, bytes):
        return content.count(b"\n") + (1 if content and not content.endswith(b"\n") else 0)
    return content.count("\n") + (1 if content and not content.endswith("\n") else 0)


@dataclass(frozen=True)
class Figures:
    """What is reported about a piece of content."""

    bytes: int
    lines: int
    sha256: str
    tokens: int
    ends_with_newline: bool
    crlf_count: int


def text_figures(text: str, data: bytes | None = None) -> Figures:
    """Figures of a text exactly as a server would process it (sha256 as ``shasum -a 256``).

    ``data``: ``utf8(text)`` when the caller has it already (not encoded twice)."""
    if data is None:
        data = utf8(text)
    return Figures(
        bytes=len(data),
        lines=count_lines(text),
        sha256=sha256_hex(data),
        tokens=count_tokens(text),
        ends_with_newline=text.endswith("\n"),
        crlf_count=text.count("\r\n"),
    )


@dataclass(frozen=True)
class BulkArg:
    """One bulk argument. ``content`` is the text the figures are over (None when redacted)."""

    pointer: str
    kind: str  # "string" | "array" | "digest"
    bytes: int | None
    lines: int | None
    sha256: str | None
    tokens: int | None
    ends_with_newline: bool | None
    crlf_count: int | None
    elements: int | None = None
    content: str | None = None

    @property
    def content_known(self) -> bool:
        return self.content is not None

    @property
    def key(self) -> str:
        """The last pointer segment, unescaped (the argument's own name)."""
        last = self.pointer.rsplit("/", 1)[-1]
        return last.replace("~1", "/").replace("~0", "~")


def escape_pointer_token(token: str) -> str:
    """RFC 6901: ``~`` -> ``~0`` then ``/`` -> ``~1``."""
    return token.replace("~", "~0").replace("/", "~1")


def resolve_pointer(document: Any, pointer: str) -> Any:
    """The value at an RFC 6901 pointer; raises KeyError/IndexError when absent."""
    if pointer == "":
        return document
    value = document
    for raw in pointer.split("/")[1:]:
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, list):
            value = value[int(token)]
        elif isinstance(value, dict):
            value = value[token]
        else:
            raise KeyError(pointer)
    return value


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _digest_arg(pointer: str, digest: dict[str, Any]) -> BulkArg:
    sha = digest.get("sha256")
    ewn = digest.get("ends_with_newline")
    return BulkArg(
        pointer=pointer,
        kind="digest",
        bytes=_int_or_none(digest.get("bytes")),
        lines=_int_or_none(digest.get("lines")),
        sha256=sha.lower() if isinstance(sha, str) and _SHA256_RE.match(sha) else None,
        tokens=_int_or_none(digest.get("tokens")),
        ends_with_newline=ewn if isinstance(ewn, bool) else None,
        crlf_count=_int_or_none(digest.get("crlf_count")),
        elements=_int_or_none(digest.get("elements")),
        content=None,
    )


def _figures_arg(
    pointer: str, kind: str, text: str, elements: int | None = None, data: bytes | None = None
) -> BulkArg:
    figures = text_figures(text, data)
    return BulkArg(
        pointer=pointer,
        kind=kind,
        bytes=figures.bytes,
        lines=figures.lines,
        sha256=figures.sha256,
        tokens=figures.tokens,
        ends_with_newline=figures.ends_with_newline,
        crlf_count=figures.crlf_count,
        elements=elements,
        content=text,
    )


def is_digest(value: Any) -> bool:
    """A redacted log's stand-in for a bulk value: exactly ``{"$digest": {...}}``."""
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get(DIGEST_KEY), dict)


def find_bulk_arguments(arguments: dict[str, Any]) -> list[BulkArg]:
    """Every bulk argument in ``arguments``, in document order (see module docstring)."""
    found: list[BulkArg] = []
    if not isinstance(arguments, dict):
        return found
    # Iterative walk: arguments come from untrusted logs and may nest deeply.
    stack: list[tuple[str, str | None, Any]] = [
        (f"/{escape_pointer_token(k)}", k, v) for k, v in reversed(list(arguments.items()))
    ]
    while stack:
        pointer, key, value = stack.pop()
        if isinstance(value, str):
            content_key = key is not None and key.lower() in CONTENT_KEYS
            # A character is 1 to 4 UTF-8 bytes: most strings are settled without encoding them.
            if content_key or len(value) >= BULK_STRING_MIN_BYTES:
                found.append(_figures_arg(pointer, "string", value))
            elif len(value) * 4 >= BULK_STRING_MIN_BYTES:
                data = utf8(value)
                if len(data) >= BULK_STRING_MIN_BYTES:
                    found.append(_figures_arg(pointer, "string", value, data=data))
        elif is_digest(value):
            found.append(_digest_arg(pointer, value[DIGEST_KEY]))
        elif isinstance(value, list):
            if len(value) >= BULK_ARRAY_MIN_ELEMENTS:
                data = canonical_bytes(value)
                text = data.decode("utf-8", "surrogatepass")
                found.append(_figures_arg(pointer, "array", text, elements=len(value), data=data))
            else:
                stack.extend((f"{pointer}/{i}", None, v) for i, v in reversed(list(enumerate(value))))
        elif isinstance(value, dict):
            stack.extend(
                (f"{pointer}/{escape_pointer_token(k)}", k, v) for k, v in reversed(list(value.items()))
            )
    return found


def find_reference(arguments: dict[str, Any]) -> tuple[str, str] | None:
    """The first reference (``url``, ``uri``, ``path`` ...) among the top-level arguments.

    Only non-empty strings count. Keys are compared case-insensitively; the most specific kind of
    reference wins (a URL over a path) regardless of argument order.
    """
    if not isinstance(arguments, dict):
        return None
    lowered = {k.lower(): (k, v) for k, v in arguments.items() if isinstance(k, str)}
    for name in REFERENCE_KEYS:
        hit = lowered.get(name)
        if hit is not None and isinstance(hit[1], str) and hit[1].strip():
            return hit[0], hit[1]
    return None


def is_reference_call(arguments: dict[str, Any]) -> bool:
    """docs/definitions.md: a reference and no bulk argument."""
    return find_reference(arguments) is not None and not find_bulk_arguments(arguments)


def expected_sha256_of(arguments: dict[str, Any], meta: dict[str, Any] | None) -> str | None:
    """The caller's stated expectation: ``expected_sha256`` or ``sha256`` in the arguments, then in
    ``_meta``; lowercase hex, or None. Values that are not 64 hex digits are not expectations."""
    for source in (arguments, meta):
        if not isinstance(source, dict):
            continue
        for key in EXPECTED_HASH_KEYS:
            value = source.get(key)
            if isinstance(value, str) and _SHA256_RE.match(value.strip()):
                return value.strip().lower()
    return None


__all__ = [
    "BULK_ARRAY_MIN_ELEMENTS",
    "BULK_STRING_MIN_BYTES",
    "CONTENT_KEYS",
    "BulkArg",
    "Figures",
    "count_lines",
    "count_tokens",
    "expected_sha256_of",
    "find_bulk_arguments",
    "find_reference",
    "is_digest",
    "is_reference_call",
    "resolve_pointer",
    "text_figures",
]
