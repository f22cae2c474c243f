from django.urls import path

from dashboard.alerts import views as views

urlpatterns = [
    path("t/<slug:team_slug>/alerts/", views.alert_list, name="alert_list"),
    path(
        "t/<slug:team_slug>/alerts/<uuid:code>/acknowledge/",
        views.alert_acknowledge,
        name="alert_acknowledge",
    ),
    path("t/<slug:team_slug>/alerts/<uuid:code>/silence/", views.alert_silence, name="alert_silence"),
    path("t/<slug:team_slug>/budgets/", views.thresholds, name="thresholds"),
    path("t/<slug:team_slug>/budgets/<int:threshold_id>/", views.threshold_update, name="threshold_update"),
    path("t/<slug:team_slug>/channels/", views.channels, name="channels"),
    path("t/<slug:team_slug>/channels/<uuid:code>/", views.channel_detail, name="channel_detail"),
    path("t/<slug:team_slug>/channels/<uuid:code>/action/", views.channel_action, name="channel_action"),
]
