"""Encryption at rest for server secrets (HTTP headers, stdio env).

Fernet with a key from FIELD_ENCRYPTION_KEY, or derived from SECRET_KEY when that is unset, so
the embedded run needs no extra configuration. Rotating SECRET_KEY without setting
FIELD_ENCRYPTION_KEY makes stored secrets unreadable; the README says so.
"""

from __future__ import annotations

import base64
import hashlib
import json
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.db import models
from django.db.models.expressions import Combinable


@lru_cache(maxsize=4)
def _fernet(key_material: str) -> Fernet:
    digest = hashlib.sha256(key_material.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def fernet() -> Fernet:
    return _fernet(settings.FIELD_ENCRYPTION_KEY or settings.SECRET_KEY)


class DecryptionError(Exception):
    pass


def encrypt_json(value: Any) -> str:
    return fernet().encrypt(json.dumps(value).encode()).decode()


def decrypt_json(token: str) -> Any:
    try:
        return json.loads(fernet().decrypt(token.encode()))
    except InvalidToken as exc:
        raise DecryptionError("stored secret cannot be decrypted with the current key") from exc


if TYPE_CHECKING:
    # Set and read as a dict (stored as a token string); the stubs' field is generic over both.
    _DictTextField = models.TextField[dict[str, Any] | Combinable, dict[str, Any]]
else:  # Django's field class is not subscriptable at runtime
    _DictTextField = models.TextField


class EncryptedJSONField(_DictTextField):
    """A dict stored as a Fernet token. Reads give the plain dict; the database never sees it."""

    def from_db_value(self, value: str | None, expression: object, connection: object) -> dict[str, Any]:
        if value in (None, ""):
            return {}
        return dict(decrypt_json(value))

    def to_python(self, value: Any) -> dict[str, Any]:
        if isinstance(value, dict):
            return value
        if value in (None, ""):
            return {}
        return dict(decrypt_json(value))

    def get_prep_value(self, value: Any) -> str:
        return encrypt_json(value or {})


def mask(value: str) -> str:
    """Show enough of a secret to recognise it, never the whole."""
    if len(value) <= 8:
        return "•" * len(value)
    return value[:4] + "•" * 6 + value[-2:]
