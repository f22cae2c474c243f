"""Property tests: no input makes a parser or the assembler raise, and every line is accounted for."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcptax.bulk import find_bulk_arguments, resolve_pointer
from mcptax.formats import LineOutcome, ObservedCall, Tally, UnknownFormatError, detect_format, read_calls
from mcptax.formats.records import Discovered
from tests.mcptax.formats.helpers import LOGS

JSONL_SAMPLES = {
    "envelope": ["envelope.jsonl", "envelope_redacted.jsonl"],
    "claude-code": ["claude_code_session.jsonl"],
    "codex": ["codex_rollout.jsonl"],
}
FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**30, max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=25,
)

# Hand-picked hostile lines: deep nesting, numbers Python or JSON cannot hold, bad UTF-8, NUL bytes.
NASTY_LINES = [
    b"[" * 5000,
    b'{"a":' * 3000 + b"1" + b"}" * 3000,
    b'{"session_id":"s","direction":"c2s","raw":' + b"[" * 300 + b"]" * 300 + b"}",
    b'{"n": ' + b"9" * 5000 + b"}",
    b'{"n": 1e999}',
    b'{"n": NaN}',
    b'{"x": "\xff\xfe"}',
    b"\x00\x00\x00",
    b'"just a string"',
    b"12345",
    b"null",
    b'{"raw": "\\ud800"}',
    b"\xef\xbb\xbf{}",
    b"   ",
]


def _mutate_record(data: st.DataObject, record: object) -> object:
    """Replace one node of a parsed line by random JSON, or delete one key."""
    nodes: list[tuple[object, object]] = []  # (container, key)
    stack = [record]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                nodes.append((node, key))
                stack.append(value)
        elif isinstance(node, list):
            for index, value in enumerate(node):
                nodes.append((node, index))
                stack.append(value)
    if not nodes:
        return data.draw(json_values)
    container, key = data.draw(st.sampled_from(nodes))
    if isinstance(container, dict) and data.draw(st.booleans()):
        del container[key]
    else:
        container[key] = data.draw(json_values)  # type: ignore[index]
    return record


def _garble(data: st.DataObject, line: bytes) -> bytes:
    action = data.draw(st.sampled_from(["keep", "truncate", "insert", "field", "bytes", "nasty", "swap"]))
    if action == "keep":
        return line
    if action == "truncate":
        return line[: data.draw(st.integers(0, max(len(line) - 1, 0)))]
    if action == "insert":
        at = data.draw(st.integers(0, len(line)))
        junk = data.draw(st.binary(min_size=1, max_size=8)).replace(b"\n", b"")
        return line[:at] + junk + line[at:]
    if action == "field":
        try:
            record = json.loads(line)
        except ValueError:
            return line
        return json.dumps(_mutate_record(data, record), ensure_ascii=data.draw(st.booleans())).encode()
    if action == "bytes":
        return data.draw(st.binary(max_size=60)).replace(b"\n", b"")
    if action == "nasty":
        return data.draw(st.sampled_from(NASTY_LINES))
    return line.replace(b'"c2s"', b'"s2c"').replace(b'"user"', b'"assistant"')


def _line_count(blob: bytes) -> int:
    return len(list(io.BytesIO(blob)))


def assert_reconciles(items: list, expected_lines: int) -> None:
    emitted: set[str] = set()
    lines: list[int] = []
    tally = Tally()
    for item in items:
        tally.observe(item)
        if isinstance(item, ObservedCall):
            emitted.add(item.dedupe_key)
            assert isinstance(item.arguments, dict) and isinstance(item.tool, str)
        elif not isinstance(item, Discovered):
            assert isinstance(item, LineOutcome)
            assert set(item.call_keys) <= emitted
            lines.append(item.line_no)
    assert sorted(lines) == list(range(1, expected_lines + 1))
    assert tally.complete


@pytest.mark.parametrize("fmt", sorted(JSONL_SAMPLES))
@FUZZ
@given(data=st.data())
def test_garbled_jsonl_never_raises_and_always_reconciles(fmt: str, data: st.DataObject) -> None:
    source = b"".join((LOGS / name).read_bytes() for name in JSONL_SAMPLES[fmt]).splitlines()
    picked = data.draw(st.lists(st.sampled_from(source), min_size=1, max_size=25))
    lines = [_garble(data, line) for line in picked]
    blob = b"\n".join(lines) + data.draw(st.sampled_from([b"", b"\n", b"\r\n"]))
    items = list(read_calls(io.BytesIO(blob), fmt, max_line_bytes=data.draw(st.sampled_from([64, 1 << 24]))))
    assert_reconciles(items, _line_count(blob))
    with contextlib.suppress(UnknownFormatError):  # the only error detection may raise
        detect_format(blob[:65536])


def _strict_entries(blob: bytes) -> int:
    """How many 'lines' a HAR document has: its entries, or 1 for an unusable document."""
    if not blob.strip():
        return 0

    def reject(_: str) -> None:
        raise ValueError

    try:
        doc = json.loads(blob.decode("utf-8"), parse_constant=reject)
        return len(doc["log"]["entries"]) if isinstance(doc["log"]["entries"], list) else 1
    except (ValueError, KeyError, TypeError, RecursionError):
        return 1


@FUZZ
@given(data=st.data())
def test_garbled_har_never_raises_and_always_reconciles(data: st.DataObject) -> None:
    doc = json.loads((LOGS / "mcp_session.har").read_bytes())
    entries = doc["log"]["entries"]
    picked = data.draw(st.lists(st.sampled_from(range(len(entries))), max_size=12))
    new_entries = []
    for index in picked:
        entry = json.loads(json.dumps(entries[index]))
        if data.draw(st.booleans()):
            entry = _mutate_record(data, entry)
        if isinstance(entry, dict) and data.draw(st.booleans()):
            # Garble a body in place: truncated JSON or SSE, bad base64, random text.
            for part, field in (("request", "postData"), ("response", "content")):
                holder = entry.get(part, {}).get(field) if isinstance(entry.get(part), dict) else None
                if isinstance(holder, dict) and isinstance(holder.get("text"), str):
                    text = holder["text"]
                    holder["text"] = text[: data.draw(st.integers(0, len(text)))] + data.draw(
                        st.text(max_size=10)
                    )
        new_entries.append(entry)
    doc["log"]["entries"] = new_entries
    blob = json.dumps(doc).encode()
    if data.draw(st.integers(0, 4)) == 0:
        blob = _garble(data, blob)
    items = list(read_calls([blob], "har"))
    assert_reconciles(items, _strict_entries(blob))


@FUZZ
@given(
    arguments=st.dictionaries(st.text(max_size=10), json_values, max_size=6),
    big=st.text(min_size=0, max_size=1100),
)
def test_bulk_pointers_always_resolve_to_their_content(arguments: dict, big: str) -> None:
    arguments = {**arguments, "nested": {"list": [big * 2, {"content": big}]}}
    for bulk in find_bulk_arguments(arguments):
        value = resolve_pointer(arguments, bulk.pointer)
        if bulk.kind == "string":
            assert value == bulk.content
            assert bulk.bytes == len(value.encode("utf-8", "surrogatepass"))
        else:
            assert bulk.kind == "array" and len(value) == bulk.elements >= 100
