"""Graph routes under /kb/ (included before the knowledge router, so nested paths win)."""

from django.urls import path

from graph.api.views import (
    DocumentLinksView,
    GraphLinkDetailView,
    GraphLinksView,
    GraphNeighborsView,
    NamespaceGraphView,
)

urlpatterns = [
    path("graph/neighbors", GraphNeighborsView.as_view(), name="graph-neighbors"),
    path("graph/links", GraphLinksView.as_view(), name="graph-links"),
    path("graph/links/<str:edge_id>", GraphLinkDetailView.as_view(), name="graph-link-detail"),
    path("namespaces/<str:slug>/graph", NamespaceGraphView.as_view(), name="namespace-graph"),
    path("documents/<str:id>/links", DocumentLinksView.as_view(), name="document-links"),
]
