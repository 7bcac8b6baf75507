"""Django admin for namespace owners, with superusers seeing everything.

Who may see or change what is decided by `workspaces.access` (through an actor built with
`actor_for(user, namespace.workspace)`), never by Django's per-model permissions: staff users
usually hold none, and holding some must not widen what they reach. So every ModelAdmin here
overrides `has_module/view/add/change/delete_permission`. Writes go through the services, so
the admin obeys the same rules as the API (slug immutability, last-`own` guard, archive).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db.models import Model, QuerySet
from django.db.models.fields.related import ForeignKey
from django.forms.models import BaseInlineFormSet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect

from config.exceptions import DomainError, NotFound
from knowledge.services import namespace_set_archived
from workspaces import access
from workspaces.access import Actor
from workspaces.models import (
    ApiToken,
    Group,
    Membership,
    Namespace,
    NamespaceACL,
    Permission,
    Workspace,
)
from workspaces.services import (
    NAMESPACE_FIELDS,
    group_create,
    group_members_set,
    group_update,
    membership_remove,
    membership_set,
    namespace_acl_replace,
    namespace_create,
    namespace_update,
    token_issue,
    token_revoke,
)

LAST_OWN_MESSAGE = (
    "This change would remove your last owner access to the namespace. Keep an `own` grant for "
    "yourself (directly or through a group), or ask a workspace admin."
)


# --- who the admin user is, per request -----------------------------------------------------


class AdminAccess:
    """One request's view of the admin user's reach; every answer comes from `workspaces.access`.

    Actors are built once per workspace and reused so their permission cache spans the request.
    """

    def __init__(self, user: Any) -> None:
        self.user = user
        self._actors: dict[int, Actor | None] = {}
        self._owned: set[int] | None = None

    @property
    def is_superuser(self) -> bool:
        return bool(self.user.is_active and self.user.is_superuser)

    def actor(self, workspace: Workspace) -> Actor | None:
        """The user's actor in this workspace, or None when they are not a member."""
        if workspace.pk not in self._actors:
            try:
                self._actors[workspace.pk] = access.actor_for(self.user, workspace)
            except DomainError:
                self._actors[workspace.pk] = None
        return self._actors[workspace.pk]

    def require_actor(self, workspace: Workspace) -> Actor:
        """Services need an actor; a superuser outside the workspace gets a clear error, not a 500."""
        actor = self.actor(workspace)
        if actor is None:
            raise NotFound(
                f"You are not a member of workspace '{workspace.slug}'; the admin acts through your membership."
            )
        return actor

    def owns(self, namespace: Namespace) -> bool:
        """Effective `own` (archive ignored, so archived namespaces stay manageable for restore)."""
        actor = self.actor(namespace.workspace)
        return actor is not None and access.permission_on(actor, namespace, ignore_archive=True) == Permission.OWN

    def can_edit(self, namespace: Namespace) -> bool:
        """Fields and ACL: the services refuse archived namespaces, so those are view-only here."""
        return not namespace.archived and self.owns(namespace)

    def owned_namespace_ids(self) -> set[int]:
        """Ids of every namespace (active or archived) the user owns, across their workspaces."""
        if self._owned is None:
            owned: set[int] = set()
            for workspace in Workspace.objects.filter(memberships__user=self.user):
                # The reverse manager sets `namespace.workspace`, so no query per namespace.
                for namespace in workspace.namespaces.only("id", "workspace_id", "owner_id", "others_can", "archived"):
                    if self.owns(namespace):
                        owned.add(namespace.pk)
            self._owned = owned
        return self._owned

    def can_view_namespace_id(self, namespace_id: int) -> bool:
        return self.is_superuser or namespace_id in self.owned_namespace_ids()

    def has_any(self) -> bool:
        return self.is_superuser or bool(self.owned_namespace_ids())

    def forget(self) -> None:
        """After a write: ACLs or archive state may have moved."""
        self._owned = None
        for actor in self._actors.values():
            if actor is not None:
                actor.forget_permissions()


def access_for(request: HttpRequest) -> AdminAccess:
    """The request's AdminAccess, built once (admin asks permissions many times per page)."""
    cached = getattr(request, "_kb_admin_access", None)
    if cached is None or cached.user is not request.user:
        cached = AdminAccess(request.user)
        request._kb_admin_access = cached  # type: ignore[attr-defined]
    return cached


def member_workspaces(request: HttpRequest) -> QuerySet[Workspace]:
    return Workspace.objects.filter(memberships__user=request.user).order_by("slug")


# --- shared bases ---------------------------------------------------------------------------


class DomainErrorAdminMixin:
    """Turn a DomainError raised while saving into an admin error message instead of a 500.

    `changeform_view` runs in a transaction, so everything the failed save did is rolled back.
    Form-level checks catch the expected cases first; this is the net for races.
    """

    def changeform_view(
        self, request: HttpRequest, object_id: str | None = None, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)  # type: ignore[misc]
        except DomainError as exc:
            if request.method != "POST":
                raise
            messages.error(request, exc.message)
            return HttpResponseRedirect(request.get_full_path())


class NamespaceScopedAdmin(DomainErrorAdminMixin, admin.ModelAdmin):
    """Base for models that live in a namespace: superusers see all, staff only what they own.

    Permissions follow namespace `own` from `workspaces.access`, not Django model permissions
    (staff owners usually hold none). Objects outside the user's reach answer 404, like the API.
    Subclasses name the lookup from their model to the namespace id.
    """

    namespace_lookup = "namespace_id"

    def namespace_id_of(self, obj: Any) -> int:
        return obj.namespace_id

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        queryset = super().get_queryset(request)
        reach = access_for(request)
        if reach.is_superuser:
            return queryset
        return queryset.filter(**{f"{self.namespace_lookup}__in": reach.owned_namespace_ids()})

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        obj = super().get_object(request, object_id, from_field)
        if obj is None:
            raise Http404("Not found.")
        return obj

    def has_module_permission(self, request: HttpRequest) -> bool:
        return access_for(request).has_any()

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        reach = access_for(request)
        if obj is None:
            return reach.has_any()
        return reach.can_view_namespace_id(self.namespace_id_of(obj))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """No hard deletes from the admin: archive instead (nothing is lost, restore works)."""
        return False

    def has_archive_permission(self, request: HttpRequest) -> bool:
        """Shows the archive/restore actions; the service authorizes each object again."""
        return access_for(request).has_any()


class SuperuserOnlyAdmin(admin.ModelAdmin):
    """Workspace-level records: superusers only, whatever Django model permissions staff hold."""

    def _superuser(self, request: HttpRequest) -> bool:
        return access_for(request).is_superuser

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self._superuser(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._superuser(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self._superuser(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._superuser(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._superuser(request)


# --- workspaces, memberships, groups ---------------------------------------------------------


@admin.register(Workspace)
class WorkspaceAdmin(SuperuserOnlyAdmin):
    list_display = ("slug", "name", "created_at")
    search_fields = ("slug", "name")
    readonly_fields = ("created_at",)

    def get_readonly_fields(self, request: HttpRequest, obj: Workspace | None = None) -> tuple[str, ...]:
        return ("slug", "created_at") if obj else ("created_at",)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Deleting a workspace would cascade to its namespaces; not from the admin."""
        return False


class DomainErrorDeleteMixin:
    """Deletes go through a service; a DomainError becomes an admin message, not a 500."""

    def delete_view(self, request: HttpRequest, object_id: str, extra_context: Any = None) -> HttpResponse:
        try:
            return super().delete_view(request, object_id, extra_context)  # type: ignore[misc]
        except DomainError as exc:
            if request.method != "POST":
                raise
            messages.error(request, exc.message)
            return HttpResponseRedirect(request.get_full_path())


@admin.register(Membership)
class MembershipAdmin(DomainErrorAdminMixin, DomainErrorDeleteMixin, SuperuserOnlyAdmin):
    """Roles and removals go through `membership_set` / `membership_remove` (last-owner guard)."""

    list_display = ("user", "workspace", "role", "created_at")
    list_filter = ("role", "workspace")
    search_fields = ("user__username", "workspace__slug")
    list_select_related = ("user", "workspace")

    def get_readonly_fields(self, request: HttpRequest, obj: Membership | None = None) -> tuple[str, ...]:
        return ("workspace", "user", "created_at") if obj else ("created_at",)

    def save_model(self, request: HttpRequest, obj: Membership, form: forms.ModelForm, change: bool) -> None:
        """Through `membership_set`, the one writer of roles."""
        saved = membership_set(workspace=obj.workspace, user=obj.user, role=obj.role)
        _adopt(obj, saved)

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        membership_remove(workspace=obj.workspace, user=obj.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Membership]) -> None:
        """Bulk delete: each membership on its own; refused ones are reported, the rest removed."""
        removed = 0
        for membership in queryset.select_related("workspace", "user"):
            try:
                membership_remove(workspace=membership.workspace, user=membership.user)
                removed += 1
            except DomainError as exc:
                messages.error(request, exc.message)
        request.memberships_removed = removed  # type: ignore[attr-defined]

    def message_user(
        self, request: HttpRequest, message: str, level: int = messages.INFO, *args: Any, **kwargs: Any
    ) -> None:
        """After a bulk delete, count what was removed: Django's own message counts the selection."""
        removed = getattr(request, "memberships_removed", None)
        if removed is not None and level == messages.SUCCESS:
            del request.memberships_removed  # type: ignore[attr-defined]
            if removed == 0:
                return
            message = f"Removed {removed} membership{'' if removed == 1 else 's'}."
        super().message_user(request, message, level, *args, **kwargs)


class GroupAdminForm(forms.ModelForm):
    class Meta:
        model = Group
        fields = ("workspace", "name", "members", "archived")


@admin.register(Group)
class GroupAdmin(DomainErrorAdminMixin, SuperuserOnlyAdmin):
    """Saves go through the group services (members must belong to the group's workspace)."""

    form = GroupAdminForm
    list_display = ("name", "workspace", "archived")
    list_filter = ("workspace", "archived")
    search_fields = ("name",)
    filter_horizontal = ("members",)

    def get_readonly_fields(self, request: HttpRequest, obj: Group | None = None) -> tuple[str, ...]:
        return ("workspace",) if obj else ()

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Deleting a group drops its grants; archive it instead (`group_delete` exists for scripts)."""
        return False

    def save_model(self, request: HttpRequest, obj: Group, form: forms.ModelForm, change: bool) -> None:
        if change:
            group_update(group=obj, name=form.cleaned_data.get("name"), archived=form.cleaned_data.get("archived"))
        else:
            _adopt(obj, group_create(workspace=form.cleaned_data["workspace"], name=form.cleaned_data["name"]))
            if form.cleaned_data.get("archived"):
                group_update(group=obj, archived=True)

    def save_related(self, request: HttpRequest, form: forms.ModelForm, formsets: Any, change: bool) -> None:
        """Members through `group_members_set`, never the form's m2m save."""
        group_members_set(group=form.instance, members=list(form.cleaned_data.get("members") or []))
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)


def _adopt(obj: Model, saved: Model) -> None:
    """Make the admin's unsaved instance the row a service created, so logging and redirects work."""
    obj.pk = saved.pk
    obj._state.adding = False
    obj._state.db = saved._state.db
    obj.refresh_from_db()


# --- API tokens ------------------------------------------------------------------------------


class ApiTokenAddForm(forms.ModelForm):
    """Only who, where and a label: the raw token is generated by `token_issue`."""

    class Meta:
        model = ApiToken
        fields = ("user", "workspace", "name")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        user, workspace = cleaned.get("user"), cleaned.get("workspace")
        if user and workspace and not Membership.objects.filter(user=user, workspace=workspace).exists():
            raise ValidationError(f"{user} is not a member of workspace '{workspace.slug}'.")
        return cleaned


@admin.register(ApiToken)
class ApiTokenAdmin(DomainErrorAdminMixin, admin.ModelAdmin):
    """Tokens by prefix; the digest is never shown. Superusers see all, staff only their own.

    Adding issues a token through `token_issue` and shows the raw value once, as a message.
    Tokens are never edited or deleted here; revoke them instead.
    """

    list_display = ("prefix", "name", "user", "workspace", "created_at", "last_used_at", "revoked_at")
    list_filter = (("workspace", admin.RelatedOnlyFieldListFilter), ("revoked_at", admin.EmptyFieldListFilter))
    search_fields = ("prefix", "name", "user__username")
    list_select_related = ("user", "workspace")
    exclude = ("digest",)
    view_fields = ("prefix", "name", "user", "workspace", "created_at", "last_used_at", "revoked_at")
    actions = ("revoke_tokens",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApiToken]:
        queryset = super().get_queryset(request)
        return queryset if access_for(request).is_superuser else queryset.filter(user=request.user)

    def get_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> tuple[str, ...]:
        return self.view_fields if obj else ("user", "workspace", "name")

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> tuple[str, ...]:
        return self.view_fields if obj else ()

    def get_form(self, request: HttpRequest, obj: ApiToken | None = None, change: bool = False, **kwargs: Any) -> Any:
        if obj is None:
            kwargs["form"] = ApiTokenAddForm
        return super().get_form(request, obj, change=change, **kwargs)

    def formfield_for_foreignkey(self, db_field: ForeignKey, request: HttpRequest, **kwargs: Any) -> Any:
        if not access_for(request).is_superuser:
            if db_field.name == "user":
                kwargs["queryset"] = get_user_model().objects.filter(pk=request.user.pk)
            elif db_field.name == "workspace":
                kwargs["queryset"] = member_workspaces(request)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        obj = super().get_object(request, object_id, from_field)
        if obj is None:
            raise Http404("Not found.")
        return obj

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_staff

    def has_view_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        if access_for(request).is_superuser:
            return True
        return request.user.is_active and request.user.is_staff and (obj is None or obj.user_id == request.user.pk)

    def has_add_permission(self, request: HttpRequest) -> bool:
        """Superusers for anyone; staff only for themselves, in workspaces they belong to."""
        return access_for(request).is_superuser or (request.user.is_staff and member_workspaces(request).exists())

    def has_change_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        return False

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)

    def save_model(self, request: HttpRequest, obj: ApiToken, form: forms.ModelForm, change: bool) -> None:
        token, raw = token_issue(user=obj.user, workspace=obj.workspace, name=obj.name)
        _adopt(obj, token)
        messages.warning(
            request,
            f"New token for {token.user} in {token.workspace.slug}: {raw} — copy it now, it is not shown again.",
        )

    @admin.action(description="Revoke selected tokens", permissions=["revoke"])
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        revoked = 0
        for token in queryset:
            if token.revoked_at is None:
                token_revoke(token=token)
                revoked += 1
        messages.success(request, f"Revoked {revoked} token(s).")


# --- namespaces and their ACLs ---------------------------------------------------------------


class NamespaceACLForm(forms.ModelForm):
    class Meta:
        model = NamespaceACL
        fields = ("user", "group", "permission")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if bool(cleaned.get("user")) == bool(cleaned.get("group")):
            raise ValidationError("Choose either a user or a group for each grant.")
        return cleaned


class NamespaceACLFormSet(BaseInlineFormSet):
    """Validates the proposed ACL as a whole: no duplicates, and the editor keeps `own`.

    The admin sets `reach` per request. The result is saved by `namespace_acl_replace`,
    which checks the same rule again inside its transaction.
    """

    reach: AdminAccess | None = None

    def clean(self) -> None:
        super().clean()
        self.entries: list[dict[str, str]] = []
        if any(self.errors) or not self.has_changed():
            return
        users: dict[int, str] = {}
        groups: dict[int, str] = {}
        for form in self.forms:
            data = getattr(form, "cleaned_data", None)
            if not data or data.get("DELETE"):
                continue
            user, group, permission = data.get("user"), data.get("group"), data["permission"]
            grants, subject = (users, user) if user else (groups, group)
            if subject.pk in grants:
                raise ValidationError(f"{subject} is listed more than once.")
            grants[subject.pk] = permission
            self.entries.append(
                {
                    "subject_type": "user" if user else "group",
                    "subject": user.get_username() if user else group.name,
                    "permission": permission,
                }
            )
        actor = self.reach.actor(self.instance.workspace) if self.reach else None
        if actor is None:
            raise ValidationError("You are not a member of this namespace's workspace.")
        if not access.keeps_own(actor, owner_id=self.instance.owner_id, user_grants=users, group_grants=groups):
            raise ValidationError(LAST_OWN_MESSAGE, code="last_owner_access")


class NamespaceACLInline(admin.TabularInline):
    """Grants, editable by whoever may edit the namespace; choices limited to its workspace."""

    model = NamespaceACL
    form = NamespaceACLForm
    formset = NamespaceACLFormSet
    fields = ("user", "group", "permission", "created_at")
    readonly_fields = ("created_at",)
    extra = 1

    def get_formset(self, request: HttpRequest, obj: Namespace | None = None, **kwargs: Any) -> Any:
        request._kb_acl_workspace_id = obj.workspace_id if obj else None  # type: ignore[attr-defined]
        formset = super().get_formset(request, obj, **kwargs)
        formset.reach = access_for(request)
        return formset

    def formfield_for_foreignkey(self, db_field: ForeignKey, request: HttpRequest, **kwargs: Any) -> Any:
        workspace_id = getattr(request, "_kb_acl_workspace_id", None)
        if db_field.name == "user":
            kwargs["queryset"] = (
                get_user_model().objects.filter(memberships__workspace_id=workspace_id).order_by("username")
            )
        elif db_field.name == "group":
            kwargs["queryset"] = Group.objects.filter(workspace_id=workspace_id).order_by("name")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def has_view_permission(self, request: HttpRequest, obj: Namespace | None = None) -> bool:
        """Without a parent (the inline's queryset), the namespace admin has already gated access."""
        reach = access_for(request)
        return reach.has_any() if obj is None else reach.can_view_namespace_id(obj.pk)

    def has_add_permission(self, request: HttpRequest, obj: Namespace | None = None) -> bool:
        return obj is not None and access_for(request).can_edit(obj)

    def has_change_permission(self, request: HttpRequest, obj: Namespace | None = None) -> bool:
        return obj is not None and access_for(request).can_edit(obj)

    def has_delete_permission(self, request: HttpRequest, obj: Namespace | None = None) -> bool:
        return obj is not None and access_for(request).can_edit(obj)


@admin.register(Namespace)
class NamespaceAdmin(NamespaceScopedAdmin):
    """Namespaces the user owns (all, for superusers). Saves go through the namespace services.

    Editing needs effective `own` through the user's own membership, also for superusers: the
    services act as an actor, and the admin does not invent one.
    """

    namespace_lookup = "pk"
    list_display = ("slug", "display_name", "workspace", "kind", "owner", "others_can", "archived", "updated_at")
    list_filter = (("workspace", admin.RelatedOnlyFieldListFilter), "kind", "others_can", "archived")
    search_fields = ("slug", "display_name")
    list_select_related = ("workspace", "owner")
    inlines = (NamespaceACLInline,)
    actions = ("archive_namespaces", "restore_namespaces")
    editable_fields = NAMESPACE_FIELDS
    info_fields = ("owner", "archived", "archived_at", "created_by", "created_at", "updated_at")

    def namespace_id_of(self, obj: Namespace) -> int:
        return obj.pk

    def get_fields(self, request: HttpRequest, obj: Namespace | None = None) -> tuple[str, ...]:
        if obj is None:
            return ("workspace", "slug", *self.editable_fields)
        return ("workspace", "slug", *self.editable_fields, *self.info_fields)

    def get_readonly_fields(self, request: HttpRequest, obj: Namespace | None = None) -> tuple[str, ...]:
        """The slug (and workspace) are fixed after creation, like in the API."""
        return ("workspace", "slug", *self.info_fields) if obj else ()

    def get_inline_instances(self, request: HttpRequest, obj: Namespace | None = None) -> list[Any]:
        """No ACL on the add form: `namespace_create` grants the creator `own`; edit it afterwards."""
        return super().get_inline_instances(request, obj) if obj else []

    def formfield_for_foreignkey(self, db_field: ForeignKey, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "workspace":
            kwargs["queryset"] = member_workspaces(request)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def has_add_permission(self, request: HttpRequest) -> bool:
        """Any member may create a namespace (and owns it); the admin needs that membership."""
        return member_workspaces(request).exists()

    def has_change_permission(self, request: HttpRequest, obj: Namespace | None = None) -> bool:
        reach = access_for(request)
        if obj is None:
            return reach.has_any()
        return reach.can_edit(obj)

    def save_model(self, request: HttpRequest, obj: Namespace, form: forms.ModelForm, change: bool) -> None:
        reach = access_for(request)
        fields = {name: form.cleaned_data[name] for name in self.editable_fields if name in form.cleaned_data}
        if change:
            namespace_update(actor=reach.require_actor(obj.workspace), namespace=obj, changes=fields)
        else:
            actor = reach.require_actor(form.cleaned_data["workspace"])
            _adopt(obj, namespace_create(actor=actor, slug=form.cleaned_data["slug"], **fields))
        reach.forget()

    def save_formset(self, request: HttpRequest, form: forms.ModelForm, formset: Any, change: bool) -> None:
        """ACL rows are replaced as a whole by `namespace_acl_replace`, never saved row by row."""
        if not isinstance(formset, NamespaceACLFormSet):
            return super().save_formset(request, form, formset, change)
        formset.save(commit=False)  # fills new/changed/deleted_objects for the change message only
        if formset.has_changed():
            reach = access_for(request)
            namespace_acl_replace(
                actor=reach.require_actor(form.instance.workspace), namespace=form.instance, entries=formset.entries
            )
            reach.forget()
        return None

    @admin.action(description="Archive selected namespaces (with their documents)", permissions=["archive"])
    def archive_namespaces(self, request: HttpRequest, queryset: QuerySet[Namespace]) -> None:
        self._set_archived(request, queryset, archived=True)

    @admin.action(description="Restore selected namespaces (with their documents)", permissions=["archive"])
    def restore_namespaces(self, request: HttpRequest, queryset: QuerySet[Namespace]) -> None:
        self._set_archived(request, queryset, archived=False)

    def _set_archived(self, request: HttpRequest, queryset: QuerySet[Namespace], *, archived: bool) -> None:
        """Each namespace on its own through `namespace_set_archived`; failures become messages."""
        reach = access_for(request)
        changed = unchanged = 0
        for namespace in queryset.select_related("workspace"):
            try:
                actor = reach.require_actor(namespace.workspace)
                if namespace_set_archived(actor=actor, namespace=namespace, archived=archived):
                    changed += 1
                else:
                    unchanged += 1
            except DomainError as exc:
                messages.error(request, f"{namespace.slug}: {exc.message}")
        reach.forget()
        verb = "Archived" if archived else "Restored"
        if changed:
            messages.success(request, f"{verb} {changed} namespace(s).")
        if unchanged:
            messages.info(request, f"{unchanged} namespace(s) were already {'archived' if archived else 'active'}.")


from workspaces import semantic_admin  # noqa: E402,F401  (registers the policy page; it builds on the classes above)
