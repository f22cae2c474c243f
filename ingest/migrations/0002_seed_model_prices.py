"""Seed global example prices (USD per million tokens). Editable: teams add their own rows."""

from decimal import Decimal

from django.db import migrations

# Examples only, as listed by the vendors in 2025; edit them on the price page or in the admin.
EXAMPLE_PRICES = [
    # (model, agent family, is default, input, output)
    ("claude-sonnet-4", "", True, "3", "15"),
    ("claude-sonnet-4", "claude-code", False, "3", "15"),
    ("claude-opus-4", "", False, "15", "75"),
    ("gpt-5", "codex", False, "1.25", "10"),
    ("gemini-2.5-pro", "gemini-cli", False, "1.25", "10"),
]
NOTE = "Example price seeded at install; edit it to match your contract."


def seed(apps, schema_editor):
    ModelPrice = apps.get_model("ingest", "ModelPrice")
    for model, family, is_default, input_price, output_price in EXAMPLE_PRICES:
        ModelPrice.objects.get_or_create(
            team=None,
            model=model,
            agent_family=family,
            defaults={
                "is_default": is_default,
                "input_usd_per_mtok": Decimal(input_price),
                "output_usd_per_mtok": Decimal(output_price),
                "note": NOTE,
            },
        )


def unseed(apps, schema_editor):
    ModelPrice = apps.get_model("ingest", "ModelPrice")
    ModelPrice.objects.filter(team=None, note=NOTE).delete()


class Migration(migrations.Migration):
    dependencies = [("ingest", "0001_initial")]
    operations = [migrations.RunPython(seed, unseed)]
