"""Take the README's screenshots (docs/img/overview.png, docs/img/agent.png) with the browser test
that checks what they show: `.venv/bin/python scripts/screenshots.py`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(SCREENSHOTS_DIR=str(ROOT / "docs" / "img"), VAR_DIR=str(ROOT / "var" / "screenshots"))
    test = "tests/config/test_browser_screenshots.py"
    return subprocess.call(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test], cwd=ROOT, env=env
    )


if __name__ == "__main__":
    raise SystemExit(main())
