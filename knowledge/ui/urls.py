"""Reader pages under /ui/ (mounted by config/urls.py)."""

from django.contrib.auth import views as auth_views
from django.urls import path, reverse_lazy

from knowledge.ui import views

app_name = "ui"

urlpatterns = [
    path("", views.home, name="home"),
    path(
        "login",
        auth_views.LoginView.as_view(
            template_name="knowledge/ui/login.html",
            next_page=reverse_lazy("ui:home"),
            redirect_authenticated_user=True,
        ),
        name="login",
    ),
    path("logout", auth_views.LogoutView.as_view(next_page=reverse_lazy("ui:login")), name="logout"),
    path("kb/search", views.search, name="search"),
    # Namespace slugs may hold dots, so `str` (no slash) rather than `slug`.
    path("kb/<str:namespace>/", views.namespace_index, name="namespace"),
    path("kb/<str:namespace>/<path:path>", views.reader, name="reader"),
    path("doc/<uuid:document_id>", views.document_by_id, name="document"),
    path("history/<uuid:document_id>", views.history, name="history"),
    path("restore/<uuid:document_id>", views.restore, name="restore"),
    path("graph/<str:namespace>", views.graph, name="graph"),
    path("archived/<str:namespace>", views.archived, name="archived"),
]
