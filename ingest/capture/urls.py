from django.urls import include, path

from ingest.capture import views

ingest_urls = [
    path("", views.ingest_home, name="ingest_home"),
    path("upload/", views.upload, name="ingest_upload"),
    path("jobs/<uuid:code>/", views.job_detail, name="ingest_job"),
    path("jobs/<uuid:code>/progress/", views.job_progress, name="ingest_job_progress"),
    path("quarantine/", views.quarantine, name="ingest_quarantine"),
    path("quarantine/delete/", views.quarantine_delete, name="ingest_quarantine_delete"),
    path("lines/<int:line_id>/", views.line_detail, name="ingest_line"),
    path("lines/<int:line_id>/raw/", views.line_raw, name="ingest_line_raw"),
    path("watch/", views.watched_folders, name="ingest_watch"),
    path("watch/<int:folder_id>/toggle/", views.watched_folder_toggle, name="ingest_watch_toggle"),
    path("watch/<int:folder_id>/scan/", views.watched_folder_scan, name="ingest_watch_scan"),
    path("watch/<int:folder_id>/delete/", views.watched_folder_delete, name="ingest_watch_delete"),
]

urlpatterns = [
    path("t/<slug:team_slug>/ingest/", include(ingest_urls)),
]
