from rest_framework.routers import SimpleRouter

from knowledge.api.views import DocumentViewSet, NamespaceViewSet

router = SimpleRouter(trailing_slash="")
router.register("namespaces", NamespaceViewSet, basename="namespace")
router.register("documents", DocumentViewSet, basename="document")

urlpatterns = router.urls
