"""Rewrite every encrypted value under the first FIELD_ENCRYPTION_KEY, the last step of a rotation."""

from __future__ import annotations

import json
from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import models, transaction

from dashboard.crypto import DecryptionError, EncryptedJSONField


def encrypted_fields() -> list[tuple[type[models.Model], list[str]]]:
    found = []
    for model in apps.get_models():
        names = [f.name for f in model._meta.concrete_fields if isinstance(f, EncryptedJSONField)]
        if names:
            found.append((model, names))
    return found


class Command(BaseCommand):
    help = (
        "Re-encrypt stored secrets with the first key of FIELD_ENCRYPTION_KEY. Rotate by putting the "
        "new key first (NEW,OLD), running this, then dropping OLD."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print the counts as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        counts: dict[str, int] = {}
        unreadable: list[str] = []
        for model, names in encrypted_fields():
            label = model._meta.label
            counts[label] = 0
            for pk in model._default_manager.values_list("pk", flat=True).iterator():
                try:
                    row = model._default_manager.only("pk", *names).get(pk=pk)
                except DecryptionError:
                    unreadable.append(f"{label} {pk}")
                    continue
                # update() runs each value through the field again: encrypted under the first key.
                with transaction.atomic():
                    model._default_manager.filter(pk=pk).update(**{n: getattr(row, n) for n in names})
                counts[label] += 1
        if options["json"]:
            self.stdout.write(json.dumps({"reencrypted": counts, "unreadable": unreadable}))
        else:
            for label, n in counts.items():
                self.stdout.write(f"{label}: {n} rows re-encrypted")
        if unreadable:
            raise CommandError(
                f"{len(unreadable)} rows could not be decrypted with any configured key "
                f"(left as they are): {', '.join(unreadable[:20])}"
            )
