from __future__ import annotations

from django import forms


class ApiTokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="e.g. the CI job that will use it")
