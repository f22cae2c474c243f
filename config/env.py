"""Small typed readers for settings that come from the environment: the one place settings.py
reads it from.

Each reader names the variable and its default in one place, so settings.py reads like a list
of what can be configured. A database URL is parsed by django-environ (`db_config`).
"""

import os
import secrets
from pathlib import Path
from typing import Any

import environ

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class ImproperlyConfiguredEnv(Exception):
    pass


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfiguredEnv(f"{name} must be a boolean (true/false), got {raw!r}")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfiguredEnv(f"{name} must be an integer, got {raw!r}") from None


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfiguredEnv(f"{name} must be a number, got {raw!r}") from None


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def db_config(url: str) -> dict[str, Any]:
    """Django's DATABASES entry for a database URL (`postgres://u:p@host:5432/db`, `sqlite:///path`)."""
    config: dict[str, Any] = environ.Env.db_url_config(url)
    return config


def persistent_secret_key(var_dir: Path) -> str:
    """Return a secret key kept under var/, creating it on first use.

    Only for the embedded (DEBUG) run: a developer gets stable sessions across restarts without
    configuring anything, and no key is ever committed.
    """
    path = var_dir / "secret_key"
    if path.exists():
        return path.read_text().strip()
    var_dir.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    path.write_text(key)
    path.chmod(0o600)
    return key
