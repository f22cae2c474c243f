"""The OpenTelemetry SDK's real OTLP log exporters, sending our fixture events (tests/data/otel).

Records are made by the SDK's own LoggerProvider (resource, scope, timestamps, attributes as the
client sets them) and kept by its in-memory exporter, so the same batch can be exported once, or
twice as an exporter's retry does, by ``OTLPLogExporter`` (protobuf, from
opentelemetry-exporter-otlp-proto-http) or its JSON twin (opentelemetry-exporter-otlp-json-http).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource

DATA = Path(__file__).resolve().parents[2] / "data" / "otel"


def fixture(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text())


def records(document: dict[str, Any]) -> list[ReadableLogRecord]:
    """The fixture's events as the SDK's log records, in order."""
    provider = LoggerProvider(resource=Resource.create(document["resource"]))
    memory = InMemoryLogRecordExporter()
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    logger = provider.get_logger(document["scope"])
    for event in document["events"]:
        stamp = event["attributes"]["event.timestamp"].replace("Z", "+00:00")
        nanos = int(datetime.fromisoformat(stamp).timestamp() * 1_000_000_000)
        logger.emit(body=event["body"] or None, attributes=event["attributes"], timestamp=nanos)
    provider.shutdown()
    return list(memory.get_finished_logs())


def exporter(url: str, token: str, *, protocol: str, gzip: bool) -> Any:
    """The real exporter for ``protocol`` ("protobuf" or "json"), with the team token as
    OTEL_EXPORTER_OTLP_HEADERS sends it."""
    headers = {"Authorization": f"Bearer {token}"}
    if protocol == "protobuf":
        from opentelemetry.exporter.otlp.proto.http import Compression
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

        return OTLPLogExporter(
            endpoint=url, headers=headers, compression=Compression.Gzip if gzip else Compression.NoCompression
        )
    from opentelemetry.exporter.otlp.common.http import Compression as JsonCompression
    from opentelemetry.exporter.otlp.json.http._log_exporter import OTLPLogExporter as JsonExporter

    return JsonExporter(
        endpoint=url, headers=headers, compression=JsonCompression.GZIP if gzip else JsonCompression.NONE
    )


def send(url: str, token: str, batch: list[ReadableLogRecord], *, protocol: str, gzip: bool) -> Any:
    """Export ``batch`` once; the SDK's result (SUCCESS or FAILURE)."""
    sender = exporter(url, token, protocol=protocol, gzip=gzip)
    try:
        return sender.export(batch)
    finally:
        sender.shutdown()
