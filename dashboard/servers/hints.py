"""Hints added to a failed poll's message when the cause is likely on our side of the command."""

from __future__ import annotations

import os
import re
import shutil
import sys

_PYTHON = re.compile(r"python(\d+(\.\d+)?)?")


def interpreter_hint(command: str) -> str:
    """For a stdio server started as `python ...` with another interpreter than the worker's own:
    say which interpreter that is, since the server's packages are often only in the project's."""
    if not _PYTHON.fullmatch(os.path.basename(command)):
        return ""
    found = command if os.path.isabs(command) else shutil.which(command)
    if found and os.path.realpath(found) == os.path.realpath(sys.executable):
        return ""
    where = f"runs {found}" if found else "is not on the worker's PATH"
    return (
        f" Hint: `{command}` {where}, not the worker's interpreter ({sys.executable}); if the "
        f"server's packages are installed there, give that path as the command."
    )
