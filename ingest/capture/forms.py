"""Capture forms: the log upload (its file arrives through ``uploads.IngestUploadHandler``) and
the watched folder."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from django import forms
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.template.defaultfilters import filesizeformat

from dashboard.teams.models import Team
from ingest.capture.models import WatchedFolder
from ingest.capture.watch import WatchPathError, validate_watch_path
from mcptax.formats import FORMATS

FORMAT_CHOICES = [("auto", "Detect automatically")] + [(f, f) for f in FORMATS]


def size_limit_message(limit: int) -> str:
    return f"The file is larger than the upload limit of {filesizeformat(limit)} (INGEST_MAX_UPLOAD_BYTES)."


class UploadForm(forms.Form):
    format = forms.ChoiceField(choices=FORMAT_CHOICES, initial="auto", required=False)
    file = forms.FileField(
        help_text="Envelope JSONL (our proxy, mcpsnoop), HAR 1.2, Claude Code session JSONL or Codex rollout JSONL."
    )

    def clean_format(self) -> str:
        return str(self.cleaned_data.get("format") or "auto")

    def clean_file(self) -> UploadedFile[bytes]:
        upload: UploadedFile[bytes] = self.cleaned_data["file"]
        if not upload.size:
            raise forms.ValidationError("The file is empty.")
        if upload.size > settings.INGEST_MAX_UPLOAD_BYTES:
            raise forms.ValidationError(size_limit_message(settings.INGEST_MAX_UPLOAD_BYTES))
        return upload


if TYPE_CHECKING:
    _WatchedFolderModelForm = forms.ModelForm[WatchedFolder]
else:  # Django's ModelForm is not subscriptable at runtime
    _WatchedFolderModelForm = forms.ModelForm


class WatchedFolderForm(_WatchedFolderModelForm):
    class Meta:
        model = WatchedFolder
        fields = ["path", "pattern", "format"]
        widgets = {"format": forms.Select(choices=FORMAT_CHOICES)}
        help_texts = {
            "path": "An absolute directory on the worker's disk.",
            "pattern": "Which files to tail, e.g. *.jsonl or proxy-*.log.",
        }

    def __init__(self, *args: Any, team: Team, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.team = team

    def clean_path(self) -> str:
        try:
            return str(validate_watch_path(self.cleaned_data["path"]))
        except WatchPathError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_pattern(self) -> str:
        pattern: str = self.cleaned_data["pattern"].strip()
        if not pattern or os.sep in pattern or pattern in (".", ".."):
            raise forms.ValidationError("A file name pattern in the folder itself, e.g. *.jsonl.")
        return pattern

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        path, pattern = cleaned.get("path"), cleaned.get("pattern")
        if (
            path
            and pattern
            and WatchedFolder.objects.filter(team=self.team, path=path, pattern=pattern).exists()
        ):
            raise forms.ValidationError("This folder is already watched with this pattern.")
        return cleaned

    def save(self, commit: bool = True) -> WatchedFolder:
        self.instance.team = self.team
        folder: WatchedFolder = super().save(commit)
        return folder
