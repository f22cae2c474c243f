"""The one rule for names people give things (servers, stacks, channels, teams, tokens, reference
documents): no control characters.

A name travels into e-mail subjects, Slack titles, webhook payloads and HTTP headers; a CR or LF
there makes the mail library refuse the whole message (header injection), and a NUL makes
PostgreSQL refuse the row. So names are checked where they come in (models, forms, the API), and
text built from names that were stored before the rule existed is flattened on its way out.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models

NAME_RULE = "Names cannot contain control characters (line breaks, tabs, NUL)."


def has_control(value: str) -> bool:
    """C0 and C1 controls, DEL, and the Unicode line and paragraph separators."""
    return any(unicodedata.category(ch) == "Cc" or ch in "\u2028\u2029" for ch in value)


def validate_name(value: Any) -> None:
    if isinstance(value, str) and has_control(value):
        raise ValidationError(NAME_RULE, code="control_characters")


def check_name(value: str) -> str:
    """The same rule for plain code and pydantic schemas: ValueError instead of ValidationError."""
    if has_control(value):
        raise ValueError(NAME_RULE)
    return value


_CONTROL_RUN = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def one_line(text: str) -> str:
    """Text safe for a header or a subject: every run of control characters becomes one space."""
    return _CONTROL_RUN.sub(" ", text).strip()


class NameField(models.CharField):
    """A CharField whose values obey the name rule, in every ModelForm and in full_clean().

    The rule is application validation, not schema: the field deconstructs as a plain CharField,
    so adding it changes no migration.
    """

    default_validators = [validate_name]

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.CharField", args, kwargs
