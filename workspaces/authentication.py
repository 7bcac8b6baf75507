"""`Authorization: Bearer <token>` authentication; the token carries its workspace."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import BooleanField, Model
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from config.db_prepared import prepared_cursor
from workspaces.models import ApiToken, Membership, Workspace
from workspaces.tokens import token_digest

LAST_USED_RESOLUTION = timedelta(minutes=5)

# Loaded with the token; any other field of these objects loads on first access, like `.only()`.
TOKEN_FIELDS = {"id", "name", "prefix", "user_id", "workspace_id"}
USER_FIELDS = {"id", "username", "is_active", "is_staff", "is_superuser"}
WORKSPACE_FIELDS = {"id", "slug", "name"}


@dataclass(frozen=True)
class _Lookup:
    sql: str
    parts: tuple[tuple[type[Model], list[str]], ...]  # each model with its loaded fields, in model order


@cache
def _lookup() -> _Lookup:
    """Every API request runs this one statement: the token, its user, its workspace and the
    caller's role there. Written once, because building it with the ORM (select_related plus a
    role subquery) cost more CPU than running it."""
    q = connection.ops.quote_name
    parts = tuple(
        (model, [f.attname for f in model._meta.concrete_fields if f.attname in wanted])
        for model, wanted in (
            (ApiToken, TOKEN_FIELDS),
            (get_user_model(), USER_FIELDS),
            (Workspace, WORKSPACE_FIELDS),
        )
    )
    columns = ", ".join(f"{alias}.{q(name)}" for alias, (_, names) in zip("tuw", parts, strict=True) for name in names)
    token, user, workspace, membership = (
        q(model._meta.db_table) for model in (ApiToken, get_user_model(), Workspace, Membership)
    )
    sql = (
        f"SELECT {columns}, t.last_used_at IS NULL OR t.last_used_at < %s, "
        f"(SELECT m.role FROM {membership} m WHERE m.user_id = t.user_id AND m.workspace_id = t.workspace_id) "
        f"FROM {token} t JOIN {user} u ON u.id = t.user_id JOIN {workspace} w ON w.id = t.workspace_id "
        "WHERE t.digest = %s AND t.revoked_at IS NULL"
    )
    return _Lookup(sql, parts)


def token_lookup(raw: str) -> tuple[ApiToken, bool] | None:
    """The live token for a raw value, with `user`, `workspace` and `member_role` (None when the
    user is no longer a member) attached, and whether its last use is older than the resolution."""
    lookup = _lookup()
    stale_before = connection.ops.adapt_datetimefield_value(timezone.now() - LAST_USED_RESOLUTION)
    with prepared_cursor() as cursor:
        cursor.execute(lookup.sql, [stale_before, token_digest(raw)])
        row = cursor.fetchone()
    if row is None:
        return None
    instances = []
    start = 0
    for model, names in lookup.parts:
        values = [
            bool(value) if isinstance(model._meta.get_field(name), BooleanField) else value  # SQLite says 0/1
            for name, value in zip(names, row[start : start + len(names)], strict=True)
        ]
        instances.append(model.from_db(connection.alias, names, values))
        start += len(names)
    token, token.user, token.workspace = instances
    token.member_role = row[start + 1]
    return token, bool(row[start])


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
        # IsWorkspaceMember builds the actor from the role read here; None means no membership.
        found = token_lookup(raw)
        if found is None or not found[0].user.is_active:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        token, last_use_is_stale = found
        if last_use_is_stale:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="knowledge"'
