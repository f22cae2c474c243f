from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "Schema tax dashboard"

    def ready(self) -> None:
        # Every receiver of the dashboard is connected here, in every process (web, worker,
        # commands), so no module has to be imported for its side effect.
        from celery.signals import worker_ready

        from dashboard.alerts import budgets
        from dashboard.alerts.signals import deliveries_created
        from dashboard.alerts.tasks import on_deliveries_created
        from dashboard.servers import provider
        from dashboard.servers.signals import snapshot_recorded
        from dashboard.system.tasks import announce_worker

        snapshot_recorded.connect(budgets.on_snapshot_recorded, dispatch_uid="dashboard.alerts.budgets")
        snapshot_recorded.connect(provider.on_snapshot_recorded, dispatch_uid="dashboard.servers.provider")
        deliveries_created.connect(on_deliveries_created, dispatch_uid="dashboard.alerts.tasks")
        worker_ready.connect(announce_worker, dispatch_uid="dashboard.system.tasks", weak=False)
