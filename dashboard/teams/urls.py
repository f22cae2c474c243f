from django.urls import path

from dashboard.teams import invite_views, member_views, views

urlpatterns = [
    path("", views.home, name="home"),
    path("teams/new/", member_views.team_create, name="team_create"),
    path("invite/<str:token>/", invite_views.invite_accept, name="invite_accept"),
    path("t/<slug:team_slug>/settings/", views.team_settings, name="team_settings"),
    path("t/<slug:team_slug>/settings/tokens/", views.create_api_token, name="create_api_token"),
    path(
        "t/<slug:team_slug>/settings/tokens/<int:token_id>/revoke/",
        views.revoke_api_token,
        name="revoke_api_token",
    ),
    path("t/<slug:team_slug>/members/", member_views.team_members, name="team_members"),
    path(
        "t/<slug:team_slug>/members/<int:membership_id>/role/", member_views.member_role, name="member_role"
    ),
    path(
        "t/<slug:team_slug>/members/<int:membership_id>/remove/",
        member_views.member_remove,
        name="member_remove",
    ),
    path("t/<slug:team_slug>/leave/", member_views.team_leave, name="team_leave"),
    path("t/<slug:team_slug>/invites/", invite_views.invite_create, name="invite_create"),
    path(
        "t/<slug:team_slug>/invites/<int:invite_id>/revoke/", invite_views.invite_revoke, name="invite_revoke"
    ),
]
