"""Where and how much two texts differ: the first differing byte, a bounded-cost similarity
estimate, and the drill-down excerpt around a difference with invisible characters made visible.
Pure functions used by the verdict rules (:mod:`mcptax.verdict_rules`) and the drill-down page."""

from __future__ import annotations

import re
from collections import Counter
from difflib import SequenceMatcher
from typing import Any

from mcptax.formats.records import utf8

# Below this many characters on both sides the changed middle is compared with difflib
# (Ratcliff/Obershelp, worst case about 0.1 s at this size); above it a linear estimate is used.
EXACT_SIMILARITY_MAX_CHARS = 1000

_TOKEN_RE = re.compile(r"\w+|\s+|[^\w\s]")


def common_prefix_length(a: str, b: str) -> int:
    """Length in characters of the longest common prefix.

    Binary search over slice comparisons: each comparison is a C memcmp, so 1 MB strings cost
    about 20 linear passes instead of a million Python-level steps.
    """
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def common_suffix_length(a: str, b: str, limit: int | None = None) -> int:
    """Length of the longest common suffix, at most ``limit`` (to keep it off a shared prefix)."""
    high = min(len(a), len(b)) if limit is None else min(len(a), len(b), limit)
    low = 0
    while low < high:
        mid = (low + high + 1) // 2
        if a[len(a) - mid :] == b[len(b) - mid :]:
            low = mid
        else:
            high = mid - 1
    return low


def first_diff_offset(a: str, b: str) -> int | None:
    """UTF-8 byte offset of the first differing character, ``None`` when equal.

    When one string is a prefix of the other the offset is the shorter one's length.
    """
    if a == b:
        return None
    return len(utf8(a[: common_prefix_length(a, b)]))


def similarity(a: str, b: str) -> float:
    """An estimate of ``difflib.SequenceMatcher(None, a, b).ratio()`` with bounded cost.

    ``2 * M / (len(a) + len(b))`` where ``M`` counts matching characters: the common prefix,
    the common suffix, and in the changed middle either difflib's matching blocks (when both
    middles are at most :data:`EXACT_SIMILARITY_MAX_CHARS` characters) or, for larger middles,
    the characters of word/space/punctuation tokens the two middles share as a multiset. The
    multiset part ignores order (like ``quick_ratio``), so it can overestimate for reordered
    text; it is linear in the input, so a 1 MB copy costs milliseconds.
    """
    total = len(a) + len(b)
    if total == 0:
        return 1.0
    prefix = common_prefix_length(a, b)
    suffix = common_suffix_length(a, b, limit=min(len(a), len(b)) - prefix)
    middle_a = a[prefix : len(a) - suffix]
    middle_b = b[prefix : len(b) - suffix]
    if not middle_a or not middle_b:
        matched_middle = 0
    elif len(middle_a) <= EXACT_SIMILARITY_MAX_CHARS and len(middle_b) <= EXACT_SIMILARITY_MAX_CHARS:
        matcher = SequenceMatcher(None, middle_a, middle_b, autojunk=False)
        matched_middle = sum(block.size for block in matcher.get_matching_blocks())
    else:
        shared = Counter(_TOKEN_RE.findall(middle_a)) & Counter(_TOKEN_RE.findall(middle_b))
        matched_middle = sum(len(token) * count for token, count in shared.items())
    return min(1.0, 2.0 * (prefix + suffix + matched_middle) / total)


# --- drill-down

_VISIBLE = {
    "\n": "↵\n",  # keep the real newline so a <pre> block keeps its line layout
    "\r": "⟨CR⟩",  # not U+240D: the system fonts of many machines have no glyph for it
    "\t": "→",
    "\u00a0": "⍽",
    "\u200b": "⟨ZWSP⟩",
    "\u200c": "⟨ZWNJ⟩",
    "\u200d": "⟨ZWJ⟩",
    "\u2028": "⟨LS⟩",
    "\u2029": "⟨PS⟩",
    "\ufeff": "⟨BOM⟩",
    "\x7f": "␡",
}


def show_invisible(text: str) -> str:
    """``text`` with line endings, tabs, control and zero-width characters made visible."""
    out = []
    for char in text:
        if char in _VISIBLE:
            out.append(_VISIBLE[char])
        elif ord(char) < 0x20:
            out.append(chr(0x2400 + ord(char)))  # the Unicode "control pictures" block
        else:
            out.append(char)
    return "".join(out)


def _char_index(text: str, byte_offset: int) -> int:
    """The index of the character that contains ``byte_offset`` of ``utf8(text)``."""
    raw = utf8(text)
    byte_offset = max(0, min(byte_offset, len(raw)))
    # Step back over UTF-8 continuation bytes (0b10xxxxxx) to the start of the character.
    while byte_offset < len(raw) and byte_offset > 0 and raw[byte_offset] & 0xC0 == 0x80:
        byte_offset -= 1
    return len(raw[:byte_offset].decode("utf-8", "surrogatepass"))


def diff_context(arrived: str, expected: str, offset: int, radius: int = 80) -> dict[str, Any]:
    """Text around byte ``offset`` of both sides, with invisible characters made visible.

    For the drill-down page; pass canonical JSON for arrays. ``offset`` is a UTF-8 byte offset
    (``Verdict.first_diff_offset``); an offset inside a character snaps to its start. Returns
    ``{"offset", "radius", "expected": side, "arrived": side}`` where each side is
    ``{"char_offset", "before", "after", "more_before", "more_after", "at_end"}``: ``before`` and
    ``after`` are the ``radius`` characters either side (made visible), the ``more_*`` flags say
    whether text was cut off there, and ``at_end`` whether the text ends at ``offset`` (which is
    what a missing final newline or a truncation looks like).
    """

    def side(text: str) -> dict[str, Any]:
        index = _char_index(text, offset)
        start, end = max(0, index - radius), min(len(text), index + radius)
        return {
            "char_offset": index,
            "before": show_invisible(text[start:index]),
            "after": show_invisible(text[index:end]),
            "more_before": start > 0,
            "more_after": end < len(text),
            "at_end": index >= len(text),
        }

    return {"offset": offset, "radius": radius, "expected": side(expected), "arrived": side(arrived)}
