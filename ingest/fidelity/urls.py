from django.urls import path

from ingest.fidelity import tool_views, views

urlpatterns = [
    path("t/<slug:team_slug>/agents/", views.agents_list, name="fidelity_agents"),
    # Before agents/<family>/: "panel" is not an agent family.
    path("t/<slug:team_slug>/agents/panel/", views.overview_panel, name="fidelity_overview_panel"),
    path("t/<slug:team_slug>/agents/<str:family>/", views.agent_detail, name="fidelity_agent"),
    path("t/<slug:team_slug>/calls/<int:call_id>/", views.call_detail, name="fidelity_call"),
    path(
        "t/<slug:team_slug>/servers/<uuid:code>/unused-tools/",
        views.server_unused_tools,
        name="fidelity_unused_tools",
    ),
    # A tool's name may hold any character a server gives it, a "/" included.
    path(
        "t/<slug:team_slug>/servers/<uuid:code>/tools/<path:tool>/",
        tool_views.tool_detail,
        name="fidelity_tool",
    ),
    path("t/<slug:team_slug>/references/", views.references, name="fidelity_references"),
    path(
        "t/<slug:team_slug>/references/<uuid:code>/delete/",
        views.reference_delete,
        name="fidelity_reference_delete",
    ),
    path("t/<slug:team_slug>/prices/", views.prices, name="fidelity_prices"),
    path("t/<slug:team_slug>/prices/<int:price_id>/", views.price_edit, name="fidelity_price_edit"),
    path(
        "t/<slug:team_slug>/prices/<int:price_id>/override/",
        views.price_override,
        name="fidelity_price_override",
    ),
    path(
        "t/<slug:team_slug>/prices/<int:price_id>/delete/", views.price_delete, name="fidelity_price_delete"
    ),
]
