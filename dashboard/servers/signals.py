"""Signals the servers sub-package sends: extension points, not steps of the poll flow.

``snapshot_recorded(sender=Snapshot, snapshot=Snapshot)`` is sent once per new snapshot, after the
poll's transaction commits and after the flow's own steps (budgets, alerts, the provider count;
`dashboard.tasks.after_new_snapshot`) have run. Nothing of ours listens; a receiver's failure is
recorded on the snapshot under the receiver's name. Listed in docs/architecture.md.
"""

from django.dispatch import Signal

snapshot_recorded = Signal()
