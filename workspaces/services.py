"""Writes for workspaces, memberships, tokens, namespaces and namespace ACLs."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from config.exceptions import Conflict, Invalid, PermissionDenied
from workspaces import access
from workspaces.access import Actor
from workspaces.exceptions import LastWorkspaceOwner, NotWorkspaceMember
from workspaces.models import (
    ApiToken,
    Group,
    Membership,
    Namespace,
    NamespaceACL,
    NamespaceKind,
    OthersCan,
    Permission,
    Role,
    Visibility,
    Workspace,
)
from workspaces.tokens import new_token, token_digest


@transaction.atomic
def workspace_ensure(*, slug: str, name: str | None = None) -> Workspace:
    """Create the workspace if it does not exist yet."""
    workspace, _ = Workspace.objects.get_or_create(slug=slug, defaults={"name": name or slug})
    return workspace


@transaction.atomic
def user_ensure(
    *, username: str, password: str | None = None, is_staff: bool = False, is_superuser: bool = False
) -> Any:
    """Create the user if missing; a given password is (re)set."""
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(username=username)
    changed = created
    if password:
        user.set_password(password)
        changed = True
    elif created:
        user.set_unusable_password()
    if is_staff and not user.is_staff:
        user.is_staff, changed = True, True
    if is_superuser and not user.is_superuser:
        user.is_superuser, changed = True, True
    if changed:
        user.save()
    return user


def _lock_owners(workspace: Workspace) -> list[int]:
    """Lock the workspace's owner memberships (in pk order, so concurrent callers never deadlock).

    Under PostgreSQL a second caller waits here and then sees the first one's committed demotion,
    so two concurrent demotions of the last two owners cannot both succeed.
    """
    return list(
        Membership.objects.select_for_update()
        .filter(workspace=workspace, role=Role.OWNER)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def _refuse_last_owner(workspace: Workspace, membership: Membership, action: str) -> None:
    owners = _lock_owners(workspace)
    if membership.pk in owners and len(owners) <= 1:
        raise LastWorkspaceOwner(
            f"Cannot {action} {membership.user}: they are the last owner of workspace '{workspace.slug}'. "
            "Make another member an owner first.",
            workspace=workspace.slug,
            user=str(membership.user),
        )


@transaction.atomic
def membership_set(*, workspace: Workspace, user: Any, role: str) -> Membership:
    """Give the user this role in the workspace (creating the membership if needed).

    Demoting the last owner is refused with `LastWorkspaceOwner`.
    """
    role = Role(role).value
    membership, created = Membership.objects.get_or_create(workspace=workspace, user=user, defaults={"role": role})
    if not created and membership.role != role:
        if role != Role.OWNER:
            _refuse_last_owner(workspace, membership, "demote")
            membership.refresh_from_db(fields=["role"])
        membership.role = role
        membership.save(update_fields=["role"])
    return membership


@transaction.atomic
def membership_remove(*, workspace: Workspace, user: Any) -> None:
    """Remove the user from the workspace; removing the last owner is refused."""
    membership = Membership.objects.filter(workspace=workspace, user=user).first()
    if membership is None:
        return
    _refuse_last_owner(workspace, membership, "remove")
    membership.delete()


# --- groups --------------------------------------------------------------------------------


def _require_members(workspace: Workspace, members: list[Any]) -> list[Any]:
    member_ids = {user.pk for user in members}
    known = set(
        Membership.objects.filter(workspace=workspace, user_id__in=member_ids).values_list("user_id", flat=True)
    )
    outsiders = sorted(str(user) for user in members if user.pk not in known)
    if outsiders:
        raise NotWorkspaceMember(
            f"Not members of workspace '{workspace.slug}': {', '.join(outsiders)}.",
            field="members",
            users=outsiders,
        )
    return members


@transaction.atomic
def group_create(*, workspace: Workspace, name: str, members: list[Any] | None = None) -> Group:
    """Create a group in the workspace; every member must belong to the workspace."""
    if Group.objects.filter(workspace=workspace, name=name).exists():
        raise Conflict(f"A group named '{name}' already exists in this workspace.", code="name_taken")
    group = Group.objects.create(workspace=workspace, name=name)
    if members:
        group.members.set(_require_members(workspace, list(members)))
    return group


@transaction.atomic
def group_update(*, group: Group, name: str | None = None, archived: bool | None = None) -> Group:
    """Rename or (un)archive a group; the workspace is fixed."""
    updates: list[str] = []
    if name is not None and name != group.name:
        if Group.objects.filter(workspace_id=group.workspace_id, name=name).exclude(pk=group.pk).exists():
            raise Conflict(f"A group named '{name}' already exists in this workspace.", code="name_taken")
        group.name = name
        updates.append("name")
    if archived is not None and archived != group.archived:
        group.archived = archived
        updates.append("archived")
    if updates:
        group.save(update_fields=updates)
    return group


@transaction.atomic
def group_members_set(*, group: Group, members: list[Any]) -> Group:
    """Replace the group's members; each must be a member of the group's workspace."""
    group.members.set(_require_members(group.workspace, list(members)))
    return group


@transaction.atomic
def group_delete(*, group: Group) -> None:
    """Delete a group; its namespace grants go with it (NamespaceACL.group cascades, on purpose)."""
    NamespaceACL.objects.filter(group=group).delete()
    group.delete()


@transaction.atomic
def token_issue(*, user: Any, workspace: Workspace, name: str = "") -> tuple[ApiToken, str]:
    """Create a token; the raw value is returned once and never stored.

    Only for a member: a token carries its workspace, so one for an outsider would be a key
    that every request then refuses.
    """
    if not Membership.objects.filter(user=user, workspace=workspace).exists():
        raise Invalid(f"{user} is not a member of workspace '{workspace.slug}'.", field="user")
    raw = new_token()
    token = ApiToken.objects.create(
        user=user, workspace=workspace, name=name, prefix=raw[:10], digest=token_digest(raw)
    )
    return token, raw


def token_revoke(*, token: ApiToken) -> ApiToken:
    """Revoke a token; it stops authenticating immediately."""
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


# --- namespaces ----------------------------------------------------------------------------

NAMESPACE_FIELDS = ("display_name", "description", "kind", "visibility_default", "others_can", "metadata")


@transaction.atomic
def namespace_create(
    *,
    actor: Actor,
    slug: str,
    display_name: str = "",
    description: str = "",
    kind: str = NamespaceKind.GLOBAL,
    visibility_default: str = Visibility.PUBLIC,
    others_can: str = OthersCan.NONE,
    metadata: dict[str, Any] | None = None,
) -> Namespace:
    """Any member may create a namespace; the creator owns it (owner field plus an `own` grant)."""
    if Namespace.objects.filter(workspace=actor.workspace, slug=slug).exists():
        raise Conflict(f"A namespace with slug '{slug}' already exists.", code="slug_taken")
    try:
        with transaction.atomic():
            namespace = Namespace.objects.create(
                workspace=actor.workspace,
                slug=slug,
                display_name=display_name or slug,
                description=description,
                kind=kind,
                owner=actor.user,
                visibility_default=visibility_default,
                others_can=others_can,
                metadata=metadata or {},
                created_by=actor.user,
            )
    except IntegrityError as exc:
        raise Conflict(f"A namespace with slug '{slug}' already exists.", code="slug_taken") from exc
    NamespaceACL.objects.create(namespace=namespace, user=actor.user, permission=Permission.OWN)
    actor.forget_permissions()
    return namespace


def _current_grants(namespace: Namespace) -> tuple[dict[int, str], dict[int, str]]:
    users: dict[int, str] = {}
    groups: dict[int, str] = {}
    for user_id, group_id, permission in namespace.acl.values_list("user_id", "group_id", "permission"):
        if user_id:
            users[user_id] = permission
        else:
            groups[group_id] = permission
    return users, groups


def _refuse_losing_own(actor: Actor) -> None:
    raise PermissionDenied(
        "This change would remove your last owner access to the namespace. Grant yourself `own` "
        "another way first, or ask a workspace admin.",
        code="last_owner_access",
    )


@transaction.atomic
def namespace_update(*, actor: Actor, namespace: Namespace, changes: dict[str, Any]) -> Namespace:
    """Change namespace fields (needs `own`). The slug is immutable; ownership moves are guarded."""
    access.require_namespace(actor, namespace, Permission.OWN)
    namespace = Namespace.objects.select_for_update().get(pk=namespace.pk)
    changes = dict(changes)
    slug = changes.pop("slug", None)
    if slug is not None and slug != namespace.slug:
        raise Invalid("A namespace slug cannot be changed after creation.", code="slug_immutable", field="slug")
    owner = changes.pop("owner", None)
    updates = [field for field in NAMESPACE_FIELDS if field in changes and getattr(namespace, field) != changes[field]]
    for field in updates:
        setattr(namespace, field, changes[field])
    if owner is not None and owner.pk != namespace.owner_id:
        if not Membership.objects.filter(workspace=actor.workspace, user=owner).exists():
            raise Invalid("The new owner is not a member of this workspace.", code="invalid", field="owner")
        users, groups = _current_grants(namespace)
        if not access.keeps_own(actor, owner_id=owner.pk, user_grants=users, group_grants=groups):
            _refuse_losing_own(actor)
        namespace.owner = owner
        updates.append("owner")
    if updates:
        namespace.save(update_fields=[*updates, "updated_at"])
        actor.forget_permissions()
    return namespace


@transaction.atomic
def namespace_acl_replace(
    *, actor: Actor, namespace: Namespace, entries: list[dict[str, Any]], others_can: str | None = None
) -> Namespace:
    """Replace every grant at once. Entries name a workspace user or group by name."""
    access.require_namespace(actor, namespace, Permission.OWN)
    namespace = Namespace.objects.select_for_update().get(pk=namespace.pk)
    user_model = get_user_model()
    users: dict[int, str] = {}
    groups: dict[int, str] = {}
    for entry in entries:
        name, permission = entry["subject"], entry["permission"]
        if entry["subject_type"] == "user":
            user = user_model.objects.filter(username=name, memberships__workspace=actor.workspace).first()
            if user is None:
                raise Invalid(f"No workspace member named '{name}'.", code="unknown_subject", subject=name)
            users[user.pk] = _max_permission(users.get(user.pk), permission)
        else:
            group = Group.objects.filter(workspace=actor.workspace, name=name).first()
            if group is None:
                raise Invalid(f"No group named '{name}' in this workspace.", code="unknown_subject", subject=name)
            groups[group.pk] = _max_permission(groups.get(group.pk), permission)
    if not access.keeps_own(actor, owner_id=namespace.owner_id, user_grants=users, group_grants=groups):
        _refuse_losing_own(actor)
    namespace.acl.all().delete()
    NamespaceACL.objects.bulk_create(
        [NamespaceACL(namespace=namespace, user_id=uid, permission=perm) for uid, perm in users.items()]
        + [NamespaceACL(namespace=namespace, group_id=gid, permission=perm) for gid, perm in groups.items()]
    )
    if others_can is not None and others_can != namespace.others_can:
        namespace.others_can = others_can
    namespace.save(update_fields=["others_can", "updated_at"])
    actor.forget_permissions()
    return namespace


def _max_permission(current: str | None, new: str) -> str:
    if current is None:
        return new
    return current if access.rank(current) >= access.rank(new) else new
