"""DRF permission classes; they only resolve the actor and delegate rules to workspaces.access."""

from __future__ import annotations

from typing import Any

from rest_framework import permissions
from rest_framework.request import Request

from config.exceptions import DomainError
from workspaces.access import actor_for
from workspaces.models import ApiToken, Membership


class IsWorkspaceMember(permissions.BasePermission):
    """Authenticated and a member of the acting workspace; attaches `request.actor`.

    A token acts in its own workspace; a browser session acts in the user's first workspace.
    """

    message = "You are not a member of this workspace."

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if user is None or not user.is_authenticated:
            return False
        role = None
        if isinstance(request.auth, ApiToken):
            workspace = request.auth.workspace
            role = getattr(request.auth, "member_role", None)  # read with the token
        else:
            membership = Membership.objects.filter(user=user).select_related("workspace").order_by("id").first()
            if membership is None:
                return False
            workspace = membership.workspace
        try:
            request.actor = actor_for(user, workspace, role=role)
        except DomainError:
            return False
        return True
