"""Loaded first (``-p tests.xdist_env`` in pytest's addopts), before Django's settings are read.

Under pytest-xdist each worker is a process of its own that starts servers, workers and
``manage.py`` runs writing under VAR_DIR (the embedded broker's folders, the spool, static files,
the media). Two workers sharing one VAR_DIR would take each other's messages and files, so each
gets a folder of its own under the run's VAR_DIR. Without xdist this does nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker:
    _base = os.environ.get("VAR_DIR") or str(Path(__file__).resolve().parent.parent / "var")
    os.environ["VAR_DIR"] = str(Path(_base) / _worker)
