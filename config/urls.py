"""URL map: /kb/ API, public /health, OpenAPI schema and docs, admin, /ui/ reader pages."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from config import views

urlpatterns = [
    path("health", views.health, name="health"),
    path("kb/me", views.me, name="me"),
    path("kb/", include("workspaces.api.urls")),
    path("kb/", include("knowledge.api.urls")),
    path("kb/schema", SpectacularAPIView.as_view(), name="schema"),
    path("kb/docs", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("kb/redoc", SpectacularRedocView.as_view(url_name="schema"), name="api-redoc"),
    path("admin/", admin.site.urls),
    path("ui/", include("knowledge.ui.urls")),
]

handler404 = "config.views.json_not_found"
handler500 = "config.views.json_server_error"
