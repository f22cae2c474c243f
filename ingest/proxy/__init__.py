"""Logging MCP proxy (stdio and Streamable HTTP) writing DESIGN §3 envelope JSONL.

Run it as `python -m ingest.proxy` (console script `mcp-tax-proxy`); see `__main__.py`.
Nothing here imports Django, so the proxy runs on machines without the dashboard.
"""

from ingest.proxy.envelope import PROXY_VERSION, EnvelopeWriter, FileSink, digest_string, redact_bulk
from ingest.proxy.push import PushSink

__all__ = ["PROXY_VERSION", "EnvelopeWriter", "FileSink", "PushSink", "digest_string", "redact_bulk"]
