"""Generic JSON webhook: the documented payload, signed with the channel's secret (docs/alerts.md)."""

from __future__ import annotations

import hashlib
import hmac
import json
import time

from dashboard.alerts.notify import http
from dashboard.alerts.notify.base import Message, Sender, SendResult

SIGNATURE_HEADER = "X-MCP-Tax-Signature"
TIMESTAMP_HEADER = "X-MCP-Tax-Timestamp"
EVENT_HEADER = "X-MCP-Tax-Event"
DELIVERY_HEADER = "X-MCP-Tax-Delivery"


def sign(body: bytes, secret: str) -> str:
    """The signature header value: `sha256=` and the hex HMAC-SHA256 of the raw body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(body: bytes, secret: str, header_value: str) -> bool:
    """What a receiver does; kept here so the example in docs/alerts.md and the tests agree with the sender."""
    return hmac.compare_digest(sign(body, secret), header_value or "")


class WebhookSender(Sender):
    kind = "webhook"

    def send(self, message: Message) -> SendResult:
        body = json.dumps(message.payload, separators=(",", ":"), ensure_ascii=False).encode()
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: sign(body, self.config.get("secret", "")),
            TIMESTAMP_HEADER: str(int(time.time())),
            EVENT_HEADER: message.payload.get("event", ""),
        }
        if message.delivery_id:
            headers[DELIVERY_HEADER] = message.delivery_id
        return http.post(self.config.get("url", ""), content=body, headers=headers, what="the webhook")
