from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from config.api import api

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("", include("ingest.capture.urls")),
    path("", include("ingest.fidelity.urls")),
    path("", include("ingest.discovery.urls")),
    path("", include("ingest.otel.urls")),
    path("", include("dashboard.teams.urls")),
    path("", include("dashboard.servers.urls")),
    path("", include("dashboard.alerts.urls")),
    path("", include("dashboard.system.urls")),
]

# A database or broker outage outside a view (a middleware) still answers 503, not 500.
handler500 = "dashboard.system.middleware.server_error"
