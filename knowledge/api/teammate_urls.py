from django.urls import path

from knowledge.api.teammate_views import TeammateConfigView, TeammateContextView, TeammateMemoryView

urlpatterns = [
    path("teammate", TeammateContextView.as_view(), name="teammate-context"),
    path("teammate/memory", TeammateMemoryView.as_view(), name="teammate-memory"),
    path("teammate/config", TeammateConfigView.as_view(), name="teammate-config"),
]
