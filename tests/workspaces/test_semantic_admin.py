"""The semantic policy's admin page: workspace admins only, saves through the service, key write-only."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.workspaces.test_admin import changeform_data, login, staff
from workspaces.models import SemanticPolicy
from workspaces.semantic import provider_key

pytestmark = pytest.mark.django_db
KEY = "sk-admin-page-" + "x" * 30
CHANGELIST = "admin:workspaces_semanticpolicy_changelist"


def change_url(workspace) -> str:
    row, _ = SemanticPolicy.objects.get_or_create(workspace=workspace)
    return reverse("admin:workspaces_semanticpolicy_change", args=[row.pk])


def test_admins_edit_the_policy_and_the_key_never_renders(make_member, workspace):
    admin = staff(make_member("admin", username="ada"))
    client = login(admin.user)
    assert client.get(reverse(CHANGELIST)).status_code == 200
    page = client.get(change_url(workspace))
    assert page.status_code == 200
    data = changeform_data(page)
    data.update({"enabled": "on", "provider": "local", "model": "all-MiniLM-L6-v2", "dimensions": 384})
    data.update({"target_tokens": 400, "api_key": KEY})
    saved = client.post(change_url(workspace), data)
    assert saved.status_code == 302, saved.content[:2000]
    row = SemanticPolicy.objects.get(workspace=workspace)
    assert row.policy["provider"] == "local" and row.policy["chunking"]["target_tokens"] == 400
    assert provider_key(row) == KEY and KEY not in row.api_key_sealed
    again = client.get(change_url(workspace))
    assert KEY not in again.content.decode() and 'name="api_key"' in again.content.decode()
    assert KEY not in client.get(reverse(CHANGELIST)).content.decode()

    blank = changeform_data(again)  # saving with a blank key keeps it
    blank["enabled"] = "on"
    assert client.post(change_url(workspace), blank).status_code == 302
    assert provider_key(SemanticPolicy.objects.get(workspace=workspace)) == KEY
    blank["remove_api_key"] = "on"
    assert client.post(change_url(workspace), blank).status_code == 302
    assert SemanticPolicy.objects.get(workspace=workspace).api_key_sealed == ""


def test_invalid_values_show_errors_and_change_nothing(make_member, workspace):
    admin = staff(make_member("admin", username="ada"))
    client = login(admin.user)
    page = client.get(change_url(workspace))
    data = changeform_data(page)
    data.update({"provider": "local", "model": "all-MiniLM-L6-v2", "dimensions": 768, "max_tokens": 10})
    response = client.post(change_url(workspace), data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "dimensions" in errors or "max_tokens" in errors
    assert SemanticPolicy.objects.get(workspace=workspace).policy == {}


def test_members_and_other_workspaces_admins_cannot_reach_it(make_member, workspace, other_workspace):
    member = staff(make_member("member", username="mia"))
    assert login(member.user).get(reverse(CHANGELIST)).status_code == 403
    assert login(member.user).get(change_url(workspace)).status_code in (403, 302)
    outsider = staff(make_member("admin", workspace_=other_workspace, username="oscar"))
    client = login(outsider.user)
    listed = client.get(reverse(CHANGELIST)).context["cl"].result_list
    assert [row.workspace for row in listed] == [other_workspace]
    assert client.get(change_url(workspace)).status_code in (403, 302, 404)
