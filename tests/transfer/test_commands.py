"""manage.py kb_export / kb_import / kb_validate run the same engines against this deployment."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from knowledge.models import Document
from tests.transfer.conftest import SOURCE
from workspaces.models import ApiToken

pytestmark = pytest.mark.django_db(transaction=True)


def run(*args: str) -> tuple[int, dict, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(*args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, json.loads(out.getvalue()), err.getvalue()


def test_export_validate_import_through_management_commands(source, admin, alice, tmp_path):
    out = tmp_path / "out"
    code, summary, err = run(
        "kb_export", "--namespace", SOURCE, "--output", str(out), "--workspace", "acme", "--user", "ada"
    )
    assert code == 0, err
    assert summary["documents"] == 9 and "Repository complete" in err
    code, result, _ = run("kb_validate", str(out))
    assert code == 0 and result["valid"] is True and result["documents"] == 9
    code, plan, _ = run("kb_import", str(out), "--namespace", "cmd-copy", "--workspace", "acme", "--user", "alice")
    assert code == 0 and plan["dryRun"] is True and not Document.objects.filter(namespace__slug="cmd-copy").exists()
    code, done, err = run(
        "kb_import", str(out), "--namespace", "cmd-copy", "--apply", "--workspace", "acme", "--user", "alice"
    )
    assert code == 0, err
    assert done["created"] == 9
    assert Document.objects.filter(namespace__slug="cmd-copy", created_by=alice.user).count() == 9
    # The short-lived tokens are revoked again.
    assert not ApiToken.objects.filter(name__contains="management command", revoked_at__isnull=True).exists()


def test_members_cannot_export_through_the_command_either(source, alice, tmp_path):
    code, summary, err = run(
        "kb_export", "--namespace", SOURCE, "--output", str(tmp_path / "o"), "--workspace", "acme", "--user", "alice"
    )
    assert code == 1 and summary["ok"] is False and "HTTP 404" in err


def test_unknown_members_are_refused(db, tmp_path):
    with pytest.raises(CommandError):
        call_command(
            "kb_export", "--namespace", "x", "--output", str(tmp_path / "o"), "--workspace", "no", "--user", "x"
        )
