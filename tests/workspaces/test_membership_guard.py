"""Last-owner guard on memberships, group services, and the admin paths that use them."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, connections
from django.test import Client
from django.urls import reverse

from config.exceptions import DomainError
from workspaces.exceptions import LastWorkspaceOwner, NotWorkspaceMember
from workspaces.models import Group, Membership, NamespaceACL, Permission, Role, Workspace
from workspaces.services import (
    group_create,
    group_delete,
    group_members_set,
    group_update,
    membership_remove,
    membership_set,
    namespace_create,
    user_ensure,
    workspace_ensure,
)

postgres_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks need PostgreSQL")


def role_of(workspace: Workspace, user: Any) -> str:
    return Membership.objects.get(workspace=workspace, user=user).role


# --- services --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_demoting_the_last_owner_is_refused(owner):
    with pytest.raises(LastWorkspaceOwner) as exc:
        membership_set(workspace=owner.workspace, user=owner.user, role=Role.ADMIN)
    assert exc.value.code == "last_workspace_owner"
    assert "last owner" in exc.value.message
    assert role_of(owner.workspace, owner.user) == Role.OWNER


@pytest.mark.django_db
def test_removing_the_last_owner_is_refused(owner, alice):
    with pytest.raises(LastWorkspaceOwner):
        membership_remove(workspace=owner.workspace, user=owner.user)
    assert role_of(owner.workspace, owner.user) == Role.OWNER
    membership_remove(workspace=alice.workspace, user=alice.user)
    assert not Membership.objects.filter(workspace=alice.workspace, user=alice.user).exists()


@pytest.mark.django_db
def test_demoting_an_owner_is_allowed_when_another_owner_exists(make_member):
    first, second = make_member("owner"), make_member("owner")
    membership_set(workspace=first.workspace, user=first.user, role=Role.MEMBER)
    assert role_of(first.workspace, first.user) == Role.MEMBER
    with pytest.raises(LastWorkspaceOwner):
        membership_remove(workspace=second.workspace, user=second.user)


@pytest.mark.django_db
def test_bootstrap_fails_clearly_on_the_last_owner(owner):
    with pytest.raises(CommandError, match="last owner"):
        call_command(
            "kb_bootstrap", "--workspace", owner.workspace.slug, "--user", owner.user.username, "--role", "member"
        )
    assert role_of(owner.workspace, owner.user) == Role.OWNER


# --- groups ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_group_members_must_belong_to_the_workspace(alice, make_member, other_workspace):
    outsider = make_member("member", workspace_=other_workspace)
    with pytest.raises(NotWorkspaceMember) as exc:
        group_create(workspace=alice.workspace, name="eng", members=[alice.user, outsider.user])
    assert exc.value.code == "not_workspace_member"
    assert not Group.objects.filter(name="eng").exists()
    group = group_create(workspace=alice.workspace, name="eng", members=[alice.user])
    with pytest.raises(NotWorkspaceMember):
        group_members_set(group=group, members=[outsider.user])
    assert list(group.members.all()) == [alice.user]
    group_update(group=group, name="engineering", archived=True)
    group.refresh_from_db()
    assert (group.name, group.archived) == ("engineering", True)


@pytest.mark.django_db
def test_group_delete_drops_its_grants(owner, alice):
    namespace = namespace_create(actor=owner.actor, slug="eng")
    group = group_create(workspace=owner.workspace, name="eng", members=[alice.user])
    NamespaceACL.objects.create(namespace=namespace, group=group, permission=Permission.WRITE)
    group_delete(group=group)
    assert not Group.objects.filter(pk=group.pk).exists()
    assert not NamespaceACL.objects.filter(namespace=namespace, group_id__isnull=False).exists()
    assert NamespaceACL.objects.filter(namespace=namespace, user=owner.user).exists()


# --- admin -----------------------------------------------------------------------------------


@pytest.fixture
def superuser_client(db: Any) -> Client:
    client = Client()
    client.force_login(user_ensure(username="root", password="pw", is_staff=True, is_superuser=True))
    return client


def messages_of(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.mark.django_db
def test_admin_change_refuses_demoting_the_last_owner(superuser_client, owner):
    membership = Membership.objects.get(workspace=owner.workspace, user=owner.user)
    url = reverse("admin:workspaces_membership_change", args=[membership.pk])
    response = superuser_client.post(url, {"role": "member"})
    assert response.status_code == 302
    assert any("last owner" in m for m in messages_of(response))
    assert role_of(owner.workspace, owner.user) == Role.OWNER


@pytest.mark.django_db
def test_admin_add_goes_through_the_service(superuser_client, owner):
    user = user_ensure(username="newbie")
    url = reverse("admin:workspaces_membership_add")
    response = superuser_client.post(url, {"workspace": owner.workspace.pk, "user": user.pk, "role": "admin"})
    assert response.status_code == 302, response.content[:2000]
    assert role_of(owner.workspace, user) == Role.ADMIN


@pytest.mark.django_db
def test_admin_delete_refuses_the_last_owner(superuser_client, owner, alice):
    membership = Membership.objects.get(workspace=owner.workspace, user=owner.user)
    url = reverse("admin:workspaces_membership_delete", args=[membership.pk])
    response = superuser_client.post(url, {"post": "yes"})
    assert response.status_code == 302
    assert any("last owner" in m for m in messages_of(response))
    assert Membership.objects.filter(pk=membership.pk).exists()


@pytest.mark.django_db
def test_admin_bulk_delete_removes_others_and_keeps_the_last_owner(superuser_client, owner, alice, bob):
    ids = list(Membership.objects.filter(workspace=owner.workspace).values_list("pk", flat=True))
    url = reverse("admin:workspaces_membership_changelist")
    response = superuser_client.post(url, {"action": "delete_selected", "_selected_action": ids, "post": "yes"})
    assert response.status_code == 302
    shown = messages_of(response)
    assert any("last owner" in m for m in shown)
    assert "Removed 2 memberships." in shown
    assert not any("Successfully deleted" in m for m in shown)  # Django's count includes the refused one
    assert list(Membership.objects.filter(workspace=owner.workspace).values_list("user_id", flat=True)) == [
        owner.user.pk
    ]


@pytest.mark.django_db
def test_admin_bulk_delete_of_only_the_last_owner_claims_no_removal(superuser_client, owner):
    ids = list(Membership.objects.filter(workspace=owner.workspace).values_list("pk", flat=True))
    url = reverse("admin:workspaces_membership_changelist")
    response = superuser_client.post(url, {"action": "delete_selected", "_selected_action": ids, "post": "yes"})
    shown = messages_of(response)
    assert any("last owner" in m for m in shown)
    assert not any("Removed" in m or "Successfully deleted" in m for m in shown)
    assert Membership.objects.filter(workspace=owner.workspace).count() == 1


@pytest.mark.django_db
def test_admin_group_save_validates_members(superuser_client, alice, make_member, other_workspace):
    outsider = make_member("member", workspace_=other_workspace)
    url = reverse("admin:workspaces_group_add")
    data = {"workspace": alice.workspace.pk, "name": "eng", "members": [alice.user.pk, outsider.user.pk]}
    response = superuser_client.post(url, data)
    assert response.status_code == 302
    assert any("Not members" in m for m in messages_of(response))
    assert not Group.objects.filter(name="eng").exists()
    data["members"] = [alice.user.pk]
    response = superuser_client.post(url, data)
    assert response.status_code == 302
    assert list(Group.objects.get(name="eng").members.all()) == [alice.user]


# --- concurrency (PostgreSQL) ----------------------------------------------------------------


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_concurrent_demotions_of_the_two_owners_leave_one_owner():
    workspace = workspace_ensure(slug="race")
    users = [user_ensure(username=f"owner{n}") for n in range(2)]
    for user in users:
        membership_set(workspace=workspace, user=user, role=Role.OWNER)
    barrier = threading.Barrier(2)
    results: list[str] = []

    def demote(user: Any) -> None:
        try:
            barrier.wait()
            membership_set(workspace=workspace, user=user, role=Role.MEMBER)
            results.append("ok")
        except DomainError as exc:
            results.append(exc.code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=demote, args=(user,)) for user in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == ["last_workspace_owner", "ok"]
    assert Membership.objects.filter(workspace=workspace, role=Role.OWNER).count() == 1
