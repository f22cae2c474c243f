"""The copy verdicts (mcptax.verdict_rules): every verdict, precedence, Unicode, megabyte inputs
and properties (the hash-only hypotheses are in test_verdict_hash_only.py). Hashes and sizes are
computed here, not with the module's own canonical JSON."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mcptax import verdict_rules
from mcptax.verdict_rules import judge_copy, verdict_counts_order
from tests.helpers import compact
from tests.mcptax.verdicts import (
    judge_arrived_hash_only,
    judge_content,
    judge_expected_hash_only,
    line_texts,
    sha,
    size,
)

LOREM = "The quick brown fox jumps over the lazy dog.\n" * 40  # 1,800 bytes, many lines

# --- each verdict, content known ---------------------------------------------------------

CONTENT_CASES = [
    # (id, arrived, expected, verdict)
    ("exact", LOREM, LOREM, "exact"),
    ("newline added", LOREM + "\n", LOREM, "newline_only"),
    ("newline dropped", LOREM[:-1], LOREM, "newline_only"),
    ("crlf newline added", "abc\r\n", "abc", "newline_only"),
    ("crlf newline dropped", "abc", "abc\r\n", "newline_only"),
    ("second final newline", "abc\n\n", "abc\n", "newline_only"),
    ("lf to crlf", LOREM.replace("\n", "\r\n"), LOREM, "line_endings"),
    ("crlf to lf", LOREM, LOREM.replace("\n", "\r\n"), "line_endings"),
    ("final terminator style only", "abc\n", "abc\r\n", "line_endings"),
    ("crlf and final newline dropped", LOREM.replace("\n", "\r\n")[:-2], LOREM, "line_endings"),
    ("mixed endings", "a\r\nb\nc\r\n", "a\nb\r\nc\n", "line_endings"),
    (
        "trailing spaces stripped",
        "def f():    \n    return 1\n",
        "def f():\n    return 1\n",
        "whitespace_only",
    ),
    ("tabs to spaces", "if x:\n    y()\n", "if x:\n\ty()\n", "whitespace_only"),
    ("leading blank lines", "\n\nbody text", "body text", "whitespace_only"),
    ("lone cr endings", "a\rb\r", "a\nb\n", "whitespace_only"),
    ("prefix", LOREM[:1000], LOREM, "truncated"),
    ("prefix mid line, line closed", LOREM[:1000] + "\n", LOREM, "truncated"),
    ("prefix mid line, crlf closed", LOREM[:1000] + "\r\n", LOREM, "truncated"),
    ("empty copy", "", LOREM, "truncated"),
    ("middle edited", LOREM[:900] + "cat" + LOREM[903:], LOREM, "mutated"),
    ("suffix added", LOREM + "extra", LOREM, "mutated"),
    ("truncated with marker", LOREM[:1000] + "...", LOREM, "mutated"),
    ("truncated and crlf", LOREM[:1000].replace("\n", "\r\n"), LOREM, "mutated"),
    ("space inserted in word", "a b", "ab", "mutated"),
    ("array prefix", list(range(500)), list(range(756)), "elements_dropped"),
    ("array subsequence", [x for x in range(756) if x % 3], list(range(756)), "elements_dropped"),
    ("array empty", [], list(range(200)), "elements_dropped"),
    ("array element changed", [*range(99), 1000], list(range(100)), "mutated"),
    ("array reordered", list(range(200))[::-1], list(range(200)), "mutated"),
    ("array longer", list(range(201)), list(range(200)), "mutated"),
    ("array true is not 1", [True, 2], [1, 2, 3], "mutated"),
    ("array shorter, element sorts before", [0], [1, 2], "mutated"),
    ("array shorter, element sorts after", [3], [1, 2], "mutated"),
    ("string for array", json.dumps(list(range(150))), list(range(150)), "mutated"),
    # Same bytes, so the same sha256: the contract's exact is byte equality, whatever the type.
    ("canonical string for array", compact(list(range(150))), list(range(150)), "exact"),
]


@pytest.mark.parametrize(
    ("arrived", "expected", "verdict"),
    [case[1:] for case in CONTENT_CASES],
    ids=[c[0] for c in CONTENT_CASES],
)
def test_content_verdicts(arrived, expected, verdict):
    result = judge_content(arrived, expected)
    assert result.verdict == verdict
    assert result.hypothesis is None
    assert result.arrived_bytes == size(arrived)
    assert result.expected_bytes == size(expected)


def test_truncated_records_kept_and_expected_bytes():
    result = judge_content("héllo wö", "héllo wörld and more")
    assert (result.verdict, result.kept_bytes, result.expected_bytes) == ("truncated", 10, 22)
    closed = judge_content("héllo wö\n", "héllo wörld and more")
    assert (closed.verdict, closed.kept_bytes, closed.arrived_bytes) == ("truncated", 10, 11)


def test_the_first_different_element_is_found_whichever_way_it_sorts():
    assert judge_content([0, 1, 3], [0, 2, 3]).first_diff_element == 1  # "1" sorts before "2"
    assert judge_content([0, 2, 3], [0, 1, 3]).first_diff_element == 1


def test_elements_dropped_records_counts():
    result = judge_content(list(range(500)), list(range(756)))
    assert (result.expected_elements, result.arrived_elements, result.first_diff_element) == (756, 500, 500)
    subsequence = judge_content([0, 2, 3], [0, 1, 2, 3])
    assert (subsequence.first_diff_element, subsequence.first_diff_offset) == (1, len("[0,"))


def test_mutated_records_offset_and_similarity():
    edited = LOREM[:900] + "cat" + LOREM[903:]
    result = judge_content(edited, LOREM)
    assert result.first_diff_offset == 900
    assert 0.99 < result.similarity < 1.0
    unrelated = judge_content("z" * 500, "q" * 500)
    assert unrelated.similarity == 0.0
    assert unrelated.first_diff_offset == 0


# --- precedence --------------------------------------------------------------------------


def relations_that_hold(a: str, e: str) -> set[str]:
    """Test oracle: every string relation of docs/definitions.md that holds, ignoring precedence."""
    held = {"mutated"}
    if a == e:
        held.add("exact")
    if any(a == e + t or e == a + t for t in ("\n", "\r\n")):
        held.add("newline_only")
    la, le = a.replace("\r\n", "\n"), e.replace("\r\n", "\n")
    if la == le or any(la == le + t or le == la + t for t in ("\n", "\r\n")):
        held.add("line_endings")
    if " ".join(a.split()) == " ".join(e.split()):
        held.add("whitespace_only")
    if any(len(p) < len(e) and e.startswith(p) for p in (a, a.removesuffix("\n"), a.removesuffix("\r\n"))):
        held.add("truncated")
    return held


PRECEDENCE_CASES = [
    # (arrived, expected, verdict, every relation that holds)
    ("abc\n", "abc", "newline_only", {"newline_only", "line_endings", "whitespace_only", "mutated"}),
    (
        "abc",
        "abc\n",
        "newline_only",
        {"newline_only", "line_endings", "whitespace_only", "truncated", "mutated"},
    ),
    (
        "abc",
        "abc\r\n",
        "newline_only",
        {"newline_only", "line_endings", "whitespace_only", "truncated", "mutated"},
    ),
    ("abc\n", "abc\r\n", "line_endings", {"line_endings", "whitespace_only", "truncated", "mutated"}),
    ("a\r\nb", "a\nb\n", "line_endings", {"line_endings", "whitespace_only", "mutated"}),
    ("abc", "abc  \n", "whitespace_only", {"whitespace_only", "truncated", "mutated"}),
    ("abc ", "abc  x", "truncated", {"truncated", "mutated"}),
]


@pytest.mark.parametrize(("arrived", "expected", "verdict", "held"), PRECEDENCE_CASES)
def test_precedence(arrived, expected, verdict, held):
    # Each case is only meaningful if later relations really hold too.
    assert relations_that_hold(arrived, expected) == held
    assert judge_content(arrived, expected).verdict == verdict


@settings(max_examples=300)
@given(st.lists(st.sampled_from(["a", "b", " ", "\n", "\r\n", "\r"]), max_size=8).map("".join),
       st.lists(st.sampled_from(["a", "b", " ", "\n", "\r\n", "\r"]), max_size=8).map("".join))  # fmt: skip
def test_property_first_relation_in_precedence_wins(a, e):
    held = relations_that_hold(a, e)
    expected_verdict = next(v for v in verdict_rules.PRECEDENCE if v in held)
    assert judge_content(a, e).verdict == expected_verdict


def test_precedence_order_and_counts_order():
    assert verdict_rules.PRECEDENCE == (
        "exact",
        "newline_only",
        "line_endings",
        "whitespace_only",
        "truncated",
        "elements_dropped",
        "mutated",
        "mismatch",
    )
    order = verdict_counts_order()
    assert order[: len(verdict_rules.PRECEDENCE)] == verdict_rules.PRECEDENCE
    assert set(order) == {
        *verdict_rules.PRECEDENCE,
        "unverifiable",
        "capture_truncated",
        "by_reference",
        "no_content",
    }
    assert len(order) == len(set(order))
    assert {verdict_rules.severity(v) for v in order} == {"ok", "cosmetic", "damaged", "unknown"}


def test_capture_truncated_wins_over_everything():
    for arrived, expected in [(LOREM, LOREM), ("abc", "xyz"), (list(range(5)), list(range(9)))]:
        assert judge_content(arrived, expected, capture_truncated=True).verdict == "capture_truncated"
    hash_only = judge_copy(None, arrived_sha256=sha("x"), arrived_bytes=1, expected_sha256=None, expected=None,
                      capture_truncated=True)  # fmt: skip
    assert hash_only.verdict == "capture_truncated"


def test_unverifiable_without_expected_hash():
    result = judge_copy(
        LOREM, arrived_sha256=sha(LOREM), arrived_bytes=size(LOREM), expected_sha256=None, expected=None
    )
    assert result.verdict == "unverifiable"


def test_expected_content_without_hash_is_hashed():
    result = judge_copy(
        "abc\n", arrived_sha256=sha("abc\n"), arrived_bytes=4, expected_sha256=None, expected="abc"
    )
    assert result.verdict == "newline_only"


def test_inconsistent_inputs_raise():
    # A wrong arrived digest that sorts before the right one, and one that sorts after it.
    assert sorted([sha("abd"), sha("abc"), sha("abe")])[1] == sha("abc")
    for wrong in ("abd", "abe"):
        with pytest.raises(ValueError):
            judge_copy("abc", arrived_sha256=sha(wrong), arrived_bytes=3, expected_sha256=None, expected=None)
    with pytest.raises(ValueError):
        judge_copy("abc", arrived_sha256=sha("abc"), arrived_bytes=4, expected_sha256=None, expected=None)
    with pytest.raises(ValueError):
        judge_copy("abc", arrived_sha256=sha("abc"), arrived_bytes=2, expected_sha256=None, expected=None)
    with pytest.raises(ValueError):
        judge_copy("abc", arrived_sha256=sha("abc"), arrived_bytes=3, expected_sha256=sha("x"), expected="y")
    with pytest.raises(ValueError):  # the other way round: whichever digest sorts first
        judge_copy("abc", arrived_sha256=sha("abc"), arrived_bytes=3, expected_sha256=sha("y"), expected="x")
    with pytest.raises(TypeError):
        judge_copy({"a": 1}, arrived_sha256=sha("x"), arrived_bytes=1, expected_sha256=None, expected=None)


def test_no_relation_holds_between_a_text_and_an_equal_one():
    built = "".join(["a", " b"])  # equal to "a b", another object
    assert verdict_rules.is_whitespace_only("a b", built) is False
    assert verdict_rules.is_whitespace_only("a b", "a  b") is True
    text = LOREM.rstrip("\n")
    long_copy = "".join(list(text))  # equal, another object, longer than 256 characters
    assert verdict_rules.truncated_prefix(text, long_copy) is None
    assert verdict_rules.truncated_prefix(text[:300], long_copy) == text[:300]
    assert verdict_rules.is_line_endings("x\n", "".join(["x", "\n"])) is False  # equal, not the same object
    # One final newline apart is newline_only, never line_endings.
    assert verdict_rules.is_line_endings("x\n", "x") is False
    assert verdict_rules.is_line_endings("x\r\n", "x\n") is True


def test_to_dict_round_trips_through_json():
    result = judge_content(LOREM[:900] + "cat" + LOREM[903:], LOREM)
    result.expected_source = "reference_doc"
    data = json.loads(json.dumps(result.to_dict()))
    assert data["verdict"] == "mutated"
    assert data["expected_source"] == "reference_doc"
    assert data["first_diff_offset"] == 900
    assert set(data) >= {
        "kept_bytes",
        "expected_bytes",
        "expected_elements",
        "arrived_elements",
        "hypothesis",
    }


# --- unicode -----------------------------------------------------------------------------


def test_multibyte_first_diff_offset_is_utf8_bytes():
    expected = "héllo 😀 wörld, 日本語のテキスト"
    arrived = expected.replace("日本語", "日本読")
    result = judge_content(arrived, expected)
    assert result.verdict == "mutated"
    offset = result.first_diff_offset
    assert offset == len("héllo 😀 wörld, 日本".encode())
    assert arrived.encode()[:offset] == expected.encode()[:offset]
    # The differing characters share two leading bytes; the offset still points at the char start.
    assert "語".encode()[:2] == "読".encode()[:2]


def test_line_ending_and_missing_end_verdicts_point_at_the_first_difference():
    expected = "alpha\tbeta 😀 gamma\r\ndelta\n"
    result = judge_content("alpha\tbeta 😀 gamma\ndelta", expected)
    assert result.verdict == "line_endings"
    assert result.first_diff_offset == len("alpha\tbeta 😀 gamma".encode())
    missing_end = judge_content("x" * 50, "x" * 50 + "\n")
    assert missing_end.verdict == "newline_only"
    assert missing_end.first_diff_offset == 50


# --- 1 MB inputs: linear algorithms --------------------------------------------------------
# A quadratic comparison of two 1 MB strings is ~10^12 steps, far beyond this timeout.

MEGA = "".join(f"row {i}: {'lorem ipsum dolor sit amet ' * 2}{i * 7919 % 10007}\n" for i in range(15_000))


@pytest.mark.timeout(60)
def test_one_megabyte_inputs_are_judged():
    assert len(MEGA.encode()) > 1_000_000
    edited = MEGA.replace("row 3", "ROW 3")  # thousands of edits spread through the text
    mutated = judge_content(edited, MEGA)
    assert mutated.verdict == "mutated"
    assert mutated.first_diff_offset == MEGA.index("row 3")
    assert 0.9 < mutated.similarity < 1.0
    assert judge_content(MEGA[:600_000], MEGA).verdict == "truncated"
    assert judge_content(MEGA.replace("\n", "\r\n"), MEGA).verdict == "line_endings"
    assert judge_content(MEGA.replace(" ", "  "), MEGA).verdict == "whitespace_only"
    assert judge_expected_hash_only(MEGA.replace("\n", "\r\n")[:-2], MEGA).verdict == "line_endings"
    assert judge_arrived_hash_only(MEGA[:654_321], MEGA).verdict == "truncated"
    # One long line (minified JSON) with changes at both ends: no line structure to lean on.
    minified = compact([{"id": i, "name": f"item {i}"} for i in range(40_000)])
    changed = "X" + minified[1:-1] + "Y"
    assert judge_content(changed, minified).verdict == "mutated"
    assert judge_content(list(range(200_000))[::2], list(range(200_000))).verdict == "elements_dropped"
    reordered = judge_content(list(range(150_000))[::-1], list(range(150_000)))
    assert reordered.verdict == "mutated"


# --- properties ----------------------------------------------------------------------------


texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=300)


@given(texts)
def test_property_identical_is_exact(x):
    assert judge_content(x, x).verdict == "exact"


@given(texts)
def test_property_added_final_newline_is_newline_only(x):
    assert judge_content(x + "\n", x).verdict == "newline_only"
    assert judge_content(x, x + "\n").verdict == "newline_only"
    assert judge_expected_hash_only(x + "\n", x).verdict == "newline_only"


@given(texts, st.data())
def test_property_strict_prefix_is_truncated(x, data):
    assume(len(x) > 0)
    k = data.draw(st.integers(min_value=0, max_value=len(x) - 1))
    # A prefix missing only whitespace is newline_only/whitespace_only by precedence.
    assume(x[k:].strip() != "")
    result = judge_content(x[:k], x)
    assert result.verdict == "truncated"
    assert result.kept_bytes == len(x[:k].encode())


@settings(max_examples=300)
@given(line_texts, line_texts)
def test_property_verdict_is_consistent(a, b):
    result = judge_content(a, b)
    assert result.verdict in verdict_rules.PRECEDENCE
    assert (result.verdict == "exact") == (a == b)
    if a != b:
        offset = result.first_diff_offset
        assert a.encode()[:offset] == b.encode()[:offset]
        assert a[len(a.encode()[:offset].decode()) :][:1] != b[len(b.encode()[:offset].decode()) :][:1]
    if result.similarity is not None:
        assert 0.0 <= result.similarity <= 1.0


def test_similarity_is_kept_to_six_decimals():
    assert judge_content("abcde", ["abcde", "q"]).similarity == 0.555556  # 10 / 18 characters match


def test_similarity_is_kept_to_six_decimals_for_texts_and_arrays():
    # 2 x matching characters / all characters: 8 / 9 and 12 / 14.
    assert judge_content("abXcd", "abcd").similarity == 0.888889
    assert judge_content([1, 2, 4], [1, 2, 3]).similarity == 0.857143


def test_the_hashes_and_sizes_are_passed_by_name():
    # Two hex digests side by side are easy to swap: only `arrived` goes by position.
    with pytest.raises(TypeError):
        judge_copy("a", sha("a"), 1, sha("b"), "b")  # type: ignore[misc]
    with pytest.raises(TypeError):  # which side a candidate is for is said by name
        list(verdict_rules.text_hypotheses("x", True))  # type: ignore[misc]
