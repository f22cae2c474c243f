"""Judging one copy three ways for the verdict tests: both sides known, the expected side known
only by its hash, the arrived side known only by its hash. Hashes and sizes are computed here
(hashlib, json), not with the module's own canonical JSON."""

from __future__ import annotations

from hypothesis import strategies as st

from mcptax.verdict_rules import CopyVerdict, judge_copy
from tests.helpers import compact, utf8_len
from tests.helpers import sha as sha_of


def sha(value: str | list) -> str:
    return sha_of(value if isinstance(value, str) else compact(value))


def size(value: str | list) -> int:
    return utf8_len(value)


def judge(
    arrived: str | list, expected: str | list, *, arrived_known: bool, expected_known: bool, **kwargs
) -> CopyVerdict:
    """Both hashes and the arrived size from the contents; each content passed only if known."""
    return judge_copy(
        arrived if arrived_known else None,
        arrived_sha256=sha(arrived),
        arrived_bytes=size(arrived),
        expected_sha256=sha(expected),
        expected=expected if expected_known else None,
        **kwargs,
    )


def judge_content(arrived: str | list, expected: str | list, **kwargs) -> CopyVerdict:
    return judge(arrived, expected, arrived_known=True, expected_known=True, **kwargs)


def judge_expected_hash_only(arrived: str | list, expected: str | list) -> CopyVerdict:
    return judge(arrived, expected, arrived_known=True, expected_known=False)


def judge_arrived_hash_only(arrived: str | list, expected: str | list) -> CopyVerdict:
    """A redacted log: only the arrived digest was kept."""
    return judge(arrived, expected, arrived_known=False, expected_known=True)


def to_lf(text: str) -> str:
    return text.replace("\r\n", "\n")


def to_crlf(text: str) -> str:
    return to_lf(text).replace("\n", "\r\n")


# Short texts made of the pieces the verdicts care about: line terminators, blanks, multibyte.
line_texts = st.lists(
    st.sampled_from(["a", "b c", " ", "\t", "\n", "\r\n", "\r", "é", "😀"]), max_size=40
).map("".join)
