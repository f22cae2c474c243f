"""Ingest forms, and the upload handler that streams a log file straight to its final place on disk.

A log can be gigabytes: it is never held in memory, and it is written once, directly under
MEDIA_ROOT/ingest/, so the job that processes it reads the same bytes without a copy.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

from django import forms
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.template.defaultfilters import filesizeformat

from ingest.capture.models import WatchedFolder
from ingest.capture.watch import WatchPathError, validate_watch_path
from mcptax.formats import FORMATS

FORMAT_CHOICES = [("auto", "Detect automatically")] + [(f, f) for f in FORMATS]


def size_limit_message(limit: int) -> str:
    return f"The file is larger than the upload limit of {filesizeformat(limit)} (INGEST_MAX_UPLOAD_BYTES)."


def disk_name(filename: str | None) -> str:
    """A harmless file name on disk for a user-supplied one (the original is kept on the job)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", os.path.basename(filename or ""))[-100:].lstrip(".")
    return name or "upload.log"


class SpooledUpload(UploadedFile):
    """An uploaded file already at its final path (like TemporaryUploadedFile, but kept)."""

    def __init__(self, path: Path, name: str, content_type: str | None, size: int) -> None:
        super().__init__(open(path, "rb"), name, content_type, size, None)  # noqa: SIM115 - closed by Django
        self.path = path

    def temporary_file_path(self) -> str:
        return str(self.path)

    def discard(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class IngestUploadHandler(FileUploadHandler):
    """Writes each uploaded file chunk by chunk into ``directory``, refusing files over the limit.

    Refusing means: the partial file is deleted and the rest of the request is read and thrown
    away (``StopUpload(connection_reset=False)``), so the browser still gets our page with a
    clear message instead of a reset connection. ``too_large`` tells the view what happened.
    """

    def __init__(self, request=None, *, directory: Path, max_bytes: int | None = None) -> None:
        super().__init__(request)
        self.directory = directory
        self.max_bytes = settings.INGEST_MAX_UPLOAD_BYTES if max_bytes is None else max_bytes
        self.too_large = False
        self.path: Path | None = None
        self.file = None
        self.received = 0
        self.request_length = 0

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        self.request_length = content_length or 0
        return None

    def new_file(
        self, field_name, file_name, content_type, content_length, charset=None, content_type_extra=None
    ):
        super().new_file(field_name, file_name, content_type, content_length, charset, content_type_extra)
        if self.file is not None:
            # One log per upload: a second file part is not ours to keep.
            raise StopUpload(connection_reset=False)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / f"{uuid.uuid4().hex}-{disk_name(file_name)}"
        self.file = open(self.path, "wb")  # noqa: SIM115 - closed in file_complete / upload_interrupted
        self.received = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        self.received += len(raw_data)
        if self.received > self.max_bytes:
            self.too_large = True
            self._discard()
            raise StopUpload(connection_reset=False)
        self.file.write(raw_data)
        return None

    def file_complete(self, file_size: int) -> UploadedFile | None:
        if self.file is None or self.path is None:
            return None
        self.file.close()
        return SpooledUpload(self.path, self.file_name or "upload.log", self.content_type, file_size)

    def upload_interrupted(self) -> None:
        self._discard()

    def _discard(self) -> None:
        if self.file is not None:
            self.file.close()
        if self.path is not None:
            self.path.unlink(missing_ok=True)


class UploadForm(forms.Form):
    format = forms.ChoiceField(choices=FORMAT_CHOICES, initial="auto", required=False)
    file = forms.FileField(
        help_text="Envelope JSONL (our proxy, mcpsnoop), HAR 1.2, Claude Code session JSONL or Codex rollout JSONL."
    )

    def clean_format(self) -> str:
        return self.cleaned_data.get("format") or "auto"

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size == 0:
            raise forms.ValidationError("The file is empty.")
        if upload.size > settings.INGEST_MAX_UPLOAD_BYTES:
            raise forms.ValidationError(size_limit_message(settings.INGEST_MAX_UPLOAD_BYTES))
        return upload


class WatchedFolderForm(forms.ModelForm):
    class Meta:
        model = WatchedFolder
        fields = ["path", "pattern", "format"]
        widgets = {"format": forms.Select(choices=FORMAT_CHOICES)}
        help_texts = {
            "path": "An absolute directory on the worker's disk.",
            "pattern": "Which files to tail, e.g. *.jsonl or proxy-*.log.",
        }

    def __init__(self, *args, team, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.team = team

    def clean_path(self) -> str:
        try:
            return str(validate_watch_path(self.cleaned_data["path"]))
        except WatchPathError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_pattern(self) -> str:
        pattern = self.cleaned_data["pattern"].strip()
        if not pattern or os.sep in pattern or pattern in (".", ".."):
            raise forms.ValidationError("A file name pattern in the folder itself, e.g. *.jsonl.")
        return pattern

    def clean(self):
        cleaned = super().clean()
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
        return super().save(commit)
