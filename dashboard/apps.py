from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "Fixed tax dashboard"

    def ready(self) -> None:
        # Every receiver of the dashboard is connected here, in every process (web, worker,
        # commands), so no module has to be imported for its side effect.
        from celery.signals import task_failure, task_retry, worker_ready, worker_shutdown

        from dashboard.alerts import defaults
        from dashboard.alerts.health import SOURCE as DELIVERY_HEALTH
        from dashboard.servers.health import SOURCE as POLL_HEALTH
        from dashboard.system import health
        from dashboard.system.worker import announce_worker, on_task_trouble, retire_worker
        from dashboard.teams.signals import team_created

        team_created.connect(defaults.on_team_created, dispatch_uid="dashboard.alerts.defaults")
        worker_ready.connect(announce_worker, dispatch_uid="dashboard.system.worker", weak=False)
        worker_shutdown.connect(retire_worker, dispatch_uid="dashboard.system.worker.retire", weak=False)
        for name, signal in (("failure", task_failure), ("retry", task_retry)):
            signal.connect(on_task_trouble, dispatch_uid=f"dashboard.system.outages.{name}", weak=False)
        # The health page reads polls and deliveries through these (dashboard.system imports neither).
        health.register(POLL_HEALTH)
        health.register(DELIVERY_HEALTH)
