"""Slack incoming webhook: a short text fallback plus a block with the figures."""

from __future__ import annotations

import json
from typing import Any

from dashboard.alerts.notify import http
from dashboard.alerts.notify.base import Message, Sender, SendResult


class SlackSender(Sender):
    kind = "slack"

    def send(self, message: Message) -> SendResult:
        alert = message.payload.get("alert") or {}
        fields = []
        if alert:
            fields = [
                {"type": "mrkdwn", "text": f"*Value*\n{alert.get('value')}"},
                {"type": "mrkdwn", "text": f"*Limit*\n{alert.get('limit')}"},
                {"type": "mrkdwn", "text": f"*Level*\n{alert.get('level')}"},
                {"type": "mrkdwn", "text": f"*Measure*\n{alert.get('measure_label')}"},
            ]
        link = f" <{alert['url']}|open>" if alert.get("url") else ""
        if alert.get("subject_url"):
            link += f" <{alert['subject_url']}|{alert.get('subject') or 'subject'}>"
        blocks: list[dict[str, Any]] = [
            {"type": "section", "text": {"type": "mrkdwn", "text": message.subject + link}}
        ]
        if fields:
            blocks.append({"type": "section", "fields": fields})
        body = json.dumps({"text": f"{message.subject}\n{message.text}", "blocks": blocks}).encode()
        return http.post(
            self.config.get("url", ""),
            content=body,
            headers={"Content-Type": "application/json"},
            what="the Slack webhook",
        )
