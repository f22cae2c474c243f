# Snapshot.tax_delta: the fixed tax minus the previous snapshot's, filled for the stored history.

from django.db import migrations, models
from django.db.models import F, OuterRef, Subquery


def fill_tax_delta(apps, schema_editor):
    Snapshot = apps.get_model("dashboard", "Snapshot")
    previous_tax = Snapshot.objects.filter(pk=OuterRef("previous_id")).values("fixed_tax_tokens")[:1]
    Snapshot.objects.filter(previous__isnull=False).update(
        tax_delta=F("fixed_tax_tokens") - Subquery(previous_tax)
    )


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0013_budget_names"),
    ]

    operations = [
        migrations.AddField(
            model_name="snapshot",
            name="tax_delta",
            field=models.IntegerField(blank=True, null=True),
        ),
        migrations.RunPython(fill_tax_delta, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="snapshot",
            index=models.Index(
                condition=models.Q(("tax_delta__lt", 0), ("tax_delta__gt", 0), _connector="OR"),
                fields=["-first_seen", "-id"],
                name="snapshot_tax_changes",
            ),
        ),
    ]
