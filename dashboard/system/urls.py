from django.urls import path

from dashboard.system import views

urlpatterns = [
    path("t/<slug:team_slug>/health/", views.team_health, name="team_health"),
]
