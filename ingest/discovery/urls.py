from django.urls import path

from ingest.discovery import views

urlpatterns = [
    path("t/<slug:team_slug>/discovery/", views.team_discovery, name="discovery_team"),
    path("t/<slug:team_slug>/discovery/agents/<str:family>/", views.agent_panel, name="discovery_agent"),
    path("t/<slug:team_slug>/discovery/servers/<uuid:code>/", views.server_panel, name="discovery_server"),
    # A tool's name may hold any character a server gives it, a "/" included.
    path(
        "t/<slug:team_slug>/discovery/servers/<uuid:code>/tools/<path:tool>/",
        views.tool_panel,
        name="discovery_tool",
    ),
]
