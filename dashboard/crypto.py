"""Encryption at rest for server and channel secrets (HTTP headers, stdio env, channel config).

Fernet keys come from FIELD_ENCRYPTION_KEY: one key, or several separated by commas for a key
rotation (the first encrypts, every one decrypts; `manage.py reencrypt_secrets` then rewrites
every stored value under the first). With FIELD_ENCRYPTION_KEY unset the key is derived from
SECRET_KEY, so the embedded run needs no configuration; that derived key stays a decryption key
when FIELD_ENCRYPTION_KEY is set later, so values written before still read.
"""

from __future__ import annotations

import base64
import hashlib
import json
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.db import models
from django.db.models.expressions import Combinable


@lru_cache(maxsize=16)
def _fernet(key_material: str) -> Fernet:
    # Any string is a key: hashed to the 32 bytes Fernet wants, so an operator can paste a
    # passphrase or the output of `secrets.token_urlsafe()`.
    digest = hashlib.sha256(key_material.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


@lru_cache(maxsize=4)
def _keyring(field_keys: str, secret_key: str) -> MultiFernet:
    materials = [k.strip() for k in field_keys.split(",") if k.strip()]
    # Values written before FIELD_ENCRYPTION_KEY was set were encrypted with SECRET_KEY's key.
    materials.append(secret_key)
    return MultiFernet([_fernet(m) for m in dict.fromkeys(materials)])


def fernet() -> MultiFernet:
    return _keyring(settings.FIELD_ENCRYPTION_KEY or "", settings.SECRET_KEY)


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
        # Nothing to hide in an empty value: stored as "" so it never depends on a key at all
        # (a lost or changed key then breaks only rows that hold a secret).
        if not value:
            return ""
        return encrypt_json(value)


def mask(value: str) -> str:
    """Show enough of a secret to recognise it, never the whole."""
    if len(value) <= 8:
        return "•" * len(value)
    return value[:4] + "•" * 6 + value[-2:]
