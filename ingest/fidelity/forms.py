"""Forms of the fidelity pages: registering a reference document (upload or URL) and a price row."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.utils import timezone

from dashboard.teams.models import Team
from dashboard.teams.validators import validate_name
from ingest.fidelity.models import ModelPrice


class ReferenceUploadForm(forms.Form):
    file = forms.FileField()
    name = forms.CharField(
        max_length=300, required=False, validators=[validate_name], help_text="Defaults to the file name"
    )


class ReferenceUrlForm(forms.Form):
    url = forms.URLField(max_length=2000, assume_scheme="https")
    name = forms.CharField(
        max_length=300,
        required=False,
        validators=[validate_name],
        help_text="Defaults to the file name in the URL",
    )


if TYPE_CHECKING:
    _PriceForm = forms.ModelForm[ModelPrice]
else:  # ModelForm is generic only in django-stubs
    _PriceForm = forms.ModelForm


class ModelPriceForm(_PriceForm):
    class Meta:
        model = ModelPrice
        fields = ["model", "agent_family", "is_default", "input_usd_per_mtok", "output_usd_per_mtok", "note"]
        labels = {
            "input_usd_per_mtok": "Input USD / 1M tokens",
            "output_usd_per_mtok": "Output USD / 1M tokens",
        }

    def __init__(self, *args: Any, team: Team, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.team = team
        for name in ("model", "agent_family"):  # shown in pages, headers of exports and reports
            self.fields[name].validators.append(validate_name)
        for name in ("input_usd_per_mtok", "output_usd_per_mtok"):
            price_field = self.fields[name]
            # Shown in the number input; clean() refuses a negative price with a message.
            price_field.widget.attrs["min"] = "0"

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        model, family = data.get("model"), data.get("agent_family", "")
        if model:
            clash = ModelPrice.objects.filter(team=self.team, model=model, agent_family=family)
            if self.instance.pk:
                clash = clash.exclude(pk=self.instance.pk)
            if clash.exists():
                raise forms.ValidationError(
                    f"This team already has a price for {model}" + (f" with {family}" if family else "") + "."
                )
        for name in ("input_usd_per_mtok", "output_usd_per_mtok"):
            value = data.get(name)
            if value is not None and value < 0:
                self.add_error(name, "A price cannot be negative.")
        return data

    def save(self, commit: bool = True) -> ModelPrice:
        price = super().save(commit=False)
        price.team = self.team
        price.updated = timezone.now()
        if commit:
            price.save()
        return price
