"""Serve the plotly.js bundled in the installed `plotly` package as static `vendor/plotly.min.js`.

The 4 MB file stays out of the repository, yet pages load it from our own origin (no CDN), and
`list()` exposes it so collectstatic (and whitenoise's manifest) pick it up in production.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, overload

from django.contrib.staticfiles.finders import BaseFinder
from django.core.checks import CheckMessage, Error
from django.core.files.storage import FileSystemStorage

PREFIX = "vendor"
FILENAME = "plotly.min.js"
STATIC_PATH = f"{PREFIX}/{FILENAME}"


def plotly_bundle_dir() -> Path:
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data"


class PlotlyFinder(BaseFinder):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.location = plotly_bundle_dir()
        self.storage = FileSystemStorage(location=str(self.location))
        # collectstatic copies a listed file to `prefix/path`, which is how it lands at vendor/.
        self.storage.prefix = PREFIX  # type: ignore[attr-defined]  # optional attribute collectstatic reads

    def check(self, **kwargs: Any) -> list[CheckMessage]:
        if not (self.location / FILENAME).is_file():
            return [Error(f"plotly.js not found at {self.location / FILENAME}; is `plotly` installed?")]
        return []

    @overload
    def find(self, path: str, find_all: Literal[False] = False, **kwargs: Any) -> str | None: ...

    @overload
    def find(self, path: str, find_all: Literal[True], **kwargs: Any) -> list[str]: ...

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> str | list[str] | None:
        find_all = find_all or kwargs.get("all", False)
        found = str(self.location / FILENAME) if path == STATIC_PATH else None
        if find_all:
            return [found] if found else []
        return found

    def list(self, ignore_patterns: Any) -> Iterator[tuple[str, FileSystemStorage]]:
        yield FILENAME, self.storage
