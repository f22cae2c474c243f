"""JSON parsing and canonical dumps through orjson, only where the result is the standard library's.

orjson is several times faster than ``json`` but not the same everywhere: it reads an integer
beyond 64 bits as a float, writes ``1e-05`` as ``0.00001``, serializes dataclasses, datetimes and
UUIDs that ``json`` refuses, and rejects lone surrogates. So its result is used only for plain
values: dicts with ``str`` keys, lists, tuples, ``str``, ``int``, ``bool`` and ``None``, each of
exactly those types (no float anywhere, no subclass); anything else goes through ``json`` as
before. For those values both give the same objects (parsing) and the same text (dumping);
tests/mcptax/test_fastjson.py compares them on the whole corpus and on fuzzed variants of it.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_SCALARS = frozenset({str, int, bool, type(None)})


def plain_depth(value: Any, limit: int) -> int:
    """0 when ``value`` is plain (see the module docstring) and nests at most ``limit`` deep;
    1 when it is plain but deeper (as ``records.too_deep`` counts depth); 2 when it is not plain."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    deep = 0
    scalars = _SCALARS
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is dict:
            for key in item:
                if type(key) is not str:
                    return 2
            children: Any = item.values()
        elif kind is list or kind is tuple:
            children = item
        elif kind in scalars:
            continue
        else:
            return 2
        if depth > limit:
            deep = 1
        depth += 1
        for child in children:
            if type(child) in scalars:
                continue
            stack.append((child, depth))
    return deep


_DEEP = 1 << 30


def loads_plain(data: bytes | str, limit: int) -> Any:
    """The parsed value when orjson reads ``data`` as a plain value nested at most ``limit`` deep
    (then ``json.loads`` gives an equal one, of the same types and key order); ``NotPlain``
    otherwise (not JSON, a float, too deep ...: the standard library says what)."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return NotPlain
    if type(value) in _SCALARS or plain_depth(value, limit) == 0:
        return value
    return NotPlain


class NotPlain:
    """Returned by ``loads_plain`` when the standard library has to read the input."""


def _dumps_stdlib(x: Any) -> str:
    return json.dumps(x, separators=(",", ":"), ensure_ascii=False)


def canonical(x: Any) -> str:
    """``json.dumps(x, separators=(",", ":"), ensure_ascii=False)``, by orjson when ``x`` is plain."""
    if type(x) is str or plain_depth(x, _DEEP) == 0:
        try:
            return orjson.dumps(x).decode("utf-8")
        except orjson.JSONEncodeError:  # an integer beyond 64 bits, a lone surrogate, too deep
            pass
    return _dumps_stdlib(x)


def canonical_bytes(x: Any) -> bytes:
    """The UTF-8 bytes of ``canonical(x)`` (lone surrogates passed through, as ``records.utf8``)."""
    if type(x) is str or plain_depth(x, _DEEP) == 0:
        try:
            return orjson.dumps(x)
        except orjson.JSONEncodeError:
            pass
    return _dumps_stdlib(x).encode("utf-8", "surrogatepass")


def parsed_bytes(x: Any) -> bytes | None:
    """The UTF-8 bytes of ``canonical(x)`` for an ``x`` that ``json.loads`` made of a text with
    no float in it (plain by construction, so unchecked); None where orjson cannot write it (an
    integer beyond 64 bits, a lone surrogate, nesting past its limit): the caller's usual path
    then decides."""
    try:
        return orjson.dumps(x)
    except orjson.JSONEncodeError:
        return None
