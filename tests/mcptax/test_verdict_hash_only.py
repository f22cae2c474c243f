"""Verdicts with one side known only by its hash (mcptax.verdict_rules): the cheap hypotheses that
recover the missing side, and the relation that makes them honest: a hit is the content verdict,
field for field; anything else is a mismatch."""

from __future__ import annotations

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from mcptax import verdict_rules
from mcptax.verdict_rules import CopyVerdict, judge_copy
from tests.helpers import compact, utf8_len
from tests.mcptax.verdicts import (
    judge_arrived_hash_only,
    judge_content,
    judge_expected_hash_only,
    line_texts,
    sha,
    size,
    to_crlf,
    to_lf,
)

DOC_LF = "line one\nline two\nline three\n"
DOC_CRLF = DOC_LF.replace("\n", "\r\n")

HYPOTHESIS_CASES = [
    # (arrived, expected, verdict, hypothesis named for what the copy did)
    (DOC_LF + "\n", DOC_LF, "newline_only", "final_newline_added"),
    (DOC_CRLF + "\r\n", DOC_CRLF, "newline_only", "final_newline_added"),
    (DOC_LF[:-1], DOC_LF, "newline_only", "final_newline_removed"),
    (DOC_CRLF[:-2], DOC_CRLF, "newline_only", "final_newline_removed"),
    (DOC_LF, DOC_CRLF, "line_endings", "crlf_to_lf"),
    (DOC_CRLF, DOC_LF, "line_endings", "lf_to_crlf"),
    (DOC_LF[:-1], DOC_CRLF, "line_endings", "crlf_to_lf+final_newline_removed"),
    (DOC_CRLF[:-2], DOC_LF, "line_endings", "lf_to_crlf+final_newline_removed"),
    (DOC_LF.rstrip("\n") + "\r\n", DOC_CRLF.rstrip("\r\n"), "line_endings", "crlf_to_lf+final_newline_added"),
    (DOC_CRLF + "\r\n", DOC_LF, "line_endings", "lf_to_crlf+final_newline_added"),
]


@pytest.mark.parametrize(("arrived", "expected", "verdict", "hypothesis"), HYPOTHESIS_CASES)
def test_hash_only_expected_hypotheses(arrived, expected, verdict, hypothesis):
    result = judge_expected_hash_only(arrived, expected)
    assert (result.verdict, result.hypothesis) == (verdict, hypothesis)
    # Same verdict as when the expected content is known.
    assert judge_content(arrived, expected).verdict == verdict


@pytest.mark.parametrize(("arrived", "expected", "verdict", "hypothesis"), HYPOTHESIS_CASES)
def test_hash_only_arrived_hypotheses(arrived, expected, verdict, hypothesis):
    # A redacted log kept only the arrived digest; the expected content is known.
    result = judge_arrived_hash_only(arrived, expected)
    assert (result.verdict, result.hypothesis) == (verdict, hypothesis)


def test_hash_only_without_a_hit_is_mismatch():
    assert judge_expected_hash_only(DOC_LF.replace("two", "2"), DOC_LF).verdict == "mismatch"
    assert judge_expected_hash_only(DOC_LF[:10], DOC_LF).verdict == "mismatch"  # prefix needs content
    assert judge_expected_hash_only(list(range(5)), list(range(9))).verdict == "mismatch"
    assert judge_arrived_hash_only(DOC_LF.replace("two", "2"), DOC_LF).verdict == "mismatch"
    neither = judge_copy(
        None, arrived_sha256=sha("a"), arrived_bytes=1, expected_sha256=sha("b"), expected=None
    )
    assert neither.verdict == "mismatch"
    both_hashes_equal = judge_copy(
        None, arrived_sha256=sha("a"), arrived_bytes=1, expected_sha256=sha("a"), expected=None
    )
    assert both_hashes_equal.verdict == "exact"


def test_hash_only_arrived_prefix_and_elements():
    text = "naïve café " * 200
    truncated = judge_arrived_hash_only(text[:777], text)
    assert (truncated.verdict, truncated.hypothesis, truncated.kept_bytes) == (
        "truncated",
        "prefix",
        size(text[:777]),
    )
    closed = judge_arrived_hash_only(text[:777] + "\n", text)
    assert (closed.verdict, closed.hypothesis) == ("truncated", "prefix+final_newline_added")
    numbers = [{"n": i, "label": f"é{i}"} for i in range(756)]
    dropped = judge_arrived_hash_only(numbers[:500], numbers)
    assert (dropped.verdict, dropped.hypothesis) == ("elements_dropped", "element_prefix")
    assert (dropped.expected_elements, dropped.arrived_elements) == (756, 500)
    none_kept = judge_arrived_hash_only([], numbers)
    assert (none_kept.verdict, none_kept.arrived_elements) == ("elements_dropped", 0)
    reordered = judge_arrived_hash_only(numbers[1:501], numbers)
    assert reordered.verdict == "mismatch"


@settings(max_examples=300)
@given(line_texts, st.sampled_from(["crlf_to_lf", "lf_to_crlf", None]),
       st.sampled_from(["add_lf", "add_crlf", "remove_lf", "remove_crlf", None]))  # fmt: skip
@example("\n", "lf_to_crlf", "remove_lf")  # half a CRLF removed: undone newline first, then endings
def test_property_hash_only_agrees_with_content(x, eol, newline):
    # Damage x the way an agent would, then judge with and without the expected content.
    arrived = {"crlf_to_lf": to_lf, "lf_to_crlf": to_crlf, None: lambda t: t}[eol](x)
    if newline == "add_lf":
        arrived += "\n"
    elif newline == "add_crlf":
        arrived += "\r\n"
    elif newline == "remove_lf":
        arrived = arrived.removesuffix("\n")
    elif newline == "remove_crlf":
        arrived = arrived.removesuffix("\r\n")
    with_content = judge_content(arrived, x).verdict
    # From the expected side the hypotheses are exactly these damages, so they always agree.
    assert judge_arrived_hash_only(arrived, x).verdict == with_content
    # From the arrived side the original line endings must be guessed: all LF or all CRLF.
    bare = x.replace("\r\n", "")
    if "\r" not in x or ("\r" not in bare and "\n" not in bare):
        assert judge_expected_hash_only(arrived, x).verdict == with_content
    assert with_content in ("exact", "newline_only", "line_endings", "whitespace_only")


@pytest.mark.parametrize("kept", [0, 1, 2])  # "[1,22]" is 6 bytes: an even length, as "[]" is
def test_a_digest_only_prefix_of_elements_is_found_at_any_length(kept):
    result = judge_arrived_hash_only([1, 22, 3][:kept], [1, 22, 3])
    assert (result.verdict, result.arrived_elements, result.hypothesis) == (
        "elements_dropped",
        kept,
        "element_prefix",
    )


# --- hash-only: the recovered side is the real one, or nothing -----------------------------


@pytest.mark.parametrize(
    ("arrived", "expected", "kept"),
    [
        ("ab\n", "abc", 2),  # as long as the expected text
        ("ab\r\n", "abc", 2),  # longer than it
        ("\n", "abc", 0),  # nothing kept but the closing newline
        ("\r\n", "abc", 0),
        ("naïv\n", "naïve", len("naïv".encode())),
    ],
)
def test_a_closed_prefix_is_truncated_whatever_its_length(arrived, expected, kept):
    with_content = judge_content(arrived, expected)
    assert (with_content.verdict, with_content.kept_bytes) == ("truncated", kept)
    digest_only = judge_arrived_hash_only(arrived, expected)
    assert (digest_only.verdict, digest_only.kept_bytes, digest_only.hypothesis) == (
        "truncated",
        kept,
        "prefix+final_newline_added",
    )


@settings(max_examples=200)
@given(line_texts, st.data(), st.sampled_from(["", "\n", "\r\n"]))
def test_property_a_digest_only_prefix_agrees_with_content(x, data, terminator):
    assume(len(x) > 0)
    arrived = x[: data.draw(st.integers(min_value=0, max_value=len(x) - 1))] + terminator
    assume(arrived != x)
    with_content = judge_content(arrived, x)
    digest_only = judge_arrived_hash_only(arrived, x)
    assert digest_only.hypothesis is not None
    assert {**digest_only.to_dict(), "hypothesis": None} == with_content.to_dict()


def without_hypothesis(verdict: CopyVerdict) -> dict:
    return {**verdict.to_dict(), "hypothesis": None}


@settings(max_examples=300)
@given(line_texts, line_texts)
def test_property_a_digest_only_verdict_is_the_content_verdict_or_a_mismatch(a, e):
    # A hypothesis "hits" only when its candidate hashes to the digest: then the candidate is the
    # missing side itself and every field matches the verdict with both sides known.
    assume(a != e)
    with_content = without_hypothesis(judge_content(a, e))
    for digest_only in (judge_arrived_hash_only(a, e), judge_expected_hash_only(a, e)):
        if digest_only.hypothesis is None:
            assert digest_only.verdict == "mismatch"
        else:
            assert without_hypothesis(digest_only) == with_content


small_lists = st.lists(
    st.one_of(st.integers(-20, 200), st.sampled_from(["x", "é", "", True, None])), max_size=8
)


@settings(max_examples=300)
@given(small_lists, small_lists)
def test_property_a_digest_only_list_verdict_is_the_content_verdict_or_a_mismatch(a, e):
    assume(compact(a) != compact(e))
    digest_only = judge_arrived_hash_only(a, e)
    if digest_only.hypothesis is None:
        assert digest_only.verdict == "mismatch"
        assert digest_only.expected_elements == len(e)
    else:
        assert digest_only.hypothesis == "element_prefix"
        assert without_hypothesis(digest_only) == without_hypothesis(judge_content(a, e))
        assert compact(a) == compact(e[: len(a)])


@given(
    st.lists(
        st.one_of(st.integers(-1000, 10**6), st.text(max_size=4), st.booleans()), min_size=1, max_size=8
    ),
    st.integers(0, 120),
)
def test_element_prefix_count_is_the_one_prefix_of_that_many_bytes(items, arrived_bytes):
    # Worked out here from the JSON text of each shorter prefix.
    lengths = {utf8_len(items[:k]): k for k in range(len(items))}
    assert verdict_rules._element_prefix_count(items, arrived_bytes) == lengths.get(arrived_bytes)
