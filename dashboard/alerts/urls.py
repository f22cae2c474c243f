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
    path("t/<slug:team_slug>/alerts/<uuid:code>/resolve/", views.alert_resolve, name="alert_resolve"),
    path("t/<slug:team_slug>/alerts/bulk/", views.alert_bulk, name="alert_bulk"),
    path("t/<slug:team_slug>/alerts/banner/", views.alert_banner, name="alert_banner"),
    path("t/<slug:team_slug>/alerts/count/", views.alert_nav_count, name="alert_nav_count"),
    path("t/<slug:team_slug>/budgets/", views.budget_list, name="budgets"),
    path("t/<slug:team_slug>/budgets/<int:budget_id>/", views.budget_update, name="budget_update"),
    path("t/<slug:team_slug>/channels/", views.channels, name="channels"),
    path("t/<slug:team_slug>/channels/<uuid:code>/", views.channel_detail, name="channel_detail"),
    path("t/<slug:team_slug>/channels/<uuid:code>/action/", views.channel_action, name="channel_action"),
]
