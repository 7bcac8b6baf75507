from django.urls import path

from knowledge.api.structure_views import DocumentEditView, DocumentOutlineView, DocumentRangeView

urlpatterns = [
    path("documents/<str:id>/outline", DocumentOutlineView.as_view(), name="document-outline"),
    path("documents/<str:id>/range", DocumentRangeView.as_view(), name="document-range"),
    path("documents/<str:id>/edits", DocumentEditView.as_view(), name="document-edits"),
]
