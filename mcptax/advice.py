"""Advice on how a server's tools load, each piece with the saving in tokens.

This module gives the advice a server's own tools and `instructions` are enough for; advice from
a team's history (which tools are called, loaded, missed) is appended to the same list by its
callers, as more `Advice` items. Django-free.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from mcptax import tokens
from mcptax.loading import Mode, ServerLoading

# Claude Code puts a server's instructions in the first user turn and cuts them at 2,048
# characters (its MCP documentation; measured in public write-ups): text beyond is never read.
INSTRUCTIONS_CHAR_LIMIT = 2048

ADD_INSTRUCTIONS = "add_instructions"
SHORTEN_INSTRUCTIONS = "shorten_instructions"


@dataclass(frozen=True)
class Advice:
    """One piece of advice. `saving_tokens` is per request unless `per` says otherwise."""

    kind: str
    server: str
    message: str
    saving_tokens: int
    tool: str | None = None
    per: str = "request"
    source: str = "tools"  # "tools" (the server's own list) or "history" (the team's logs)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def instructions_advice(
    figures: ServerLoading, instructions: str | None, encoding: str = tokens.DEFAULT_ENCODING
) -> list[Advice]:
    """Missing or oversized `instructions`, for a server its client defers (under tool search they
    are how the model knows to look for the server's tools)."""
    deferred = figures.modes.get(Mode.DEFERRED)
    if deferred is None or figures.always_load or not deferred.tools:
        return []
    eager = figures.modes[Mode.EAGER]
    text = instructions or ""
    if not text.strip():
        saving = eager.upfront - deferred.upfront
        return [
            Advice(
                ADD_INSTRUCTIONS,
                figures.server,
                f"Add server instructions: deferred, the model sees only the names of "
                f"{len(deferred.tools)} tools and no word on when to search for them. Deferral saves "
                f"{saving:,} tokens per request only if the model finds the tools it needs.",
                saving,
            )
        ]
    if len(text) <= INSTRUCTIONS_CHAR_LIMIT:
        return []
    enc = tokens.get_encoding(encoding)
    saving = tokens.count(text, enc) - tokens.count(text[:INSTRUCTIONS_CHAR_LIMIT], enc)
    return [
        Advice(
            SHORTEN_INSTRUCTIONS,
            figures.server,
            f"Shorten the server instructions to {INSTRUCTIONS_CHAR_LIMIT:,} characters (now "
            f"{len(text):,}): Claude Code cuts them there, so the last {saving:,} tokens never reach "
            "the model; put what says when to search for this server's tools first.",
            saving,
        )
    ]


def by_saving(items: Iterable[Advice]) -> list[Advice]:
    """Largest saving first (stable for equal savings)."""
    return sorted(items, key=lambda a: -a.saving_tokens)
