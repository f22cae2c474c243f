from django.urls import URLPattern, URLResolver, include, path

from dashboard.servers import counting_views, regression_views, stack_views, views

server_urls: list[URLPattern | URLResolver] = [
    path("", views.server_detail, name="server_detail"),
    path("status/", views.server_status, name="server_status"),
    path("poll/", views.poll_now, name="poll_now"),
    path("diff/", views.snapshot_diff, name="snapshot_diff"),
    path("edit/", views.server_edit, name="server_edit"),
    path("delete/", views.server_delete, name="server_delete"),
]

team_urls: list[URLPattern | URLResolver] = [
    path("", views.team_overview, name="team_overview"),
    path("servers/add/", views.server_add, name="server_add"),
    path("servers/<uuid:code>/", include(server_urls)),
    path("stacks/", stack_views.stacks, name="stacks"),
    path("settings/counting/", counting_views.update_counting, name="team_counting"),
    path("regressions/", regression_views.regression_list, name="regressions"),
]

urlpatterns = [
    path("methodology/", views.methodology, name="methodology"),
    path("t/<slug:team_slug>/", include(team_urls)),
]
