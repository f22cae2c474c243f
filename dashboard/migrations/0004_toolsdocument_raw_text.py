import json

from django.db import migrations, models


def copy_raw_to_text(apps, schema_editor):
    ToolsDocument = apps.get_model("dashboard", "ToolsDocument")
    for doc in ToolsDocument.objects.all().iterator():
        doc.raw_json = json.dumps(doc.raw, separators=(",", ":"), ensure_ascii=False)
        doc.save(update_fields=["raw_json"])


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0003_channel_notificationevent_delivery_notification_and_more"),
    ]

    operations = [
        migrations.AddField(
            model_name="toolsdocument",
            name="raw_json",
            field=models.TextField(default="[]", help_text="canonical(tools) exactly as received"),
            preserve_default=False,
        ),
        migrations.RunPython(copy_raw_to_text, migrations.RunPython.noop),
        migrations.RemoveField(model_name="toolsdocument", name="raw"),
    ]
