from django.urls import path

from knowledge.api.navigation_views import MentionsView, NamespaceDocumentView, NamespaceTreeView

urlpatterns = [
    path("namespaces/<str:slug>/tree", NamespaceTreeView.as_view(), name="namespace-tree"),
    path(
        "namespaces/<str:slug>/documents/<path:doc_path>",
        NamespaceDocumentView.as_view(),
        name="namespace-document",
    ),
    path("mentions", MentionsView.as_view(), name="mentions"),
]
