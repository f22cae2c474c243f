"""Forms for registering servers. Secrets are write-only: the form never shows them back."""

from __future__ import annotations

import shlex
from typing import Any

from django import forms

from dashboard import outbound
from dashboard.crypto import mask
from dashboard.servers.models import McpServer, Transport
from dashboard.teams.models import Team
from dashboard.teams.validators import validate_name


def _parse_pairs(text: str, sep: str, what: str) -> dict[str, str]:
    pairs = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if sep not in line:
            raise forms.ValidationError(f"line {n}: expected NAME{sep}VALUE for {what}")
        key, value = line.split(sep, 1)
        pairs[key.strip()] = value.strip()
    return pairs


class ServerForm(forms.ModelForm[McpServer]):
    command_line = forms.CharField(
        required=False,
        label="Command",
        help_text='For stdio: the full command line, e.g. "npx -y @modelcontextprotocol/server-filesystem /srv"',
    )
    env_text = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 3}), label="Environment (KEY=VALUE per line)"
    )
    headers_text = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 3}), label="HTTP headers (Name: value per line)"
    )

    # Which transports each field belongs to; the page shows a field only for its transports.
    TRANSPORT_FIELDS = {
        "url": "http sse",
        "headers_text": "http sse",
        "command_line": "stdio",
        "env_text": "stdio",
        "cwd": "stdio",
    }

    class Meta:
        model = McpServer
        fields = ["name", "transport", "url", "cwd", "poll_interval_seconds", "enabled"]

    def __init__(self, *args: Any, team: Team, allow_stdio: bool, **kwargs: Any) -> None:
        """`allow_stdio`: whether the user's role may register stdio servers (the role matrix's
        REGISTER_STDIO_SERVER, asked by the view through dashboard.teams.access)."""
        super().__init__(*args, **kwargs)
        self.team = team
        self.allow_stdio = allow_stdio
        self.saved_transport = self.instance.transport if self.instance.pk else None
        if self.instance.pk:
            self.fields["command_line"].initial = shlex.join(
                [self.instance.command, *self.instance.args]
            ).strip()
            # Existing secrets are never rendered; leaving the box empty keeps them.
            self.fields["env_text"].help_text = self._masked(self.instance.env, "=")
            self.fields["headers_text"].help_text = self._masked(self.instance.headers, ": ")

    @staticmethod
    def _masked(values: dict[str, str], sep: str) -> str:
        if not values:
            return ""
        shown = ", ".join(f"{k}{sep}{mask(v)}" for k, v in values.items())
        return f"Stored: {shown}. Leave empty to keep, or enter the full new set."

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"].strip()
        clash = McpServer.objects.filter(team=self.team, name=name).exclude(pk=self.instance.pk)
        if clash.exists():
            raise forms.ValidationError("This team already has a server with that name.")
        return name

    def clean_poll_interval_seconds(self) -> int:
        value: int = self.cleaned_data["poll_interval_seconds"]
        if value < 60:
            raise forms.ValidationError("Poll at most once a minute.")
        return value

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        transport = data.get("transport")
        if transport == Transport.STDIO:
            if not self.allow_stdio:
                raise forms.ValidationError(
                    "Only team owners and admins can register a stdio server: it runs a command on the worker."
                )
            try:
                parts = shlex.split(data.get("command_line") or "")
            except ValueError as exc:
                raise forms.ValidationError({"command_line": f"Cannot parse the command: {exc}"}) from None
            if not parts:
                self.add_error("command_line", "A stdio server needs a command.")
            else:
                self.instance.command, self.instance.args = parts[0], parts[1:]
            self.instance.url = ""
        elif transport in (Transport.HTTP, Transport.SSE):
            if not data.get("url"):
                self.add_error("url", "An HTTP or SSE server needs a URL.")
            elif problem := outbound.url_problem(data["url"]):
                self.add_error("url", problem)
            self.instance.command, self.instance.args = "", []
        self._drop_other_transports_secrets(transport)
        try:
            if data.get("env_text"):
                self.instance.env = _parse_pairs(data["env_text"], "=", "environment")
            if data.get("headers_text"):
                self.instance.headers = _parse_pairs(data["headers_text"], ":", "headers")
        except forms.ValidationError as exc:
            raise forms.ValidationError(exc.messages) from None
        return data

    def _drop_other_transports_secrets(self, transport: str | None) -> None:
        """Environment belongs to stdio, headers to HTTP/SSE; neither survives a change of transport.

        A member may save an HTTP server with an environment (``BASH_ENV=...``) it never uses; an
        admin who turns it into stdio would run that environment unseen. So a change keeps only
        what the person making it enters now (the boxes below), nothing stored before."""
        if transport is None:
            return
        if transport == Transport.STDIO or transport != self.saved_transport:
            self.instance.headers = {}
        if transport != Transport.STDIO or transport != self.saved_transport:
            self.instance.env = {}

    def save(self, commit: bool = True) -> McpServer:
        self.instance.team = self.team
        return super().save(commit=commit)


class ImportConfigForm(forms.Form):
    stack_name = forms.CharField(
        max_length=100, validators=[validate_name], help_text="e.g. the agent that loads these servers"
    )
    config_file = forms.FileField(
        required=False,
        help_text="claude_desktop_config.json, .mcp.json, ~/.claude.json, .vscode/mcp.json, "
        "mcp_config.json, settings.json (Gemini CLI, Zed), ~/.codex/config.toml, "
        "~/.config/goose/config.yaml, librechat.yaml, ~/.continue/config.yaml (or one file of "
        ".continue/mcpServers/), opencode.json(c), ~/.aws/amazonq/mcp.json …",
    )
    config_text = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 8}), label="…or paste it"
    )

    MAX_BYTES = 1024 * 1024

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        upload = data.get("config_file")
        if upload is not None:
            if upload.size > self.MAX_BYTES:
                raise forms.ValidationError("That file is over 1 MiB; an MCP client config is much smaller.")
            raw = upload.read()
        else:
            raw = (data.get("config_text") or "").encode()
        if not raw.strip():
            raise forms.ValidationError("Upload a config file or paste its JSON.")
        try:
            data["text"] = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise forms.ValidationError(f"Not UTF-8 text: {exc}") from None
        # The file name tells JSON(C), YAML and TOML apart; pasted Codex tables are TOML too.
        if upload is not None:
            data["filename"] = upload.name
        else:
            # Anything else is told apart by its content: JSON or JSONC, else YAML.
            data["filename"] = "pasted.toml" if "[mcp_servers" in data["text"] else "pasted"
        data["source"] = upload.name if upload is not None else "pasted"
        return data
