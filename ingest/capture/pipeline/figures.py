"""The bulk arguments of an observed call with their figures: the hashing and tokenizing part of
storing a call, which touches no database."""

from __future__ import annotations

from dataclasses import asdict

from mcptax.bulk import BulkArg, find_bulk_arguments, resolve_pointer, text_figures
from mcptax.formats.records import ObservedCall


def call_figures(call: ObservedCall) -> list[BulkArg]:
    """The bulk arguments of a call with their figures, including the strings a capture cut."""
    bulk = find_bulk_arguments(call.arguments)
    return bulk + _cut_strings(call, {b.pointer for b in bulk})


def _cut_strings(call: ObservedCall, found_already: set[str]) -> list[BulkArg]:
    """The strings a capture cut that are too short to be found as bulk arguments: the value the
    cut went through was bulk (the capturing tool only cuts large frames), so it is recorded with
    the bytes seen, to be judged ``capture_truncated``."""
    found: list[BulkArg] = []
    for pointer in call.truncated_pointers:
        if pointer in found_already:
            continue
        try:
            value = resolve_pointer(call.arguments, pointer)
        except (KeyError, IndexError, ValueError):
            continue
        if isinstance(value, str):
            found.append(BulkArg(pointer, "string", content=value, **asdict(text_figures(value))))
    return found
