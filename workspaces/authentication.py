"""`Authorization: Bearer <token>` authentication; the token carries its workspace."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import OuterRef, Subquery
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from workspaces.models import ApiToken, Membership
from workspaces.tokens import token_digest

LAST_USED_RESOLUTION = timedelta(minutes=5)


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """Looks the token up by digest; revoked tokens and inactive users are rejected."""

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != self.keyword.lower():
            return None
        raw = raw.strip()
        if not raw or " " in raw:
            raise exceptions.AuthenticationFailed("Malformed bearer token.")
        # The caller's role in the token's workspace comes with the token (one query, not two):
        # IsWorkspaceMember builds the actor from it, and a missing role means no membership.
        member_role = Membership.objects.filter(user=OuterRef("user_id"), workspace=OuterRef("workspace_id"))
        token = (
            ApiToken.objects.select_related("user", "workspace")
            .annotate(member_role=Subquery(member_role.values("role")[:1]))
            .filter(digest=token_digest(raw), revoked_at__isnull=True)
            .first()
        )
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="knowledge"'
