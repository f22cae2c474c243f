"""The caller's stated hash of a bulk argument, kept at ingest.

An agent may say which content it means to send (``expected_sha256``/``sha256`` in the arguments,
or in ``_meta``). The arguments themselves are not stored, so the statement is read here, while
the call is in hand, and kept on its BulkArgument for the fidelity step to judge against.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcptax.bulk import EXPECTED_HASH_KEYS, BulkArg

CALLER, META = "caller", "meta"
_HEX = frozenset("0123456789abcdef")


def _stated_hash(source: Any) -> str | None:
    if not isinstance(source, dict):
        return None
    for key in EXPECTED_HASH_KEYS:
        value = source.get(key)
        if isinstance(value, str):
            value = value.strip().lower()
            if len(value) == 64 and set(value) <= _HEX:
                return value
    return None


def caller_expectations(arguments: Any, meta: Any, bulk: Sequence[BulkArg]) -> dict[str, tuple[str, str]]:
    """``{pointer: (expected_sha256, "caller" | "meta")}`` for the bulk arguments a stated hash covers.

    One stated hash names one content. With a single bulk argument it is that one; with several,
    the one whose sha256 it is, else the largest (the argument an agent would check), so a small
    side argument is never blamed for not matching the main document.
    """
    stated = _stated_hash(arguments)
    source = CALLER
    if stated is None:
        stated, source = _stated_hash(meta), META
    if stated is None or not bulk:
        return {}
    if len(bulk) == 1:
        return {bulk[0].pointer: (stated, source)}
    target = next((b for b in bulk if b.sha256 == stated), None)
    if target is None:
        target = max(bulk, key=lambda b: b.bytes or 0)
    return {target.pointer: (stated, source)}
