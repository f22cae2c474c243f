"""The set-up lines a team pastes into Claude Code and Codex to send telemetry here."""

from __future__ import annotations

from dataclasses import dataclass

from dashboard.origin import site_url

ENDPOINT_PATH = "/api/v1/otel"
LOGS_PATH = ENDPOINT_PATH + "/v1/logs"
TOKEN_PLACEHOLDER = "<team API token>"


@dataclass(frozen=True)
class SetupLines:
    endpoint: str  # what OTEL_EXPORTER_OTLP_ENDPOINT names (the exporter appends /v1/logs)
    logs_url: str
    claude_code: str
    codex: str


def setup_lines(origin: str, token: str = TOKEN_PLACEHOLDER) -> SetupLines:
    """Claude Code's environment lines and Codex's ``~/.codex/config.toml`` block for this site."""
    base = site_url(origin)
    endpoint, logs_url = base + ENDPOINT_PATH, base + LOGS_PATH
    claude = "\n".join(
        [
            "export CLAUDE_CODE_ENABLE_TELEMETRY=1",
            "export OTEL_LOGS_EXPORTER=otlp",
            "export OTEL_EXPORTER_OTLP_LOGS_PROTOCOL=http/protobuf",
            f"export OTEL_EXPORTER_OTLP_LOGS_ENDPOINT={logs_url}",
            f'export OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer {token}"',
            "# MCP server, tool and arguments of each call (without it: counted, no content)",
            "export OTEL_LOG_TOOL_DETAILS=1",
            "# Optional: the tools each request sent (request bodies hold the whole conversation)",
            "export OTEL_LOG_RAW_API_BODIES=1",
        ]
    )
    codex = "\n".join(
        [
            "[otel]",
            "log_user_prompt = false",
            "exporter = { otlp-http = {",
            f'  endpoint = "{logs_url}",',
            '  protocol = "binary",',
            f'  headers = {{ "Authorization" = "Bearer {token}" }}',
            "}}",
        ]
    )
    return SetupLines(endpoint, logs_url, claude, codex)
