"""The tally of what :func:`mcptax.formats.assemble.assemble` yielded, and the check that every
input line was accounted for exactly once."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from mcptax.formats.assemble import Output
from mcptax.formats.records import CALL, DUPLICATE, IGNORED, Discovered, ObservedCall


@dataclass
class Tally:
    """Counts of what ``assemble`` yielded, and the check that every line was accounted for.

    ``complete`` holds when the outcomes are exactly lines 1..read, each once: the final
    watermark equals the number of outcomes (so no line is missing, none counted twice).
    """

    read: int = 0
    call_lines: int = 0
    duplicate: int = 0
    ignored: int = 0
    quarantined: int = 0
    calls: int = 0
    watermark: int = 0
    reasons: Counter[str] = field(default_factory=Counter)

    def observe(self, item: Output) -> None:
        if isinstance(item, ObservedCall):
            self.calls += 1
            return
        if isinstance(item, Discovered):
            return
        self.read += 1
        self.watermark = max(self.watermark, item.watermark)
        if item.status == CALL:
            self.call_lines += 1
        elif item.status == DUPLICATE:
            self.duplicate += 1
            self.reasons[f"duplicate:{item.reason}"] += 1
        elif item.status == IGNORED:
            self.ignored += 1
            self.reasons[f"ignored:{item.reason}"] += 1
        else:
            self.quarantined += 1
            self.reasons[f"quarantined:{item.reason}"] += 1

    @property
    def complete(self) -> bool:
        return (
            self.watermark == self.read == self.call_lines + self.duplicate + self.ignored + self.quarantined
        )
