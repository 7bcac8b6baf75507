"""Token issuing: only members get a token, and the raw value authenticates only its workspace."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from config.exceptions import Invalid
from workspaces.authentication import LAST_USED_RESOLUTION, token_lookup
from workspaces.models import ApiToken
from workspaces.services import membership_remove, membership_set, token_issue, token_revoke, user_ensure
from workspaces.tokens import token_digest


@pytest.mark.django_db
def test_a_token_is_refused_to_someone_outside_the_workspace(workspace: Any, other_workspace: Any) -> None:
    outsider = user_ensure(username="outsider", password="pw-for-tests")
    membership_set(workspace=other_workspace, user=outsider, role="member")
    with pytest.raises(Invalid) as caught:
        token_issue(user=outsider, workspace=workspace)
    assert caught.value.extra["field"] == "user"
    assert not ApiToken.objects.filter(user=outsider, workspace=workspace).exists()


def test_a_member_token_is_stored_hashed_and_works_until_revoked(make_member: Any, http: Any) -> None:
    member = make_member("member")
    stored = ApiToken.objects.get(digest=token_digest(member.token))
    assert member.token not in (stored.digest, stored.prefix)
    headers = {"Authorization": f"Bearer {member.token}"}
    assert http.get("/kb/namespaces", headers=headers).status_code == 200
    token_revoke(token=stored)
    assert http.get("/kb/namespaces", headers=headers).status_code == 401


def test_a_token_acts_with_its_users_current_role_and_stops_with_the_membership(
    make_member: Any, http: Any, workspace: Any
) -> None:
    """The role is read with the token on every request: a promotion counts at once, and a
    removed member's token no longer reaches the workspace."""
    owner = make_member("owner")
    member = make_member("member")
    assert http.as_(owner).post("/kb/namespaces", json={"slug": "locked"}).status_code == 201

    def visible() -> list[str]:
        response = http.as_(member).get("/kb/namespaces")
        assert response.status_code == 200, response.text
        return [namespace["slug"] for namespace in response.json()["data"]]

    assert "locked" not in visible()
    membership_set(workspace=workspace, user=member.user, role="admin")
    assert "locked" in visible()  # workspace admins hold `own` everywhere
    membership_remove(workspace=workspace, user=member.user)
    assert http.as_(member).get("/kb/namespaces").status_code == 403
    assert ApiToken.objects.get(digest=token_digest(member.token)).revoked_at is None


def test_a_deactivated_users_token_is_refused(make_member: Any, http: Any) -> None:
    member = make_member("member")
    headers = {"Authorization": f"Bearer {member.token}"}
    assert http.get("/kb/namespaces", headers=headers).status_code == 200
    member.user.is_active = False
    member.user.save(update_fields=["is_active"])
    response = http.get("/kb/namespaces", headers=headers)
    assert response.status_code == 401 and response.json()["code"] == "authentication_failed"


def test_a_tokens_last_use_is_recorded_at_most_once_per_resolution(make_member: Any, http: Any) -> None:
    member = make_member("member")
    headers = {"Authorization": f"Bearer {member.token}"}
    stored = ApiToken.objects.filter(digest=token_digest(member.token))
    assert stored.get().last_used_at is None
    assert http.get("/kb/namespaces", headers=headers).status_code == 200
    first = stored.get().last_used_at
    assert first is not None
    assert http.get("/kb/namespaces", headers=headers).status_code == 200
    assert stored.get().last_used_at == first  # within the resolution: no write per request
    stored.update(last_used_at=first - LAST_USED_RESOLUTION - timedelta(seconds=1))
    assert http.get("/kb/namespaces", headers=headers).status_code == 200
    assert stored.get().last_used_at > first


@pytest.mark.django_db
def test_the_token_lookup_loads_what_requests_use_and_the_rest_on_demand(make_member: Any) -> None:
    member = make_member("admin")
    token, stale = token_lookup(member.token)
    assert stale is True  # never used
    assert (token.user.pk, token.user.username, token.user.is_active) == (member.user.pk, member.user.username, True)
    assert (token.workspace.pk, token.workspace.slug) == (member.workspace.pk, member.workspace.slug)
    assert token.member_role == "admin" and token.user_id == member.user.pk
    assert token.user.email == member.user.email  # not loaded with the token: read on first access
    assert token.workspace.created_at == member.workspace.created_at
    assert token_lookup(member.token + "x") is None
    token_revoke(token=token)
    assert token_lookup(member.token) is None
