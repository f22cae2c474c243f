"""Static files under hashed names, gzip-compressed, cached by browsers for good (WhiteNoise).

Production (`DEBUG=false`) is strict, as WhiteNoise's storage is: `collectstatic` must have run
(the Dockerfile does), and a name missing from the manifest is an error. In development the same
storage is used once `collectstatic` has run (`make run` runs it), so the embedded run serves the
plotly.js compressed and immutable too; a file not collected yet, or edited since, is served
under its plain name from the source tree (WhiteNoise's finders), so editing a stylesheet never
needs a collectstatic to show.
"""

from __future__ import annotations

import os
from typing import Any

from django.contrib.staticfiles import finders
from whitenoise.storage import CompressedManifestStaticFilesStorage  # type: ignore[import-untyped]


class StaticStorage(CompressedManifestStaticFilesStorage):
    def __init__(self, *args: Any, development: bool = False, **kwargs: Any) -> None:
        self.development = development
        super().__init__(*args, **kwargs)
        manifest = os.path.join(self.location, self.manifest_name) if self.location else ""
        self._manifest_mtime = os.path.getmtime(manifest) if manifest and os.path.exists(manifest) else None

    def url(self, name: str | None, force: bool = False) -> str:
        # Django answers plain names whenever DEBUG is on (`make run`); a collected, current file
        # goes out under its hashed name anyway, so WhiteNoise serves it compressed and immutable.
        if self.development and name and self._collected_and_current(name):
            force = True
        return str(super().url(name, force=force))

    def stored_name(self, name: str) -> str:
        if self.development and not self._collected_and_current(name):
            return name
        return str(super().stored_name(name))

    def _collected_and_current(self, name: str) -> bool:
        if self._manifest_mtime is None or self.hash_key(self.clean_name(name)) not in self.hashed_files:
            return False
        source = finders.find(name)
        return isinstance(source, str) and os.path.getmtime(source) <= self._manifest_mtime
