"""Write the full stack's keys into .env once: SECRET_KEY, FIELD_ENCRYPTION_KEY and MinIO's
MINIO_ROOT_PASSWORD (compose would otherwise fall back to a password written in the file).

docker compose reads .env beside docker-compose.yml. Keys are generated only where .env lacks
them, never replaced: a new FIELD_ENCRYPTION_KEY would make every stored server and channel
secret unreadable. Keep the file (and a copy of it with your backups).

    python3 scripts/make_env.py [PATH]     # default: .env next to docker-compose.yml
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

KEYS = ("SECRET_KEY", "FIELD_ENCRYPTION_KEY", "MINIO_ROOT_PASSWORD")


def existing_keys(text: str) -> set[str]:
    names = set()
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and value.strip() and not name.lstrip().startswith("#"):
            names.add(name.strip())
    return names


def ensure_env(path: Path) -> list[str]:
    """Add the keys `path` lacks; returns the names added."""
    text = path.read_text() if path.exists() else ""
    missing = [k for k in KEYS if k not in existing_keys(text)]
    if not missing:
        return []
    lines = [f"{name}={secrets.token_urlsafe(50)}" for name in missing]
    prefix = "" if not text or text.endswith("\n") else "\n"
    # Owner-only from the first byte: the file holds the keys to every stored secret.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a") as handle:
        handle.write(prefix + "\n".join(lines) + "\n")
    return missing


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent / ".env"
    added = ensure_env(path)
    if added:
        print(f"{path}: added {', '.join(added)}. Keep this file; back it up with the database.")
    else:
        print(f"{path}: already has {', '.join(KEYS)}; nothing changed.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
