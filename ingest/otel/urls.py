from django.urls import path

from ingest.otel import views

urlpatterns = [
    path("t/<slug:team_slug>/ingest/telemetry/", views.telemetry, name="ingest_telemetry"),
    path("t/<slug:team_slug>/ingest/telemetry/token/", views.telemetry_token, name="ingest_telemetry_token"),
]
