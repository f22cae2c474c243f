"""Email through Django's mail settings (console backend in the embedded run, SMTP otherwise)."""

from __future__ import annotations

import smtplib

from django.conf import settings
from django.core.mail import EmailMessage

from dashboard.alerts.notify.base import Message, Sender, SendError, SendResult


class EmailSender(Sender):
    kind = "email"

    def send(self, message: Message) -> SendResult:
        recipients = [a for a in self.config.get("to", []) if a]
        if not recipients:
            raise SendError("no recipient addresses", permanent=True)
        email = EmailMessage(
            subject=message.subject[:200],
            body=message.text,
            from_email=settings.DEFAULT_FROM_EMAIL,
            to=recipients,
        )
        try:
            email.send(fail_silently=False)
        except smtplib.SMTPRecipientsRefused as exc:
            raise SendError(f"recipients refused: {exc.recipients}", permanent=True) from exc
        except (smtplib.SMTPException, OSError) as exc:
            raise SendError(f"mail server: {type(exc).__name__}: {exc}") from exc
        return SendResult()
