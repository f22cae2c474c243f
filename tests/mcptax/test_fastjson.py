"""orjson is used only where it gives the standard library's result: parsing (``load_json``) and
canonical dumps compared on every line and document of the corpus under tests/data, and on fuzzed
variants of them (floats, big integers, surrogates, duplicate keys, control characters, cuts)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcptax import fastjson
from mcptax.client import plain
from mcptax.formats.records import MAX_JSON_DEPTH, load_json, load_json_stdlib, utf8
from mcptax.tokens import canonical

DATA = Path(__file__).resolve().parent.parent / "data"


def stdlib_canonical(x: Any) -> str:
    return json.dumps(x, separators=(",", ":"), ensure_ascii=False)


def corpus_inputs() -> list[bytes]:
    """Every line of every JSONL file and every whole JSON/HAR document under tests/data."""
    found: list[bytes] = []
    for path in sorted(DATA.rglob("*")):
        if path.suffix == ".jsonl":
            found.extend(line for line in path.read_bytes().splitlines() if line.strip())
        elif path.suffix in (".json", ".har", ".jsonc"):
            found.append(path.read_bytes())
    return found


MUTATIONS = [
    b"1.5",
    b"1e-05",
    b"1E400",
    b"-0.0",
    b"0.1e1",
    b"18446744073709551616",
    b"18446744073709551615",
    b"-9223372036854775809",
    b"1" * 30,
    b'"\\ud800"',
    b'"\\udc00x"',
    b'"\\ud83d\\ude00"',
    b'"a\\u0000b"',
    b'"\x7f\xe2\x80\xa8"',
    b"NaN",
    b"-Infinity",
    b"[" * 201 + b"]" * 201,
    b"[" * 199 + b"]" * 199,
    b'{"k":1,"k":2,"j":3,"k":4}',
    b'"\xed\xa0\x80"',
    b"\xff",
    b"[1,]",
    b"\t\r\n null \n",
]


def fuzzed(inputs: list[bytes], rng: random.Random, count: int) -> Iterator[bytes]:
    """Each a corpus input with a value spliced in after a ``:``, cut short, or prefixed."""
    for _ in range(count):
        data = rng.choice(inputs)
        kind = rng.randrange(4)
        if kind == 0 and b":" in data:
            at = rng.choice([i for i, c in enumerate(data) if c == ord(":")][:50])
            end = data.find(b",", at)
            if end > 0:
                data = data[: at + 1] + rng.choice(MUTATIONS) + data[end:]
        elif kind == 1:
            data = data[: rng.randrange(len(data) + 1)]
        elif kind == 2:
            data = rng.choice([b"\xef\xbb\xbf", b" ", b"\x00", b"["]) + data
        else:
            data = rng.choice(MUTATIONS)
        yield data


def same(a: Any, b: Any) -> bool:
    """Equal values of the same types and key order (``1``, ``1.0`` and ``True`` differ)."""
    return repr(a) == repr(b) and type(a) is type(b)


def check_one(data: bytes) -> None:
    got, want = load_json(data), load_json_stdlib(data)
    assert got[1] == want[1], data[:200]
    assert same(got[0], want[0]), data[:200]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    assert same(load_json(text), load_json_stdlib(text)), data[:200]
    if want[1] is None:
        check_dumps(want[0])
    check_float_free(data)


def has_float(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is float:
            return True
        stack.extend(item.values() if isinstance(item, dict) else item if isinstance(item, list) else ())
    return False


def check_float_free(data: bytes) -> bool | None:
    """A poll's reader (``plain.Reader``) says a text held no float exactly when its value holds
    none; then ``parsed_bytes`` writes the standard library's canonical bytes, or gives up (None)
    where orjson cannot write the value. Returns whether the fast bytes were used (None: not JSON)."""
    reader = plain.Reader()
    try:
        value = reader.decode(data)
    except plain.OffPath:
        return None
    assert reader.floats == has_float(value), data[:200]
    if reader.floats:
        return False
    fast = fastjson.parsed_bytes(value)
    try:
        expected = stdlib_canonical(value).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: strict UTF-8 refuses it, and so does orjson
        assert fast is None, data[:200]
        return False
    assert fast is None or fast == expected, data[:200]
    return fast is not None


def check_dumps(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        expected = stdlib_canonical(item)
        assert canonical(item) == expected
        assert fastjson.canonical_bytes(item) == utf8(expected)
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def test_the_corpus_parses_and_dumps_as_with_the_standard_library() -> None:
    inputs = corpus_inputs()
    assert len(inputs) > 200  # the corpus is there
    for data in inputs:
        check_one(data)
    # Most of the corpus holds no float: the check above compared the unchecked bytes on it.
    assert sum(bool(check_float_free(data)) for data in inputs) > len(inputs) // 2


@pytest.mark.parametrize(
    ("text", "floats", "fast"),
    [
        (b'{"a":[1,"x",null,true,-0]}', False, True),
        (b'{"a":1.5}', True, False),
        (b'{"a":1e5}', True, False),
        (b'{"a":"1.5 and 1e5 in a string"}', False, True),
        (b"[18446744073709551616]", False, False),
        (b'["\\ud800"]', False, False),
    ],
)
def test_a_reader_knows_when_the_unchecked_bytes_are_the_standard_librarys(text, floats, fast) -> None:
    reader = plain.Reader()
    reader.decode(text)
    assert reader.floats is floats
    assert check_float_free(text) is fast


def test_fuzzed_corpus_inputs_parse_and_dump_as_with_the_standard_library() -> None:
    inputs = corpus_inputs()
    for data in fuzzed(inputs, random.Random(28), 3000):
        check_one(data)
    for data in MUTATIONS:
        check_one(data)
        check_one(b'{"a":[' + data + b"]}")


@pytest.mark.parametrize(
    "value",
    [
        1e-05,
        {"x": [1, 2.5, {"y": 1e16}]},
        2**64,
        -(2**63) - 1,
        "\ud800",
        {"k": "\udfff"},
        {1: "int key"},
        (1, "tuple"),
        [[[[[]]]]],
        True,
        None,
    ],
)
def test_values_orjson_would_write_differently_are_written_by_the_standard_library(value: Any) -> None:
    assert canonical(value) == stdlib_canonical(value)
    assert fastjson.canonical_bytes(value) == utf8(stdlib_canonical(value))


def test_types_the_standard_library_refuses_are_still_refused() -> None:
    import dataclasses
    import datetime
    import uuid

    @dataclasses.dataclass
    class Point:
        x: int

    for value in (Point(1), datetime.date(2026, 1, 1), uuid.UUID(int=1), {"set"}, b"bytes"):
        with pytest.raises(TypeError):
            canonical(value)
        with pytest.raises(TypeError):
            stdlib_canonical(value)


def test_plain_values_take_the_fast_path() -> None:
    assert fastjson.loads_plain(b'{"a":[1,"x",null,true]}', MAX_JSON_DEPTH) == {"a": [1, "x", None, True]}
    assert fastjson.loads_plain(b'{"a":1.5}', MAX_JSON_DEPTH) is fastjson.NotPlain
    assert fastjson.loads_plain(b"[18446744073709551616]", MAX_JSON_DEPTH) is fastjson.NotPlain
    assert fastjson.loads_plain(b"[[[]]]", 2) is fastjson.NotPlain
    # A text holding a lone surrogate (not from a file: a caller's str) is read by json, as before.
    for text in ('"\ud800"', '["a\udc00"]'):
        assert fastjson.loads_plain(text, MAX_JSON_DEPTH) is fastjson.NotPlain
        assert same(load_json(text), load_json_stdlib(text)) and load_json(text)[1] is None
