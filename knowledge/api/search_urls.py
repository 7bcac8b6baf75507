from django.urls import path

from knowledge.api.search_views import SearchView

urlpatterns = [path("search", SearchView.as_view(), name="search")]
