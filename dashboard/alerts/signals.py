"""Signals the alerts sub-package sends; receivers are connected in `DashboardConfig.ready`.

``deliveries_created(sender=Delivery, delivery_ids=list[int])`` is sent after the transaction that
created notification deliveries commits. The Celery side (dashboard.alerts.tasks) listens and
enqueues each one, so the delivery service never imports its own tasks.
"""

from django.dispatch import Signal

deliveries_created = Signal()
