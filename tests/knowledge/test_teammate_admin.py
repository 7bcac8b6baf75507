"""The teammate config admin page: workspace admins, members of their workspaces, saves through the service."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.workspaces.test_admin import changeform_data, login, staff
from workspaces.models import TeammateConfig

pytestmark = pytest.mark.django_db
CHANGELIST = "admin:workspaces_teammateconfig_changelist"


def change_url(config: TeammateConfig) -> str:
    return reverse("admin:workspaces_teammateconfig_change", args=[config.pk])


def test_admins_edit_a_members_config_through_the_service(make_member, workspace):
    admin = staff(make_member("admin", username="ada"))
    agent = make_member("member", username="bot")
    config = TeammateConfig.objects.create(workspace=workspace, user=agent.user)
    client = login(admin.user)
    page = client.get(change_url(config))
    assert page.status_code == 200
    data = changeform_data(page)
    data.update(
        {
            "memory_path_template": "journal/{{YYYY-MM-DD}}.md",
            "memory_visibility": "public",
            "grants": '[{"namespace": "eng"}, {"namespace": "eng", "access": "write"}]',
        }
    )
    saved = client.post(change_url(config), data)
    assert saved.status_code == 302, saved.content[:2000]
    config.refresh_from_db()
    assert config.memory_path_template == "journal/{{YYYY-MM-DD}}.md" and config.memory_visibility == "public"
    assert config.grants == [{"namespace": "eng", "access": "write"}]  # normalised by the service


def test_invalid_values_show_errors_and_change_nothing(make_member, workspace):
    admin = staff(make_member("admin", username="ada"))
    config = TeammateConfig.objects.create(workspace=workspace, user=make_member(username="bot").user)
    client = login(admin.user)
    data = changeform_data(client.get(change_url(config)))
    data.update({"memory_path_template": "../outside/{{YYYY-MM-DD}}.md", "memory_edit_policy": "nobody"})
    response = client.post(change_url(config), data)
    assert response.status_code == 200
    assert "memory_path_template" in response.context["adminform"].form.errors
    config.refresh_from_db()
    assert config.memory_path_template == "memory/{{YYYY-MM-DD}}.md" and config.memory_edit_policy == "owner"


def test_adding_is_limited_to_members_of_the_admins_workspaces(make_member, workspace, other_workspace):
    admin = staff(make_member("admin", username="ada"))
    member = make_member(username="mia")
    outsider = make_member(workspace_=other_workspace, username="oscar")
    client = login(admin.user)
    add = reverse("admin:workspaces_teammateconfig_add")
    base = {"memory_path_template": "memory/{{YYYY-MM-DD}}.md", "memory_visibility": "private"}
    base.update({"memory_edit_policy": "owner", "grants": "[]", "workspace": workspace.pk})
    refused = client.post(add, {**base, "user": outsider.user.pk})
    assert refused.status_code == 200 and "user" in refused.context["adminform"].form.errors
    assert not TeammateConfig.objects.filter(user=outsider.user).exists()
    created = client.post(add, {**base, "user": member.user.pk})
    assert created.status_code == 302, created.content[:2000]
    assert TeammateConfig.objects.get(user=member.user).workspace == workspace
    duplicate = client.post(add, {**base, "user": member.user.pk})
    assert duplicate.status_code == 200 and TeammateConfig.objects.filter(user=member.user).count() == 1


def test_members_and_other_workspaces_admins_cannot_reach_it(make_member, workspace, other_workspace):
    config = TeammateConfig.objects.create(workspace=workspace, user=make_member(username="bot").user)
    member = staff(make_member("member", username="mia"))
    assert login(member.user).get(reverse(CHANGELIST)).status_code == 403
    outsider = staff(make_member("admin", workspace_=other_workspace, username="oscar"))
    client = login(outsider.user)
    assert list(client.get(reverse(CHANGELIST)).context["cl"].result_list) == []
    assert client.get(change_url(config)).status_code in (302, 403, 404)
    assert client.post(change_url(config), {"memory_visibility": "public"}).status_code in (302, 403, 404)
    config.refresh_from_db()
    assert config.memory_visibility == "private"
