"""One name per concept: the Threshold model is a Budget, an alert points at its budget, and a
snapshot keeps its budget checks. Renames only: every row and value stays."""

from django.db import migrations, models
import django.db.models.deletion


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0012_measure_choices_loading_and_discovery"),
    ]

    operations = [
        migrations.RenameModel(old_name="Threshold", new_name="Budget"),
        migrations.RenameField(model_name="alert", old_name="threshold", new_name="budget"),
        migrations.RenameField(model_name="snapshot", old_name="limits", new_name="budget_checks"),
        migrations.AlterField(
            model_name="budget",
            name="team",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="budgets", to="dashboard.team"
            ),
        ),
        migrations.AlterField(
            model_name="budget",
            name="server",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="budgets",
                to="dashboard.mcpserver",
            ),
        ),
        migrations.AlterField(
            model_name="budget",
            name="stack",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="budgets",
                to="dashboard.stack",
            ),
        ),
    ]
