"""The one place where access rules live. Every entry point (API, admin, bridge, CLI) asks here.

Effective namespace permission = max(others_can, `own` for the owner, direct grants, group
grants); workspace admins and owners get `own` everywhere; an archived namespace gives `none`.
Document rules layer visibility, authorship and edit policy on top of that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.db.models import Q

from config.db_prepared import prepared_cursor
from config.exceptions import NotFound, PermissionDenied
from workspaces.models import (
    PERMISSION_RANK,
    ROLE_RANK,
    Group,
    Membership,
    Namespace,
    NamespaceACL,
    Permission,
    Role,
    Visibility,
    Workspace,
)


class DocumentLike(Protocol):
    namespace_id: int
    visibility: str
    edit_policy: str
    created_by_id: int | None
    archived: bool


@dataclass
class Actor:
    """Who acts, in which workspace, with which role. Caches namespace permissions per request."""

    user: Any
    workspace: Workspace
    role: str
    _permissions: dict[int, str] | None = field(default=None, repr=False)

    @property
    def is_admin(self) -> bool:
        return ROLE_RANK[Role(self.role)] >= ROLE_RANK[Role.ADMIN]

    @property
    def user_id(self) -> int:
        return self.user.pk

    def forget_permissions(self) -> None:
        self._permissions = None


def actor_for(user: AbstractBaseUser, workspace: Workspace, *, role: str | None = None) -> Actor:
    """Build an Actor, or answer NotFound when the user is not a member of the workspace.

    `role` is the membership's role when the caller has already read it (with an API token)."""
    if role is None:
        membership = Membership.objects.filter(user=user, workspace=workspace).only("role").first()
        if membership is None:
            raise NotFound("Workspace not found.")
        role = membership.role
    return Actor(user=user, workspace=workspace, role=role)


def rank(permission: str) -> int:
    # Keyed by the choices themselves, which are strings: no enum is built per call (a request
    # ranks every namespace's permission a few times).
    return PERMISSION_RANK[permission]


def _best(a: str, b: str) -> str:
    return a if rank(a) >= rank(b) else b


@cache
def _permission_rows_sql(one_namespace: bool) -> str:
    """Namespaces with the caller's direct and group grants (one row per grant, or one with NULL):
    the workspace's active ones, or one namespace by id. Every request asks once; written out
    because building it with the ORM cost more CPU than running it."""
    q = connection.ops.quote_name
    namespaces, grants, groups = (q(model._meta.db_table) for model in (Namespace, NamespaceACL, Group))
    group_members = q(Group.members.through._meta.db_table)
    return (
        f"SELECT n.id, n.owner_id, n.others_can, a.permission FROM {namespaces} n "
        f"LEFT JOIN {grants} a ON a.namespace_id = n.id AND (a.user_id = %s OR a.group_id IN ("
        f"SELECT gm.group_id FROM {group_members} gm JOIN {groups} g ON g.id = gm.group_id "
        "WHERE gm.user_id = %s AND g.archived = %s)) "
        + ("WHERE n.id = %s" if one_namespace else "WHERE n.workspace_id = %s AND n.archived = %s ORDER BY n.slug")
    )


def _effective_permissions(actor: Actor, *, namespace_id: int | None = None) -> dict[int, str]:
    """The highest of `others_can`, ownership and grants per namespace (the admin rule aside):
    the workspace's active namespaces, or the one given."""
    one = namespace_id is not None
    params = [actor.user_id, actor.user_id, False, *([namespace_id] if one else [actor.workspace.pk, False])]
    with prepared_cursor() as cursor:
        cursor.execute(_permission_rows_sql(one), params)
        rows = cursor.fetchall()
    permissions: dict[int, str] = {}
    for ns_id, owner_id, others_can, grant in rows:
        permission = Permission.OWN.value if owner_id == actor.user_id else others_can
        best = _best(permission, grant or Permission.NONE.value)
        permissions[ns_id] = _best(best, permissions.get(ns_id, Permission.NONE.value))
    return permissions


def namespace_permissions(actor: Actor) -> dict[int, str]:
    """Effective permission on every active namespace of the workspace (one query, cached)."""
    if actor._permissions is None:
        permissions = _effective_permissions(actor)
        if actor.is_admin:
            permissions = dict.fromkeys(permissions, Permission.OWN.value)
        actor._permissions = permissions
    return actor._permissions


def permission_on(actor: Actor, namespace: Namespace, *, ignore_archive: bool = False) -> str:
    """Effective permission on one namespace; `ignore_archive` is for restoring it."""
    if namespace.workspace_id != actor.workspace.pk:
        return Permission.NONE.value
    if namespace.archived:
        if not ignore_archive:
            return Permission.NONE.value
        if actor.is_admin:
            return Permission.OWN.value
        return _effective_permissions(actor, namespace_id=namespace.pk).get(namespace.pk, Permission.NONE.value)
    return namespace_permissions(actor).get(namespace.pk, Permission.NONE.value)


def namespace_ids_with(actor: Actor, minimum: str) -> list[int]:
    needed = rank(minimum)
    return [ns_id for ns_id, perm in namespace_permissions(actor).items() if rank(perm) >= needed]


def require_namespace(actor: Actor, namespace: Namespace | None, minimum: str, *, ignore_archive: bool = False) -> str:
    """Raise NotFound when the namespace is invisible, PermissionDenied when it is visible but too weak."""
    if namespace is None:
        raise NotFound("Namespace not found.")
    permission = permission_on(actor, namespace, ignore_archive=ignore_archive)
    if permission == Permission.NONE:
        raise NotFound("Namespace not found.")
    if rank(permission) < rank(minimum):
        if minimum == Permission.OWN:
            raise PermissionDenied("You need own permission on this namespace to manage it.")
        raise PermissionDenied(f"You need {minimum} permission on this namespace.")
    return permission


def keeps_own(
    actor: Actor,
    *,
    owner_id: int,
    user_grants: dict[int, str],
    group_grants: dict[int, str],
) -> bool:
    """Would the actor still hold `own` on a namespace in this (proposed) state?"""
    if actor.is_admin or owner_id == actor.user_id:
        return True
    if user_grants.get(actor.user_id) == Permission.OWN:
        return True
    own_groups = [gid for gid, perm in group_grants.items() if perm == Permission.OWN]
    return bool(own_groups and actor.user.knowledge_groups.filter(id__in=own_groups, archived=False).exists())


# --- documents -----------------------------------------------------------------------------


def document_read_filter(actor: Actor, prefix: str = "") -> Q:
    """Queryset filter for documents the actor may read, evaluated inside the SQL query.

    It names only active namespaces of the actor's workspace, so it also keeps every other
    workspace out (`knowledge.selectors` relies on that).
    """
    readable = namespace_ids_with(actor, Permission.READ)
    q = Q(**{f"{prefix}namespace_id__in": readable})
    if actor.is_admin:
        return q
    owned = namespace_ids_with(actor, Permission.OWN)
    return q & (
        Q(**{f"{prefix}visibility": Visibility.PUBLIC})
        | Q(**{f"{prefix}created_by_id": actor.user_id})
        | Q(**{f"{prefix}namespace_id__in": owned})
    )


def _document_permission(actor: Actor, document: DocumentLike) -> str:
    return namespace_permissions(actor).get(document.namespace_id, Permission.NONE.value)


def can_read_document(actor: Actor, document: DocumentLike) -> bool:
    permission = _document_permission(actor, document)
    if rank(permission) < rank(Permission.READ):
        return False
    return (
        actor.is_admin
        or permission == Permission.OWN
        or document.visibility == Visibility.PUBLIC
        or document.created_by_id == actor.user_id
    )


def _is_document_manager(actor: Actor, document: DocumentLike, permission: str) -> bool:
    return actor.is_admin or permission == Permission.OWN or document.created_by_id == actor.user_id


def can_write_document(actor: Actor, document: DocumentLike) -> bool:
    permission = _document_permission(actor, document)
    if rank(permission) < rank(Permission.WRITE):
        return False
    if actor.is_admin or permission == Permission.OWN:
        return True
    if document.edit_policy == "admins":
        return False
    if document.created_by_id == actor.user_id:
        return True
    return document.visibility == Visibility.PUBLIC and document.edit_policy == "public"


def can_govern_document(actor: Actor, document: DocumentLike) -> bool:
    """Visibility, status and edit policy: the creator, namespace `own` or a workspace admin."""
    permission = _document_permission(actor, document)
    return rank(permission) >= rank(Permission.WRITE) and _is_document_manager(actor, document, permission)


def can_archive_document(actor: Actor, document: DocumentLike) -> bool:
    """Archive and restore: owner or admin plus namespace write; public editing is not enough."""
    return can_govern_document(actor, document)


def require_document_read(actor: Actor, document: DocumentLike | None) -> None:
    if document is None or not can_read_document(actor, document):
        raise NotFound("Document not found.")


def require_document_write(actor: Actor, document: DocumentLike) -> None:
    require_document_read(actor, document)
    if not can_write_document(actor, document):
        raise PermissionDenied("You do not have permission to edit this document.")


def require_document_governance(actor: Actor, document: DocumentLike) -> None:
    require_document_read(actor, document)
    if not can_govern_document(actor, document):
        raise PermissionDenied(
            "Only the document's owner, a namespace owner or a workspace admin can change its "
            "visibility, status, edit policy or archive state."
        )
