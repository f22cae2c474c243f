from __future__ import annotations

from django import forms

from dashboard.teams.validators import validate_name


class ApiTokenForm(forms.Form):
    name = forms.CharField(
        max_length=100, validators=[validate_name], help_text="e.g. the CI job that will use it"
    )
