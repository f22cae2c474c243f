from django.urls import path

from dashboard.teams import views

urlpatterns = [
    path("", views.home, name="home"),
    path("t/<slug:team_slug>/settings/", views.team_settings, name="team_settings"),
    path("t/<slug:team_slug>/settings/tokens/", views.create_api_token, name="create_api_token"),
    path(
        "t/<slug:team_slug>/settings/tokens/<int:token_id>/revoke/",
        views.revoke_api_token,
        name="revoke_api_token",
    ),
]
