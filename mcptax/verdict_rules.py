"""Fidelity verdicts for bulk tool arguments (docs/definitions.md), as pure functions.

A verdict says how the copy an agent sent (*arrived*) relates to what it should have sent
(*expected*). The exact definitions used here, for strings ``a`` (arrived) and ``e``
(expected), with ``T`` the line terminators ``"\\r\\n"`` and ``"\\n"``:

``exact``
    The sha256 values agree (UTF-8 bytes for strings, canonical JSON for arrays). This is byte
    equality whatever the JSON type: a string holding an array's canonical JSON is exact.
``newline_only``
    One is the other plus one final line terminator: ``a == e + t`` or ``e == a + t`` for
    ``t`` in ``T``. Equivalently: equal after removing at most one trailing terminator from one
    side. (``"x\\n"`` against ``"x\\r\\n"`` is *not* newline_only: that is a line-ending change.)
``line_endings``
    Not newline_only, but after CRLF→LF in both they are equal or newline_only. So every
    difference is in the line terminators: their style, plus possibly the presence of the
    final one. A lone ``"\\r"`` (classic Mac) is not treated as a line ending.
``whitespace_only``
    Equal after collapsing every run of whitespace (``str.split`` semantics, Unicode aware) to
    one space and stripping both ends. Inserting whitespace between two non-space characters
    (``"ab"`` → ``"a b"``) is therefore not whitespace_only.
``truncated``
    ``a`` is a strict prefix of ``e`` — or ``a`` minus one final terminator is, since an
    agent that stops early often still closes its last line. ``kept_bytes`` is the length of
    that prefix. A prefix whose missing rest is only whitespace gets an earlier verdict
    (newline_only / whitespace_only) by precedence. Arrays are never ``truncated``.
``elements_dropped``
    Arrays: ``a`` has fewer elements and is a subsequence (a prefix being the usual case) of
    ``e``, elements compared by canonical JSON.
``mutated``
    Both contents known and none of the above. ``first_diff_offset`` is the UTF-8 byte offset
    of the first differing character (canonical JSON for arrays) and ``similarity`` an estimate
    in 0..1, see :func:`similarity`.
``mismatch``
    The hashes differ, one side's content is unknown and no cheap hypothesis explains it.
``unverifiable``
    No expected hash.
``capture_truncated``
    The log's own copy was cut; wins over everything (never the agent's fault).
``no_content``
    "No content in telemetry": the log says the call happened but carries none of its arguments
    (an OpenTelemetry ``tool_result`` without the client's tool details). Like ``by_reference`` it
    is counted per call, not per bulk argument, and never blamed on the agent.

Precedence: exact, newline_only, line_endings, whitespace_only, truncated, elements_dropped,
mutated, mismatch — the first that holds wins.

When only hashes are known on one side, `judge_copy` tests cheap hypotheses instead of
comparing content: it transforms the known text (final newline added/removed, CRLF↔LF, the
two combined; and when the expected content is known but the arrived one is hash-only, also
the byte prefix of length ``arrived_bytes`` and the element prefix of matching canonical
size) and compares hashes. A hit gives the same verdict a content comparison would give, and
names the hypothesis in ``CopyVerdict.hypothesis``.

Strings are encoded as UTF-8 with ``surrogatepass`` so a lone surrogate that came out of a
JSON ``\\ud800`` escape still hashes instead of raising.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any, TypedDict

# canonical/utf8/sha256_hex are the same definitions the parsers hash with; re-exported here.
from mcptax.formats.records import canonical as canonical
from mcptax.formats.records import sha256_hex as sha256_hex
from mcptax.formats.records import utf8 as utf8
from mcptax.textdiff import first_diff_offset, similarity

EXACT = "exact"
NEWLINE_ONLY = "newline_only"
LINE_ENDINGS = "line_endings"
WHITESPACE_ONLY = "whitespace_only"
TRUNCATED = "truncated"
ELEMENTS_DROPPED = "elements_dropped"
MUTATED = "mutated"
MISMATCH = "mismatch"
UNVERIFIABLE = "unverifiable"
CAPTURE_TRUNCATED = "capture_truncated"
# Never produced by judge_copy(): the ingest layer counts reference calls under this name.
BY_REFERENCE = "by_reference"
# Never produced by judge_copy(): calls whose log carried no arguments (telemetry without details).
NO_CONTENT = "no_content"
VERDICT_LABELS: dict[str, str] = {NO_CONTENT: "no content in telemetry"}

# Precedence of the comparison verdicts (docs/definitions.md): the first that holds wins.
PRECEDENCE: tuple[str, ...] = (
    EXACT,
    NEWLINE_ONLY,
    LINE_ENDINGS,
    WHITESPACE_ONLY,
    TRUNCATED,
    ELEMENTS_DROPPED,
    MUTATED,
    MISMATCH,
)
VERDICTS: tuple[str, ...] = (*PRECEDENCE, UNVERIFIABLE, CAPTURE_TRUNCATED)
# (value, label) of every verdict, for a database field's choices ("newline_only": "Newline only").
CHOICES: tuple[tuple[str, str], ...] = tuple((v, v.replace("_", " ").capitalize()) for v in VERDICTS)
# Verdicts that are judgements of the agent (exact-match rates are over these), and those that lost
# content.
JUDGED: tuple[str, ...] = tuple(v for v in VERDICTS if v not in (UNVERIFIABLE, CAPTURE_TRUNCATED))
DAMAGED: tuple[str, ...] = (TRUNCATED, ELEMENTS_DROPPED)

# How bad each verdict is, for colouring and alerting: cosmetic copies still work for most
# consumers, damaged ones lost or changed content, unknown ones cannot be blamed on the agent.
SEVERITY: dict[str, str] = {
    EXACT: "ok",
    BY_REFERENCE: "ok",
    NEWLINE_ONLY: "cosmetic",
    LINE_ENDINGS: "cosmetic",
    WHITESPACE_ONLY: "cosmetic",
    TRUNCATED: "damaged",
    ELEMENTS_DROPPED: "damaged",
    MUTATED: "damaged",
    MISMATCH: "damaged",
    UNVERIFIABLE: "unknown",
    CAPTURE_TRUNCATED: "unknown",
    NO_CONTENT: "unknown",
}

_TERMINATORS = ("\r\n", "\n")

# A bulk value as it is hashed: a string, or an array hashed as its canonical JSON.
Content = str | list[Any]


class _StringEvidence(TypedDict):
    arrived_bytes: int
    expected_bytes: int
    first_diff_offset: int | None


class _ListEvidence(_StringEvidence):
    expected_elements: int
    arrived_elements: int
    first_diff_element: int


@dataclass
class CopyVerdict:
    """The verdict for one bulk argument and the evidence behind it.

    Evidence fields are ``None`` where they do not apply. ``expected_source`` is left for the
    caller to fill (e.g. ``"caller_sha256"``, ``"reference_doc"``).
    """

    verdict: str
    arrived_bytes: int
    expected_bytes: int | None = None
    expected_source: str | None = None
    kept_bytes: int | None = None
    expected_elements: int | None = None
    arrived_elements: int | None = None
    first_diff_offset: int | None = None
    first_diff_element: int | None = None
    similarity: float | None = None
    hypothesis: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def verdict_counts_order() -> tuple[str, ...]:
    """Every verdict name in display order for count tables (precedence, then the rest)."""
    return (*VERDICTS, BY_REFERENCE, NO_CONTENT)


def severity(verdict: str) -> str:
    """``ok``, ``cosmetic``, ``damaged`` or ``unknown`` for a verdict name."""
    return SEVERITY[verdict]


def content_bytes(value: Content) -> bytes:
    """The bytes a bulk value is hashed over: UTF-8 for a string, canonical JSON for an array."""
    if isinstance(value, str):
        return utf8(value)
    if isinstance(value, list):
        return utf8(canonical(value))
    raise TypeError(f"a bulk value is a str or a list, not {type(value).__name__}")


def content_sha256(value: Content) -> str:
    return sha256_hex(content_bytes(value))


# --- string relations --------------------------------------------------------------------


def _without_final_newline(text: str) -> list[str]:
    """``text`` minus a final ``\n`` and minus a final ``\r\n``, longest first.

    Both, because ``"x\r\n"`` is ``"x\r"`` plus ``"\n"`` as much as ``"x"`` plus ``"\r\n"``.
    """
    return [text[: -len(t)] for t in reversed(_TERMINATORS) if text.endswith(t)]


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n")


def _crlf(text: str) -> str:
    return _lf(text).replace("\n", "\r\n")


def _collapse_whitespace(text: str) -> str:
    return " ".join(text.split())


def is_newline_only(a: str, b: str) -> bool:
    """True when one string is the other plus a single final ``\\n`` or ``\\r\\n``."""
    if len(a) == len(b):
        return False
    longer, shorter = (a, b) if len(a) > len(b) else (b, a)
    return any(longer == shorter + t for t in _TERMINATORS)


def is_line_endings(a: str, b: str) -> bool:
    """True when the strings differ only in line terminators (and are not newline_only)."""
    if a == b or is_newline_only(a, b):
        return False
    la, lb = _lf(a), _lf(b)
    return la == lb or is_newline_only(la, lb)


def is_whitespace_only(a: str, b: str) -> bool:
    return a != b and _collapse_whitespace(a) == _collapse_whitespace(b)


def truncated_prefix(arrived: str, expected: str) -> str | None:
    """The part of ``arrived`` that is a strict prefix of ``expected``, if it is truncated."""
    for prefix in [arrived, *_without_final_newline(arrived)]:
        if len(prefix) < len(expected) and expected.startswith(prefix):
            return prefix
    return None


# --- hash hypotheses ---------------------------------------------------------------------

# Each hypothesis is named by what the *copy* did to the expected text. Generating from the
# expected side applies that change; generating from the arrived side applies its inverse.
_EOL_CHANGES: tuple[tuple[str, Callable[[str], str], Callable[[str], str]], ...] = (
    # (name, forward on expected, inverse on arrived)
    ("crlf_to_lf", _lf, _crlf),
    ("lf_to_crlf", _crlf, _lf),
)


def _newline_changes(from_arrived: bool) -> list[tuple[str, Callable[[str], list[str]]]]:
    def add(text: str) -> list[str]:
        return [text + t for t in reversed(_TERMINATORS)]

    # The copy added a newline, so from the arrived side the expected text is one without it.
    if from_arrived:
        return [("final_newline_added", _without_final_newline), ("final_newline_removed", add)]
    return [("final_newline_added", add), ("final_newline_removed", _without_final_newline)]


def text_hypotheses(text: str, *, from_arrived: bool) -> Iterator[tuple[str, str]]:
    """Yield ``(hypothesis, candidate_text)`` for the cheap copy-damage hypotheses.

    With ``from_arrived`` the candidates are possible *expected* texts given the arrived one,
    otherwise possible *arrived* texts given the expected one: final newline added or removed,
    CRLF→LF, LF→CRLF, and each line-ending change combined with a final-newline change. At most
    14 candidates, each one linear pass. Newline-only ones come first; candidates equal to
    ``text`` or to an earlier one are skipped.
    """
    seen = {text}
    newline_changes = _newline_changes(from_arrived)

    def newline_steps(base: str) -> list[tuple[str | None, str]]:
        return [(None, base)] + [
            (name, candidate) for name, change in newline_changes for candidate in change(base)
        ]

    eol_changes: list[tuple[str | None, Callable[[str], str]]] = [(None, lambda t: t)]
    eol_changes += [(name, inverse if from_arrived else forward) for name, forward, inverse in _EOL_CHANGES]
    for eol_name, eol_change in eol_changes:
        # A copy changes line endings, then the final newline; undoing it (from the arrived side)
        # goes the other way round, which matters when the newline removed was half a CRLF.
        if from_arrived:
            steps = [(name, eol_change(candidate)) for name, candidate in newline_steps(text)]
        else:
            steps = newline_steps(eol_change(text))
        for newline_name, candidate in steps:
            if candidate in seen:
                continue
            seen.add(candidate)
            yield "+".join(part for part in (eol_name, newline_name) if part), candidate


def _expected_from_hypotheses(arrived: Content, expected_sha256: str) -> tuple[str, str] | None:
    """``(hypothesis, expected_text)`` when a cheap hypothesis on ``arrived`` hits the hash."""
    if not isinstance(arrived, str):
        return None
    for name, candidate in text_hypotheses(arrived, from_arrived=True):
        if sha256_hex(utf8(candidate)) == expected_sha256:
            return name, candidate
    return None


def _element_prefix_count(expected: list[Any], arrived_bytes: int) -> int | None:
    """The k < len(expected) whose canonical ``expected[:k]`` is ``arrived_bytes`` long, if any."""
    # "[" + elements joined by "," + "]" grows strictly with k, so at most one k fits.
    if arrived_bytes == 2:
        return 0
    size = 1
    for count, element in enumerate(expected[:-1], start=1):
        size += len(utf8(canonical(element))) + (1 if count > 1 else 0)
        if size + 1 >= arrived_bytes:
            return count if size + 1 == arrived_bytes else None
    return None


def _arrived_from_hypotheses(
    expected: Content, arrived_sha256: str, arrived_bytes: int
) -> tuple[str, Content] | None:
    """``(hypothesis, arrived_content)`` when a cheap hypothesis on ``expected`` hits the hash."""
    if isinstance(expected, list):
        count = _element_prefix_count(expected, arrived_bytes)
        if count is not None and content_sha256(expected[:count]) == arrived_sha256:
            return "element_prefix", expected[:count]
        return None
    for name, candidate in text_hypotheses(expected, from_arrived=False):
        if sha256_hex(utf8(candidate)) == arrived_sha256:
            return name, candidate
    expected_raw = utf8(expected)
    # A strict byte prefix, plain or with its last line closed by the agent after it stopped
    # early: the closed one can be as long as the expected text, or longer ("ab\r\n" for "abc").
    tries = [("prefix", expected_raw[:arrived_bytes])] if arrived_bytes < len(expected_raw) else []
    for terminator in _TERMINATORS:
        kept = arrived_bytes - len(terminator)
        if 0 <= kept < len(expected_raw):
            tries.append(("prefix+final_newline_added", expected_raw[:kept] + terminator.encode()))
    for name, candidate_raw in tries:
        if sha256_hex(candidate_raw) == arrived_sha256:
            # The arrived hash is over valid UTF-8, so a hit decodes.
            return name, candidate_raw.decode("utf-8", "surrogatepass")
    return None


# --- content comparison ------------------------------------------------------------------


def _judge_strings(arrived: str, expected: str, arrived_bytes: int, expected_bytes: int) -> CopyVerdict:
    base: _StringEvidence = {
        "arrived_bytes": arrived_bytes,
        "expected_bytes": expected_bytes,
        "first_diff_offset": first_diff_offset(arrived, expected),
    }
    if is_newline_only(arrived, expected):
        return CopyVerdict(NEWLINE_ONLY, **base)
    if is_line_endings(arrived, expected):
        return CopyVerdict(LINE_ENDINGS, **base)
    if is_whitespace_only(arrived, expected):
        return CopyVerdict(WHITESPACE_ONLY, **base)
    prefix = truncated_prefix(arrived, expected)
    if prefix is not None:
        return CopyVerdict(TRUNCATED, **base, kept_bytes=len(utf8(prefix)))
    return CopyVerdict(MUTATED, **base, similarity=round(similarity(arrived, expected), 6))


def _is_subsequence(short: list[str], long: list[str]) -> bool:
    remaining = iter(long)
    return all(any(item == other for other in remaining) for item in short)


def _judge_lists(
    arrived: list[Any], expected: list[Any], arrived_bytes: int, expected_bytes: int
) -> CopyVerdict:
    arrived_items = [canonical(item) for item in arrived]
    expected_items = [canonical(item) for item in expected]
    # The offset is into the canonical JSON text, so diff_context can show it like a string.
    arrived_text, expected_text = canonical(arrived), canonical(expected)
    first_element = next(
        (i for i, (x, y) in enumerate(zip(arrived_items, expected_items, strict=False)) if x != y),
        min(len(arrived_items), len(expected_items)),
    )
    base: _ListEvidence = {
        "arrived_bytes": arrived_bytes,
        "expected_bytes": expected_bytes,
        "expected_elements": len(expected),
        "arrived_elements": len(arrived),
        "first_diff_element": first_element,
        "first_diff_offset": first_diff_offset(arrived_text, expected_text),
    }
    if len(arrived_items) < len(expected_items) and _is_subsequence(arrived_items, expected_items):
        return CopyVerdict(ELEMENTS_DROPPED, **base)
    return CopyVerdict(MUTATED, **base, similarity=round(similarity(arrived_text, expected_text), 6))


def _as_text(value: Content) -> str:
    return value if isinstance(value, str) else canonical(value)


def judge_copy(
    arrived: Content | None,
    *,
    arrived_sha256: str,
    arrived_bytes: int,
    expected_sha256: str | None,
    expected: Content | None,
    capture_truncated: bool = False,
) -> CopyVerdict:
    """The fidelity verdict for one bulk argument (see the module docstring for definitions).

    ``arrived`` is ``None`` when the log kept only a digest; ``expected`` is ``None`` when no
    content is known under the expected hash. When ``expected`` is given without a hash its
    hash is computed. Raises ``ValueError`` when a given content does not hash to the given
    sha256 (or byte count): that is a caller bug, and a wrong verdict would be worse.
    """
    if capture_truncated:
        return CopyVerdict(CAPTURE_TRUNCATED, arrived_bytes=arrived_bytes)

    if arrived is not None:
        raw = content_bytes(arrived)
        if sha256_hex(raw) != arrived_sha256 or len(raw) != arrived_bytes:
            raise ValueError("arrived content does not match arrived_sha256/arrived_bytes")
    expected_bytes: int | None = None
    if expected is not None:
        raw = content_bytes(expected)
        expected_bytes = len(raw)
        computed = sha256_hex(raw)
        if expected_sha256 is None:
            expected_sha256 = computed
        elif computed != expected_sha256:
            raise ValueError("expected content does not match expected_sha256")

    if expected_sha256 is None:
        return CopyVerdict(UNVERIFIABLE, arrived_bytes=arrived_bytes)
    if arrived_sha256 == expected_sha256:
        return CopyVerdict(EXACT, arrived_bytes=arrived_bytes, expected_bytes=arrived_bytes)

    # With one side known only by hash, a cheap hypothesis that reproduces the hash recovers
    # that side's content exactly, so the content comparison below still decides the verdict.
    hypothesis: str | None = None
    if expected is None:
        expected_hit = _expected_from_hypotheses(arrived, expected_sha256) if arrived is not None else None
        if expected_hit is None:
            return CopyVerdict(MISMATCH, arrived_bytes=arrived_bytes)
        hypothesis, expected = expected_hit
        expected_bytes = len(content_bytes(expected))
    elif arrived is None:
        arrived_hit = _arrived_from_hypotheses(expected, arrived_sha256, arrived_bytes)
        if arrived_hit is None:
            return CopyVerdict(
                MISMATCH,
                arrived_bytes=arrived_bytes,
                expected_bytes=expected_bytes,
                expected_elements=len(expected) if isinstance(expected, list) else None,
            )
        hypothesis, arrived = arrived_hit

    assert arrived is not None and expected is not None and expected_bytes is not None
    verdict = _compare(arrived, expected, arrived_bytes, expected_bytes)
    verdict.hypothesis = hypothesis
    return verdict


def _compare(arrived: Content, expected: Content, arrived_bytes: int, expected_bytes: int) -> CopyVerdict:
    if isinstance(arrived, str) and isinstance(expected, str):
        return _judge_strings(arrived, expected, arrived_bytes, expected_bytes)
    if isinstance(arrived, list) and isinstance(expected, list):
        return _judge_lists(arrived, expected, arrived_bytes, expected_bytes)
    # A string where an array was expected or the reverse: compare the texts that were hashed.
    arrived_text, expected_text = _as_text(arrived), _as_text(expected)
    return CopyVerdict(
        MUTATED,
        arrived_bytes=arrived_bytes,
        expected_bytes=expected_bytes,
        first_diff_offset=first_diff_offset(arrived_text, expected_text),
        similarity=round(similarity(arrived_text, expected_text), 6),
    )
