"""Logging MCP proxy (stdio and Streamable HTTP) writing docs/definitions.md envelope JSONL.

Run it as `python -m mcptax.proxy` (console script `mcp-tax-proxy`); see `__main__.py`.
Nothing here imports Django, so the proxy runs on machines without the dashboard.
"""

from mcptax.proxy.push import PushSink
from mcptax.proxy.writer import PROXY_VERSION, EnvelopeWriter, FileSink, digest_string, redact_bulk

__all__ = ["PROXY_VERSION", "EnvelopeWriter", "FileSink", "PushSink", "digest_string", "redact_bulk"]
