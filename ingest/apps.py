from django.apps import AppConfig


class IngestConfig(AppConfig):
    name = "ingest"
    verbose_name = "Traffic ingest and fidelity"

    def ready(self) -> None:
        # Fidelity: judge and roll up each ingested batch; re-price rollups when prices change.
        from django.db.models.signals import post_delete, post_save

        from ingest import costs, verdicts
        from ingest.models import ModelPrice
        from ingest.signals import calls_ingested

        calls_ingested.connect(verdicts.on_calls_ingested, dispatch_uid="ingest.verdicts")
        post_save.connect(costs.on_price_changed, sender=ModelPrice, dispatch_uid="ingest.costs.save")
        post_delete.connect(costs.on_price_changed, sender=ModelPrice, dispatch_uid="ingest.costs.delete")
