"""Signals the servers sub-package sends; receivers are connected in `DashboardConfig.ready`.

``snapshot_recorded(sender=Snapshot, snapshot=Snapshot)`` is sent once per new snapshot, after the
poll's transaction commits. Threshold evaluation (dashboard.alerts) listens, so polling never
imports the alerting code that depends on it.
"""

from django.dispatch import Signal

snapshot_recorded = Signal()
