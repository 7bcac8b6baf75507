from django.urls import path

from workspaces.api.views import SemanticPolicyView

urlpatterns = [path("settings/semantic", SemanticPolicyView.as_view(), name="semantic-policy")]
