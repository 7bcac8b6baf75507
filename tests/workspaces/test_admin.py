"""Admin for namespace owners: who sees which namespace, saves through services, tokens."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from knowledge.services import document_create
from workspaces.models import ApiToken, Group, Namespace, NamespaceACL
from workspaces.services import namespace_acl_replace, namespace_create, token_issue, user_ensure
from workspaces.tokens import token_digest

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:workspaces_namespace_changelist"


def staff(member: Any) -> Any:
    member.user.is_staff = True
    member.user.save()
    return member


def login(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def change_url(obj: Any) -> str:
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])


def listed(client: Client, url_name: str = CHANGELIST) -> set[str]:
    response = client.get(reverse(url_name))
    assert response.status_code == 200
    return {str(obj) for obj in response.context["cl"].result_list}


def message_texts(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def changeform_data(response: Any) -> dict[str, Any]:
    """The POST body the rendered change form would submit, unchanged."""
    data: dict[str, Any] = {}

    def add(form: Any) -> None:
        for name in form.fields:
            value = form[name].value()
            if value is None or value is False:
                continue
            data[form.add_prefix(name)] = "on" if value is True else value

    add(response.context["adminform"].form)
    for inline in response.context["inline_admin_formsets"]:
        add(inline.formset.management_form)
        for form in inline.formset.forms:
            add(form)
    return data


def acl_rows(namespace: Namespace) -> set[tuple[Any, Any, str]]:
    return set(NamespaceACL.objects.filter(namespace=namespace).values_list("user_id", "group_id", "permission"))


def acl_form_index(data: dict[str, Any], user: Any) -> int:
    for key, value in data.items():
        if key.startswith("acl-") and key.endswith("-user") and str(value) == str(user.pk):
            return int(key.split("-")[1])
    raise AssertionError(f"no ACL row for {user}")


@pytest.fixture
def superuser(db: Any) -> Any:
    return user_ensure(username="root", password="pw-for-tests", is_staff=True, is_superuser=True)


@pytest.fixture
def spaces(alice, bob) -> dict[str, Namespace]:
    staff(alice)
    return {
        "alice": namespace_create(actor=alice.actor, slug="alice-ns"),
        "bob": namespace_create(actor=bob.actor, slug="bob-ns"),
    }


# --- visibility -------------------------------------------------------------------------------


def test_superuser_sees_every_namespace(superuser, spaces, other_workspace, make_member):
    rival = make_member("member", workspace_=other_workspace)
    namespace_create(actor=rival.actor, slug="rival-ns")
    assert listed(login(superuser)) == {"alice-ns", "bob-ns", "rival-ns"}


def test_staff_owner_sees_only_own_namespaces(alice, spaces):
    client = login(alice.user)
    assert listed(client) == {"alice-ns"}
    assert client.get(change_url(spaces["alice"])).status_code == 200
    assert client.get(change_url(spaces["bob"])).status_code in (403, 404)
    assert b"bob-ns" not in client.get(reverse(CHANGELIST)).content


def test_staff_sees_namespace_through_own_grant(alice, bob, spaces):
    entries = [
        {"subject_type": "user", "subject": "bob", "permission": "own"},
        {"subject_type": "user", "subject": "alice", "permission": "own"},
    ]
    namespace_acl_replace(actor=bob.actor, namespace=spaces["bob"], entries=entries)
    client = login(alice.user)
    assert listed(client) == {"alice-ns", "bob-ns"}
    assert client.get(change_url(spaces["bob"])).status_code == 200


def test_staff_sees_namespace_through_group_own_grant(alice, bob, spaces, workspace):
    group = Group.objects.create(workspace=workspace, name="editors")
    group.members.add(alice.user)
    entries = [
        {"subject_type": "user", "subject": "bob", "permission": "own"},
        {"subject_type": "group", "subject": "editors", "permission": "own"},
    ]
    namespace_acl_replace(actor=bob.actor, namespace=spaces["bob"], entries=entries)
    assert listed(login(alice.user)) == {"alice-ns", "bob-ns"}


def test_write_grant_is_not_enough(alice, bob, spaces):
    entries = [
        {"subject_type": "user", "subject": "bob", "permission": "own"},
        {"subject_type": "user", "subject": "alice", "permission": "write"},
    ]
    namespace_acl_replace(actor=bob.actor, namespace=spaces["bob"], entries=entries)
    assert listed(login(alice.user)) == {"alice-ns"}


def test_workspace_admin_sees_all_namespaces_of_workspace(make_member, spaces):
    admin_member = staff(make_member("admin", username="ada"))
    assert listed(login(admin_member.user)) == {"alice-ns", "bob-ns"}


def test_staff_without_namespaces_is_refused(make_member, spaces):
    carol = staff(make_member("member", username="carol"))
    client = login(carol.user)
    assert client.get(reverse(CHANGELIST)).status_code == 403
    assert client.get(change_url(spaces["bob"])).status_code in (403, 404)


def test_staff_cannot_reach_workspace_level_models(alice, spaces, workspace):
    client = login(alice.user)
    assert client.get(reverse("admin:workspaces_workspace_changelist")).status_code == 403
    assert client.get(reverse("admin:workspaces_membership_changelist")).status_code == 403
    assert client.get(reverse("admin:workspaces_group_changelist")).status_code == 403
    assert client.get(change_url(workspace)).status_code == 403
    index = client.get(reverse("admin:index")).content.decode()
    assert "Namespaces" in index
    assert "Memberships" not in index


# --- editing --------------------------------------------------------------------------------


def test_owner_edits_fields_and_slug_stays(alice, spaces):
    namespace = spaces["alice"]
    client = login(alice.user)
    data = changeform_data(client.get(change_url(namespace)))
    data.update(display_name="Alice's notes", others_can="read", slug="renamed")
    response = client.post(change_url(namespace), data)
    assert response.status_code == 302, response.content
    namespace.refresh_from_db()
    assert (namespace.display_name, namespace.others_can, namespace.slug) == ("Alice's notes", "read", "alice-ns")


def test_owner_adds_acl_grant_through_service(alice, bob, spaces):
    namespace = spaces["alice"]
    client = login(alice.user)
    data = changeform_data(client.get(change_url(namespace)))
    extra = int(data["acl-INITIAL_FORMS"])
    data.update({f"acl-{extra}-user": bob.user.pk, f"acl-{extra}-permission": "read"})
    response = client.post(change_url(namespace), data)
    assert response.status_code == 302, response.content
    assert acl_rows(namespace) == {(alice.user.pk, None, "own"), (bob.user.pk, None, "read")}


def test_acl_change_removing_own_last_own_is_refused(alice, bob, spaces):
    namespace = spaces["bob"]
    entries = [
        {"subject_type": "user", "subject": "bob", "permission": "own"},
        {"subject_type": "user", "subject": "alice", "permission": "own"},
    ]
    namespace_acl_replace(actor=bob.actor, namespace=namespace, entries=entries)
    before = acl_rows(namespace)
    client = login(alice.user)
    data = changeform_data(client.get(change_url(namespace)))
    index = acl_form_index(data, alice.user)

    data[f"acl-{index}-permission"] = "write"
    response = client.post(change_url(namespace), data)
    assert response.status_code == 200
    assert "last owner access" in response.content.decode()
    assert acl_rows(namespace) == before

    data[f"acl-{index}-permission"] = "own"
    data[f"acl-{index}-DELETE"] = "on"
    response = client.post(change_url(namespace), data)
    assert response.status_code == 200
    assert "last owner access" in response.content.decode()
    assert acl_rows(namespace) == before


def test_staff_creates_namespace_through_service(alice, workspace):
    client = login(staff(alice).user)
    data = {
        "workspace": workspace.pk,
        "slug": "fresh",
        "display_name": "",
        "description": "",
        "kind": "team",
        "visibility_default": "public",
        "others_can": "none",
        "metadata": "{}",
    }
    response = client.post(reverse("admin:workspaces_namespace_add"), data)
    assert response.status_code == 302, response.content
    namespace = Namespace.objects.get(slug="fresh")
    assert (namespace.owner, namespace.display_name, namespace.kind) == (alice.user, "fresh", "team")
    assert acl_rows(namespace) == {(alice.user.pk, None, "own")}


def test_namespace_delete_is_not_offered(alice, spaces):
    client = login(alice.user)
    response = client.get(reverse(CHANGELIST))
    assert "delete_selected" not in response.content.decode()
    assert client.get(reverse("admin:workspaces_namespace_delete", args=[spaces["alice"].pk])).status_code == 403
    assert Namespace.objects.filter(pk=spaces["alice"].pk).exists()


# --- archive and restore ----------------------------------------------------------------------


def test_archive_and_restore_actions(alice, spaces):
    namespace = spaces["alice"]
    document = document_create(actor=alice.actor, namespace=namespace, path="a.md", content="# A\n")
    client = login(alice.user)
    body = {"action": "archive_namespaces", "_selected_action": [namespace.pk]}

    response = client.post(reverse(CHANGELIST), body)
    assert response.status_code == 302
    namespace.refresh_from_db()
    document.refresh_from_db()
    assert namespace.archived and document.archived and document.archived_with_namespace

    assert listed(client) == {"alice-ns"}  # archived namespaces stay visible to their owner
    page = client.get(change_url(namespace)).content.decode()
    assert 'name="_save"' not in page  # archived: view only until restored

    response = client.post(reverse(CHANGELIST), {**body, "action": "restore_namespaces"})
    assert response.status_code == 302
    namespace.refresh_from_db()
    document.refresh_from_db()
    assert not namespace.archived and not document.archived


def test_archive_action_reports_errors_for_superuser_outside_workspace(superuser, spaces):
    client = login(superuser)
    namespace = spaces["bob"]
    response = client.post(reverse(CHANGELIST), {"action": "archive_namespaces", "_selected_action": [namespace.pk]})
    assert response.status_code == 302
    assert any("not a member" in text for text in message_texts(response))
    namespace.refresh_from_db()
    assert not namespace.archived


# --- tokens -------------------------------------------------------------------------------------


def test_token_digest_never_shown(superuser, alice):
    token = ApiToken.objects.get(user=alice.user)
    client = login(superuser)
    for url in (reverse("admin:workspaces_apitoken_changelist"), change_url(token)):
        response = client.get(url)
        assert response.status_code == 200
        assert token.prefix in response.content.decode()
        assert token.digest not in response.content.decode()
        assert alice.token not in response.content.decode()


def test_staff_sees_only_own_tokens(alice, bob, spaces):
    client = login(alice.user)
    assert listed(client, "admin:workspaces_apitoken_changelist") == {
        str(t) for t in ApiToken.objects.filter(user=alice.user)
    }
    bob_token = ApiToken.objects.get(user=bob.user)
    assert client.get(change_url(bob_token)).status_code in (403, 404)


def test_revoke_action_revokes(superuser, alice, workspace):
    token, _ = token_issue(user=alice.user, workspace=workspace)
    client = login(superuser)
    response = client.post(
        reverse("admin:workspaces_apitoken_changelist"), {"action": "revoke_tokens", "_selected_action": [token.pk]}
    )
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_staff_revokes_only_own_tokens(alice, bob, spaces):
    bob_token = ApiToken.objects.get(user=bob.user)
    client = login(alice.user)
    url = reverse("admin:workspaces_apitoken_changelist")
    client.post(url, {"action": "revoke_tokens", "_selected_action": [bob_token.pk]})
    bob_token.refresh_from_db()
    assert bob_token.revoked_at is None


def test_token_add_issues_and_shows_raw_once(superuser, alice, workspace):
    client = login(superuser)
    before = set(ApiToken.objects.values_list("pk", flat=True))
    response = client.post(
        reverse("admin:workspaces_apitoken_add"),
        {"user": alice.user.pk, "workspace": workspace.pk, "name": "ci"},
        follow=True,
    )
    assert response.status_code == 200
    (token,) = ApiToken.objects.exclude(pk__in=before)
    (raw,) = [word for text in message_texts(response) for word in text.split() if word.startswith("kb_")]
    assert token.digest == token_digest(raw) and token.name == "ci"
    assert token.digest not in response.content.decode()
    assert raw not in client.get(reverse("admin:workspaces_apitoken_changelist")).content.decode()


def test_token_add_refuses_non_member(superuser, workspace):
    outsider = user_ensure(username="outsider")
    client = login(superuser)
    response = client.post(reverse("admin:workspaces_apitoken_add"), {"user": outsider.pk, "workspace": workspace.pk})
    assert response.status_code == 200
    assert "is not a member" in response.content.decode()
    assert not ApiToken.objects.filter(user=outsider).exists()


def test_service_error_on_save_is_a_message_and_rolls_back(alice, bob, spaces, monkeypatch):
    from config.exceptions import PermissionDenied
    from workspaces import admin as workspaces_admin

    def refuse(**kwargs: Any) -> None:
        raise PermissionDenied("Refused by the service.", code="last_owner_access")

    monkeypatch.setattr(workspaces_admin, "namespace_acl_replace", refuse)
    namespace = spaces["alice"]
    client = login(alice.user)
    data = changeform_data(client.get(change_url(namespace)))
    extra = int(data["acl-INITIAL_FORMS"])
    data.update({"display_name": "Changed", f"acl-{extra}-user": bob.user.pk, f"acl-{extra}-permission": "read"})
    response = client.post(change_url(namespace), data)
    assert response.status_code == 302
    assert "Refused by the service." in message_texts(response)
    namespace.refresh_from_db()
    assert namespace.display_name == "alice-ns"  # the field change was rolled back with the ACL
    assert acl_rows(namespace) == {(alice.user.pk, None, "own")}


def test_superuser_outside_workspace_views_read_only(superuser, spaces):
    response = login(superuser).get(change_url(spaces["bob"]))
    assert response.status_code == 200
    assert 'name="_save"' not in response.content.decode()


def test_superuser_pages_render(superuser, spaces, workspace, alice):
    from django.contrib.auth import get_user_model

    client = login(superuser)
    for model in ("workspace", "membership", "group", "apitoken", "namespace"):
        assert client.get(reverse(f"admin:workspaces_{model}_changelist")).status_code == 200, model
    for model in ("workspace", "membership", "group", "apitoken"):
        assert client.get(reverse(f"admin:workspaces_{model}_add")).status_code == 200, model
    newcomer = get_user_model().objects.create(username="newcomer")
    response = client.post(
        reverse("admin:workspaces_membership_add"), {"workspace": workspace.pk, "user": newcomer.pk, "role": "admin"}
    )
    assert response.status_code == 302
    assert newcomer.memberships.get(workspace=workspace).role == "admin"
