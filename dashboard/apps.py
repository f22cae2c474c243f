from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "Schema tax dashboard"

    def ready(self) -> None:
        # Connects threshold evaluation to `snapshot_recorded` in every process (web, worker, commands).
        from dashboard.alerts import budgets  # noqa: F401
