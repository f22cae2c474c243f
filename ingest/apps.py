from django.apps import AppConfig


class IngestConfig(AppConfig):
    name = "ingest"
    verbose_name = "Traffic ingest and fidelity"

    def ready(self) -> None:
        # Fidelity: judge and roll up each ingested batch; re-price rollups when prices change
        # (a ModelPrice edit, from the admin too: an extension point of Django's).
        from django.db.models.signals import post_delete, post_save

        from dashboard.system import health
        from ingest.capture.health import SOURCE as INGEST_HEALTH
        from ingest.capture.pipeline import fidelity_step
        from ingest.fidelity import batches, costs
        from ingest.fidelity.models import ModelPrice

        # Every way into the pipeline that passes no fidelity step of its own (the command, the
        # push API, watched folders, the demo) judges with this one; ingest/tasks.py passes it.
        fidelity_step.use(batches.STEP)
        post_save.connect(
            costs.on_price_changed, sender=ModelPrice, dispatch_uid="ingest.fidelity.costs.save"
        )
        post_delete.connect(
            costs.on_price_changed, sender=ModelPrice, dispatch_uid="ingest.fidelity.costs.delete"
        )
        # Tool-discovery records the ingest reads beside calls (capture does not import discovery).
        from ingest.capture.pipeline.sinks import register_discovery_sink
        from ingest.discovery.store import IngestSink

        register_discovery_sink(IngestSink())
        # Telemetry bodies (OTLP) are jobs of the ingest pipeline run by their own reader.
        from ingest.capture.pipeline.run import FORMAT_RUNNERS
        from ingest.otel.run import FORMAT, run_otlp_job

        FORMAT_RUNNERS[FORMAT] = run_otlp_job
        # The methodology page lists what telemetry measured against our predictions.
        from dashboard.servers.methodology import register_findings
        from ingest.otel.selectors import methodology_findings

        register_findings(methodology_findings)
        # The health page's ingest errors and expired leases.
        health.register(INGEST_HEALTH)
