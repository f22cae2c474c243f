"""OpenTelemetry logs from Claude Code and Codex: the OTLP/HTTP receiver, the job that maps each
record (tool calls through the capture pipeline, measured requests, the tools a request sent),
and what the Ingest and agent pages show of them."""
