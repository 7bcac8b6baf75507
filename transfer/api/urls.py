from django.urls import path

from transfer.api import views

urlpatterns = [
    path("transfers/inventory", views.InventoryView.as_view(), name="transfer-inventory"),
    path("transfers/bodies", views.BodiesView.as_view(), name="transfer-bodies"),
    path("transfers/receipts", views.ReceiptsView.as_view(), name="transfer-receipts"),
    path("transfers/namespace", views.NamespaceImportView.as_view(), name="transfer-namespace"),
    path("transfers/documents", views.DocumentImportView.as_view(), name="transfer-documents"),
    path("transfers/reconcile", views.ReconcileView.as_view(), name="transfer-reconcile"),
]
