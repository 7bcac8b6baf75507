from django.urls import path

from knowledge.api.semantic_views import IndexingStatusView, ReindexView

urlpatterns = [
    path("settings/semantic/status", IndexingStatusView.as_view(), name="semantic-status"),
    path("settings/semantic/reindex", ReindexView.as_view(), name="semantic-reindex"),
]
