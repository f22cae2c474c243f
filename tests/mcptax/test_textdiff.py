"""Where and how much two texts differ (mcptax.textdiff): the drill-down excerpt and similarity."""

from __future__ import annotations

from difflib import SequenceMatcher

import pytest

from mcptax import textdiff
from mcptax.textdiff import diff_context


def test_diff_context_marks_invisible_characters_and_snaps_to_char():
    expected = "alpha\tbeta 😀 gamma\r\ndelta\n"
    arrived = "alpha\tbeta 😀 gamma\ndelta"
    offset = len("alpha\tbeta 😀 gamma".encode())
    context = diff_context(arrived, expected, offset, radius=10)
    assert context["expected"]["before"] == "ta 😀 gamma"
    assert context["expected"]["after"].startswith("⟨CR⟩↵\ndelta↵\n")
    assert context["arrived"]["after"] == "↵\ndelta"
    assert context["arrived"]["more_before"] and not context["arrived"]["more_after"]
    inside_emoji = len(b"alpha\tbeta ") + 2
    snapped = diff_context(arrived, expected, inside_emoji, radius=3)
    assert snapped["expected"]["after"] == "😀 g"
    assert snapped["expected"]["before"] == "ta "
    assert textdiff.show_invisible("\x00\x1b\u200b\ufeff\u00a0") == "␀␛⟨ZWSP⟩⟨BOM⟩⍽"


def test_diff_context_shows_a_missing_end():
    expected = "x" * 50 + "\n"
    context = diff_context("x" * 50, expected, 50)
    assert context["arrived"]["at_end"] and not context["expected"]["at_end"]
    assert context["expected"]["after"] == "↵\n"


def test_first_diff_offset_counts_utf8_bytes():
    assert textdiff.first_diff_offset("héllo", "héllo") is None
    assert textdiff.first_diff_offset("hé", "hél") == len("hé".encode())
    assert textdiff.first_diff_offset("日本語", "日本読") == len("日本".encode())


@pytest.mark.timeout(60)
def test_similarity_worst_cases_are_exact():
    # Right at the difflib threshold, with inputs that make Ratcliff/Obershelp work hardest: up to
    # the threshold the figure is difflib's own ratio, computed here with the standard library.
    n = textdiff.EXACT_SIMILARITY_MAX_CHARS
    alternating = ("ab" * (n // 2), "ba" * (n // 2))
    assert textdiff.similarity(*alternating) == SequenceMatcher(None, *alternating, autojunk=False).ratio()
    # A common prefix of n - 1 characters and one differing character: 2 * (n - 1) / 2n.
    assert textdiff.similarity("a" * n, "a" * (n - 1) + "b") == (n - 1) / n
    # Nothing in common, far above the threshold (the linear estimate): exactly nothing.
    assert textdiff.similarity("a" * 400_000, "b" * 400_000) == 0.0
    assert textdiff.similarity("abc", "abc") == 1.0
    assert textdiff.similarity("", "") == 1.0
