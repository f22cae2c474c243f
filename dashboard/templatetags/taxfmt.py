"""Number formatting for token figures: thousands separators and honest signs (deltas can be < 0)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.utils import timezone

register = template.Library()

MINUS = "\u2212"


@register.filter
def tokens(value: Any) -> str:
    if value is None or value == "":
        return "–"
    try:
        number = int(value)
    except (TypeError, ValueError):
        return str(value)
    return f"{number:,}".replace("-", MINUS)


@register.filter
def signed(value: Any) -> str:
    """+1,234 / −142 / ±0; the sign is the point of a delta."""
    if value is None or value == "":
        return "–"
    number = int(value)
    if number == 0:
        return "±0"
    return f"+{number:,}" if number > 0 else f"{MINUS}{-number:,}"


@register.filter
def pct(value: Any, digits: int = 1) -> str:
    if value is None or value == "":
        return "–"
    return f"{float(value):.{int(digits)}f}%"


@register.filter
def signed_pct(value: Any, digits: int = 1) -> str:
    if value is None or value == "":
        return "–"
    number = float(value)
    text = f"{abs(number):.{int(digits)}f}%"
    if round(number, int(digits)) == 0:
        return "±" + text
    return ("+" if number > 0 else MINUS) + text


@register.filter
def delta_css(value: Any) -> str:
    """More tokens is worse: red up, green down."""
    if value is None or value == "" or float(value) == 0:
        return ""
    return "up" if float(value) > 0 else "down"


@register.filter
def age(value: datetime | None) -> str:
    """Short age: 45 s, 12 min, 3 h, 5 d."""
    if not value:
        return "never"
    seconds = max(0, int((timezone.now() - value).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return f"{seconds} s ago"


@register.filter
def get_item(mapping: Any, key: Any) -> Any:
    return mapping.get(key) if hasattr(mapping, "get") else None


@register.filter
def share_of(value: Any, window: Any) -> float | None:
    """Percent of a context window."""
    if value is None or not window:
        return None
    return 100.0 * float(value) / float(window)
