"""`tokens FILE`: the fixed tax of a saved tools/list, shared by `mcp-tax tokens` and
`manage.py tokens` (one reader, one report format)."""

from __future__ import annotations

import json
from pathlib import Path

from mcptax import tokens


class TokensFileError(Exception):
    """FILE could not be read or counted; the message says why (it names the file)."""


def report_for_file(path: str | Path, encoding: str = tokens.DEFAULT_ENCODING) -> tokens.TokenReport:
    """Read a tools document (docs/definitions.md) from `path` and count it."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TokensFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TokensFileError(f"{path}: is a directory, not a tools/list file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TokensFileError(f"{path}: not valid JSON ({exc})") from None
    except OSError as exc:
        raise TokensFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        tools_list, instructions, _ = tokens.load_tools_document(data)
        return tokens.account(tools_list, instructions, encoding=encoding)
    except tokens.EncodingUnavailable as exc:
        raise TokensFileError(str(exc)) from None
    except ValueError as exc:
        raise TokensFileError(f"{path}: {exc}") from None


def render_json(report: tokens.TokenReport) -> str:
    return json.dumps(report.to_dict(), ensure_ascii=False, indent=2)


def render_text(report: tokens.TokenReport) -> list[str]:
    """The summary line, then one line per tool, heaviest first."""
    lines = [
        f"{report.tool_count} tools, fixed tax {report.fixed_tax_tokens:,} tokens ({report.encoding}); "
        f"instructions {report.instructions_tokens:,}; overhead {report.overhead_tokens:,}; "
        f"{report.bytes:,} bytes; sha256 {report.sha256}"
    ]
    width = max((len(t.name) for t in report.tools), default=4)
    lines.append(f"{'tool'.ljust(width)}  {'tokens':>7}  {'descr':>7}  {'schema':>7}")
    for t in sorted(report.tools, key=lambda t: -t.tokens):
        lines.append(f"{t.name.ljust(width)}  {t.tokens:>7}  {t.description_tokens:>7}  {t.schema_tokens:>7}")
    return lines
