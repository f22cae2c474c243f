"""Claude Code transcripts with ToolSearch events, written for a test (the shapes of
tests/data/logs/claude_code_tool_search.jsonl)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any


class Transcript:
    """One session: each step is a model request (an assistant line) and its result line."""

    def __init__(self, session: str, start: datetime) -> None:
        self.session, self.at, self.lines, self.n = session, start, [], 0

    def _line(self, kind: str, content: Any, **extra: Any) -> None:
        self.at += timedelta(seconds=1)
        record = {
            "type": kind,
            "sessionId": self.session,
            "uuid": f"{self.session}-{len(self.lines)}",
            "timestamp": self.at.isoformat().replace("+00:00", "Z"),
            "version": "2.1.90",
            **extra,
        }
        record["message"] = {"role": kind, "content": content}
        if kind == "assistant":
            self.n += 1
            record["message"].update(id=f"{self.session}-msg-{self.n}", usage={"output_tokens": 20})
        self.lines.append(record)

    def search(self, query: str, *matches: str) -> Transcript:
        use = f"{self.session}-s{len(self.lines)}"
        self._line(
            "assistant",
            [
                {
                    "type": "tool_use",
                    "id": use,
                    "name": "ToolSearch",
                    "input": {"query": query, "max_results": 5},
                }
            ],
        )
        content = [
            {"type": "tool_reference", "tool_name": m} for m in matches
        ] or "No matching deferred tools found"
        self._line(
            "user",
            [{"type": "tool_result", "tool_use_id": use, "content": content}],
            toolUseResult={"matches": list(matches), "query": query, "total_deferred_tools": 30},
        )
        return self

    def call(self, name: str) -> Transcript:
        use = f"{self.session}-c{len(self.lines)}"
        self._line("assistant", [{"type": "tool_use", "id": use, "name": name, "input": {}}])
        self._line(
            "user", [{"type": "tool_result", "tool_use_id": use, "content": [{"type": "text", "text": "ok"}]}]
        )
        return self

    def text(self) -> Transcript:
        self._line("assistant", [{"type": "text", "text": "Done."}])
        return self


def write(path: Path, transcripts: list[Transcript]) -> Path:
    with open(path, "w") as f:
        for t in transcripts:
            for record in t.lines:
                f.write(json.dumps(record) + "\n")
    return path
