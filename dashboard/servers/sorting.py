"""Sorting a page's rows by a query parameter, and the column header links that flip it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode


def normalize_sort(raw: str | None, keys: dict[str, Any], default: str) -> tuple[str, str, bool]:
    """(sort param as given or default, key name, descending)."""
    raw = raw or default
    name = raw.lstrip("-")
    if name not in keys:
        raw, name = default, default.lstrip("-")
    return raw, name, raw.startswith("-")


@dataclass
class SortColumn:
    key: str
    label: str
    query: str
    arrow: str
    numeric: bool
    title: str = ""


def sort_columns(
    columns: list[tuple[str, str, bool]] | list[tuple[str, str, bool, str]],
    current: str,
    params: dict[str, Any],
    param: str = "sort",
) -> list[SortColumn]:
    """Header links: clicking the sorted column flips it; another column sorts large-first if numeric.
    A column may carry a fourth item, its header's tooltip."""
    out = []
    for key, label, numeric, *title in columns:
        if current.lstrip("-") == key:
            target = key if current.startswith("-") else f"-{key}"
            arrow = "▼" if current.startswith("-") else "▲"
        else:
            target, arrow = (f"-{key}" if numeric else key), ""
        query = urlencode({**{k: v for k, v in params.items() if v not in (None, "")}, param: target})
        out.append(SortColumn(key, label, query, arrow, numeric, *title))
    return out
