"""Admin page for a workspace's semantic-search policy (workspace admins and owners).

The form edits the policy's fields one by one and saves through `semantic.policy_update`, so the
validation, the sealing of the key and the re-indexing hooks are the API's. The key field is
write-only: it never renders a value, blank keeps the stored key, and a checkbox removes it.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from config.exceptions import Invalid
from workspaces import semantic
from workspaces.admin import DomainErrorAdminMixin, access_for
from workspaces.models import SemanticPolicy, Workspace

PROVIDERS = [("openai", "OpenAI"), ("openai-compatible", "OpenAI-compatible endpoint"), ("local", "Local MiniLM")]
CHUNKING = ("target_tokens", "max_tokens", "overlap_tokens", "min_tokens")


class SemanticPolicyForm(forms.ModelForm):
    enabled = forms.BooleanField(required=False)
    provider = forms.ChoiceField(choices=PROVIDERS)
    model = forms.CharField(max_length=200)
    dimensions = forms.IntegerField(min_value=1)
    base_url = forms.CharField(max_length=500, required=False, help_text="openai-compatible only.")
    target_tokens = forms.IntegerField(min_value=0)
    max_tokens = forms.IntegerField(min_value=0)
    overlap_tokens = forms.IntegerField(min_value=0)
    min_tokens = forms.IntegerField(min_value=0)
    paused = forms.BooleanField(required=False, help_text="Stop embedding new work until unpaused.")
    batch_size = forms.IntegerField(min_value=1, max_value=128)
    api_key = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only. Leave blank to keep the stored key.",
    )
    remove_api_key = forms.BooleanField(required=False, help_text="Delete the stored key.")

    class Meta:
        model = SemanticPolicy
        fields: tuple[str, ...] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        current = semantic.merge(self.instance.policy or {}, {})
        for name in ("enabled", "provider", "model", "dimensions", "base_url"):
            self.fields[name].initial = current[name]
        for name in CHUNKING:
            self.fields[name].initial = current["chunking"][name]
        self.fields["paused"].initial = current["indexing"]["paused"]
        self.fields["batch_size"].initial = current["indexing"]["batch_size"]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        patch: dict[str, Any] = {
            "enabled": data["enabled"],
            "provider": data["provider"],
            "model": data["model"].strip(),
            "dimensions": data["dimensions"],
            "base_url": data["base_url"].strip() or None,
            "chunking": {name: data[name] for name in CHUNKING},
            "indexing": {"paused": data["paused"], "batch_size": data["batch_size"]},
        }
        if data["remove_api_key"]:
            patch["api_key"] = None
        elif data["api_key"]:
            patch["api_key"] = data["api_key"]
        try:
            semantic.merge(self.instance.policy or {}, patch)
        except Invalid as exc:
            for name, message in (exc.extra.get("errors") or {"__all__": exc.message}).items():
                field = name.split(".")[-1]
                self.add_error(field if field in self.fields else None, message)
        self.patch = patch
        return data


@admin.register(SemanticPolicy)
class SemanticPolicyAdmin(DomainErrorAdminMixin, admin.ModelAdmin):
    """Listed for the workspaces where the user is an admin or owner; nothing else is visible."""

    form = SemanticPolicyForm
    list_display = ("workspace", "enabled", "provider_model", "api_key_configured", "updated_at")
    readonly_fields = ("workspace", "api_key_configured", "generation", "unavailable_reason", "updated_at")
    fieldsets = (
        (None, {"fields": ("workspace", "enabled", "unavailable_reason")}),
        ("Provider", {"fields": ("provider", "model", "dimensions", "base_url")}),
        ("Key", {"fields": ("api_key_configured", "api_key", "remove_api_key")}),
        ("Chunking", {"fields": CHUNKING}),
        ("Indexing", {"fields": ("paused", "batch_size", "generation", "updated_at")}),
    )

    def _admin_workspace_ids(self, request: HttpRequest) -> set[int]:
        reach = access_for(request)
        ids = set()
        for workspace in Workspace.objects.filter(memberships__user=request.user):
            actor = reach.actor(workspace)
            if actor is not None and actor.is_admin:
                ids.add(workspace.pk)
        return ids

    def get_queryset(self, request: HttpRequest) -> Any:
        ids = self._admin_workspace_ids(request)
        for workspace_id in ids:  # every manageable workspace has a row to open
            SemanticPolicy.objects.get_or_create(workspace_id=workspace_id)
        return super().get_queryset(request).filter(workspace_id__in=ids).select_related("workspace")

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(self._admin_workspace_ids(request))

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        ids = self._admin_workspace_ids(request)
        return bool(ids) if obj is None else obj.workspace_id in ids

    has_change_permission = has_view_permission

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(boolean=True)
    def enabled(self, obj: SemanticPolicy) -> bool:
        return bool(semantic.merge(obj.policy, {})["enabled"])

    @admin.display(description="provider / model")
    def provider_model(self, obj: SemanticPolicy) -> str:
        policy = semantic.merge(obj.policy, {})
        return f"{policy['provider']} / {policy['model']} ({policy['dimensions']})"

    @admin.display(boolean=True)
    def api_key_configured(self, obj: SemanticPolicy) -> bool:
        return bool(obj.api_key_sealed)

    def unavailable_reason(self, obj: SemanticPolicy) -> str:
        return semantic.public_policy(obj)["unavailable_reason"] or "Semantic search is available."

    def save_model(self, request: HttpRequest, obj: SemanticPolicy, form: SemanticPolicyForm, change: bool) -> None:
        actor = access_for(request).require_actor(obj.workspace)
        semantic.policy_update(actor=actor, patch=form.patch)
        obj.refresh_from_db()
