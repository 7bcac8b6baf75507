from django.urls import include, path
from rest_framework.routers import SimpleRouter

from knowledge.api.views import DocumentViewSet, NamespaceViewSet

router = SimpleRouter(trailing_slash="")
router.register("namespaces", NamespaceViewSet, basename="namespace")
router.register("documents", DocumentViewSet, basename="document")

# Feature areas keep their routes in their own modules; these come before the router so
# that nested paths such as documents/{id}/outline are matched explicitly.
urlpatterns = [
    path("", include("knowledge.api.search_urls")),
    path("", include("knowledge.api.semantic_urls")),
    path("", include("knowledge.api.structure_urls")),
    path("", include("knowledge.api.navigation_urls")),
    path("", include("knowledge.api.teammate_urls")),
    path("", include("graph.api.urls")),
    path("", include("transfer.api.urls")),
    *router.urls,
]
