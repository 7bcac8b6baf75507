"""Management commands: kb_bootstrap's JSON contract and kb_dev_setup."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from workspaces.models import ApiToken, Membership
from workspaces.tokens import token_digest

pytestmark = pytest.mark.django_db


def _bootstrap(*args: str) -> dict:
    out = StringIO()
    call_command("kb_bootstrap", *args, stdout=out)
    return json.loads(out.getvalue())


def test_bootstrap_prints_the_contract_and_is_idempotent():
    first = _bootstrap("--workspace", "acme", "--user", "carol", "--role", "admin", "--password", "s3cret-pass")
    assert set(first) == {"workspace", "user", "role", "token"}
    assert first["workspace"] == "acme" and first["user"] == "carol" and first["role"] == "admin"
    second = _bootstrap("--workspace", "acme", "--user", "carol", "--role", "member")
    assert second["token"] != first["token"]
    membership = Membership.objects.get(user__username="carol", workspace__slug="acme")
    assert membership.role == "member"
    assert Membership.objects.filter(user__username="carol").count() == 1
    assert ApiToken.objects.filter(digest=token_digest(first["token"])).exists()
    assert membership.user.check_password("s3cret-pass")


def test_bootstrap_rejects_bad_input():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError):
        _bootstrap("--workspace", "Bad Slug", "--user", "x", "--role", "member")
    with pytest.raises(CommandError):
        _bootstrap("--workspace", "ok", "--user", "x", "--role", "emperor")


def test_dev_setup_creates_demo_workspace_admin_and_token(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    out = StringIO()
    call_command("kb_dev_setup", stdout=out)
    call_command("kb_dev_setup", stdout=out)  # second run: nothing duplicated
    text = out.getvalue()
    assert "Admin login   admin /" in text and "API token     kb_" in text
    password = (tmp_path / "admin-password").read_text().strip()
    membership = Membership.objects.get(user__username="admin", workspace__slug="demo")
    assert membership.role == "owner" and membership.user.check_password(password)
    assert membership.user.is_staff and membership.user.is_superuser
    from knowledge.models import Document

    assert Document.objects.filter(namespace__slug="handbook").count() == 1
