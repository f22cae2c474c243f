"""Alert delivery: one sender per channel kind behind a small interface, and the exactly-once
delivery loop.

`dashboard.alerts.notify.delivery` holds the plain functions (create an event, deliver one claimed
delivery, send a test); `dashboard.tasks` wraps them for the `notify` queue.
"""
