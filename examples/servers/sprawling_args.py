"""Argument types shared by every release of files-sprawl: the verbose descriptions are part of the
fixed tax the example demonstrates, so they stay word for word."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

PathArg = Annotated[
    str,
    Field(
        description=(
            "The path of the file or directory to operate on. Relative paths are interpreted relative "
            "to the server's configured root directory; absolute paths are accepted only when they "
            "point inside that root. Paths that escape the root (for example through '..' segments or "
            "symbolic links that point elsewhere) are rejected with an error."
        )
    ),
]
EncodingArg = Annotated[
    str,
    Field(
        description=(
            "The character encoding used to decode the file's bytes into text, for example 'utf-8', "
            "'utf-16', 'latin-1' or 'cp1252'. Any encoding name known to Python's codecs module is "
            "accepted. Undecodable bytes cause an error rather than being silently replaced."
        )
    ),
]
