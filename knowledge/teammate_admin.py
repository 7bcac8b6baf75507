"""Admin page for teammate configs (workspace admins and owners, for members of their workspaces).

Saves go through `teammate.teammate_config_update`, the same writer and validation as
`PATCH /kb/teammate/config`; the home namespace is created on first use, never picked here.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from config.exceptions import Invalid
from knowledge import teammate
from workspaces.admin import DomainErrorAdminMixin, _adopt, access_for
from workspaces.models import Membership, TeammateConfig, Workspace

EDITABLE = ("memory_path_template", "memory_visibility", "memory_edit_policy", "grants")


def admin_workspace_ids(request: HttpRequest) -> set[int]:
    """Workspaces where the user may manage other members' settings."""
    reach = access_for(request)
    ids = set()
    for workspace in Workspace.objects.filter(memberships__user=request.user):
        actor = reach.actor(workspace)
        if actor is not None and actor.is_admin:
            ids.add(workspace.pk)
    return ids


class TeammateConfigForm(forms.ModelForm):
    class Meta:
        model = TeammateConfig
        fields = ("workspace", "user", *EDITABLE)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        workspace, user = data.get("workspace") or self.instance_workspace(), data.get("user")
        if self.instance.pk is None and workspace and user:
            if not Membership.objects.filter(workspace=workspace, user=user).exists():
                self.add_error("user", f"{user} is not a member of workspace '{workspace.slug}'.")
            elif TeammateConfig.objects.filter(workspace=workspace, user=user).exists():
                self.add_error("user", f"{user} already has a teammate config in '{workspace.slug}'.")
        try:
            self.changes = teammate.config_changes_clean({f: data[f] for f in EDITABLE if f in data})
        except Invalid as exc:
            field = str(exc.extra.get("field") or "").split("[")[0]
            self.add_error(field if field in self.fields else None, exc.message)
        return data

    def instance_workspace(self) -> Workspace | None:
        return self.instance.workspace if self.instance.pk else None


@admin.register(TeammateConfig)
class TeammateConfigAdmin(DomainErrorAdminMixin, admin.ModelAdmin):
    """Listed for the workspaces where the user is an admin or owner; nothing else is visible."""

    form = TeammateConfigForm
    list_display = ("user", "workspace", "home_namespace", "memory_path_template", "memory_visibility", "updated_at")
    list_filter = ("workspace",)
    search_fields = ("user__username",)
    list_select_related = ("user", "workspace", "home_namespace")

    def get_readonly_fields(self, request: HttpRequest, obj: TeammateConfig | None = None) -> tuple[str, ...]:
        return ("workspace", "user", "home_namespace", "updated_at") if obj else ("home_namespace", "updated_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[TeammateConfig]:
        return super().get_queryset(request).filter(workspace_id__in=admin_workspace_ids(request))

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        ids = admin_workspace_ids(request)
        if db_field.name == "workspace":
            kwargs["queryset"] = Workspace.objects.filter(pk__in=ids).order_by("slug")
        elif db_field.name == "user":
            model = db_field.related_model
            kwargs["queryset"] = model.objects.filter(memberships__workspace_id__in=ids).distinct().order_by("username")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(admin_workspace_ids(request))

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        ids = admin_workspace_ids(request)
        return bool(ids) if obj is None else obj.workspace_id in ids

    has_change_permission = has_view_permission

    def has_add_permission(self, request: HttpRequest) -> bool:
        return bool(admin_workspace_ids(request))

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """The config points at the teammate's home; removing it would orphan the memory."""
        return False

    def save_model(self, request: HttpRequest, obj: TeammateConfig, form: forms.ModelForm, change: bool) -> None:
        """Through `teammate_config_update`, the one writer of teammate configs."""
        if not change:
            base = TeammateConfig.objects.create(workspace=obj.workspace, user=obj.user)
        else:
            base = TeammateConfig.objects.get(pk=obj.pk)
        _adopt(obj, teammate.teammate_config_update(config=base, changes=form.changes))
