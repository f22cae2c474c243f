from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "Schema tax dashboard"

    def ready(self) -> None:
        # Every receiver of the dashboard is connected here, in every process (web, worker,
        # commands), so no module has to be imported for its side effect.
        from celery.signals import worker_ready

        from dashboard.alerts import budgets, defaults
        from dashboard.alerts.signals import deliveries_created
        from dashboard.alerts.tasks import on_deliveries_created
        from dashboard.servers.signals import snapshot_recorded
        from dashboard.system.tasks import announce_worker
        from dashboard.teams.signals import team_created

        snapshot_recorded.connect(budgets.on_snapshot_recorded, dispatch_uid="dashboard.alerts.budgets")
        deliveries_created.connect(on_deliveries_created, dispatch_uid="dashboard.alerts.tasks")
        team_created.connect(defaults.on_team_created, dispatch_uid="dashboard.alerts.defaults")
        worker_ready.connect(announce_worker, dispatch_uid="dashboard.system.tasks", weak=False)
