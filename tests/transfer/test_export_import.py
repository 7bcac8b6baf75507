"""`agor kb export|import|validate` end to end: a live server, the CLI as a subprocess, real git."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from knowledge.models import Document, DocumentVersion
from knowledge.services import document_create, document_revise
from tests.transfer.conftest import SOURCE
from tests.transfer.helpers import agor, agor_pty, tree_bytes
from transfer.models import ImportReceipt, NamespaceImport
from workspaces.models import Namespace

pytestmark = pytest.mark.django_db(transaction=True)


def git(*args: str, cwd: Path) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "GIT_CONFIG_GLOBAL": "/dev/null"}  # fmt: skip
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def export(env, out: Path, *extra: str, slug: str = SOURCE):
    return agor("kb", "export", "--namespace", slug, "--output", str(out), *extra, env=env)


def test_dry_run_plans_without_creating_anything(admin_env, source, tmp_path):
    out = tmp_path / "export"
    run = export(admin_env, out, "--dry-run")
    assert run.code == 0, run.stderr
    assert not out.exists()
    assert run.json == {
        "dryRun": True,
        "documents": 9,
        "unchanged": 0,
        "pending": 9,
        "bytesNeeded": run.json["bytesNeeded"],
        "unknown": 0,
        "ok": True,
    }
    assert "Plan: 9 documents; 0 unchanged; 9 fetch/verify;" in run.stderr
    assert "Planning: source inventory: 0 discovered" in run.stderr


def test_round_trip_through_git_is_byte_identical(admin_env, member_env, source, alice, admin, tmp_path):
    first = tmp_path / "first"
    run = export(admin_env, first)
    assert run.code == 0, run.stderr
    summary = run.json
    assert summary["documents"] == 9 and summary["copied"] == 9 and summary["unresolved"] == 1
    assert "Exporting: 9 / 9" in run.stderr and "Repository complete" in run.stderr
    # Private modes all the way down.
    assert stat.S_IMODE(first.stat().st_mode) == 0o700
    for path in first.rglob("*"):
        if path.is_file():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        else:
            assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    files = tree_bytes(first)
    assert (first / ".gitignore").read_text() == ".agor/\n.agor-lock/\n"
    manifest = files["manifest.yaml"].decode()
    assert "slug: team-docs" in manifest and "- docs/index.md" in manifest
    assert files["docs/notes/café.md"].endswith("\ufeffBOM and Unicode ☕\n".encode())
    guide = files["docs/guides/getting-started.md"].decode()
    assert "See [ADR](../decisions/adr-1.md)" in guide and "\r\n\r\n```md\n[code](agor://kb/team-docs/" in guide
    assert "[missing](agor://kb/team-docs/nope.md)" in guide
    assert "[start](<../docs/index.md>)" not in files["docs/index.md"].decode()
    assert "[start](<guides/getting-started.md>)" in files["docs/index.md"].decode()
    assert {"docs/Guide.md", "docs/guide.md"}.isdisjoint(files)  # both spellings are suffixed
    assert any(name.startswith("docs/_hidden--") for name in files)

    valid = agor("kb", "validate", str(first), env={"PATH": os.environ["PATH"], "PYTHONPATH": admin_env["PYTHONPATH"]})
    assert valid.code == 0, valid.stderr
    assert valid.json["valid"] is True and valid.json["documents"] == 9 and valid.json["unlisted"] == []

    git("init", "-q", cwd=first)
    git("add", "-A", cwd=first)
    git("commit", "-qm", "export", cwd=first)
    clone = tmp_path / "clone"
    git("clone", "-q", str(first), str(clone), cwd=tmp_path)
    assert not (clone / ".agor").exists()

    plan = agor("kb", "import", str(clone), "--namespace", "migrated", env=member_env)
    assert plan.code == 0, plan.stderr
    assert plan.json["dryRun"] is True and plan.json["create"] == 9
    assert not Namespace.objects.filter(slug="migrated").exists()

    applied = agor("kb", "import", str(clone), "--namespace", "migrated", "--apply", env=member_env)
    assert applied.code == 0, applied.stderr
    assert applied.json["created"] == 9 and applied.json["failed"] == 0 and applied.json["references"] >= 4
    ns = Namespace.objects.get(slug="migrated")
    assert ns.owner == alice.user and ns.visibility_default == "private" and ns.others_can == "none"
    imported = Document.objects.filter(namespace=ns)
    assert imported.count() == 9
    assert set(imported.values_list("visibility", "edit_policy").distinct()) == {("private", "owner")}
    assert DocumentVersion.objects.filter(document__namespace=ns).count() == 9
    draft = imported.get(path="notes/café.md")
    assert draft.status == "draft" and draft.created_by == alice.user
    guide_doc = imported.get(path="guides/getting-started.md")
    original = source["docs"]["guides/getting-started.md"]
    assert guide_doc.kind == "guide" and guide_doc.icon == "🚀" and guide_doc.title == original.title
    content = guide_doc.current_version.content
    assert "[ADR](agor://kb/migrated/decisions/adr-1.md)" in content
    assert "[code](agor://kb/team-docs/decisions/adr-1.md)" in content  # code untouched
    assert guide_doc.metadata["knowledge_import"]["provenance"]["created_by"] == "ada"  # inert provenance
    assert ImportReceipt.objects.filter(namespace_import__namespace=ns, reconciled=True).count() == 9

    second = tmp_path / "second"
    again = export(admin_env, second, slug="migrated")
    assert again.code == 0, again.stderr
    first_tree, second_tree = tree_bytes(first, below="docs"), tree_bytes(second, below="docs")
    assert first_tree == second_tree
    assert (
        files["manifest.yaml"].replace(b"slug: team-docs", b"slug: migrated") == (second / "manifest.yaml").read_bytes()
    )


def test_refresh_rewrites_only_what_changed(admin_env, source, admin, tmp_path):
    out = tmp_path / "out"
    assert export(admin_env, out).code == 0
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in (out / "docs").rglob("*.md")}
    unchanged = export(admin_env, out)
    assert unchanged.code == 0, unchanged.stderr
    assert unchanged.json["written"] == 0 and unchanged.json["copied"] == 0 and unchanged.json["unchanged"] == 9
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in (out / "docs").rglob("*.md")} == before
    document_revise(actor=admin.actor, document_id=source["docs"]["index"].pk, content="# Home v2\n")
    document_create(actor=admin.actor, namespace=source["namespace"], path="GUIDE.md", content="# Third\n")
    changed = export(admin_env, out)
    assert changed.code == 0, changed.stderr
    assert changed.json["copied"] == 2 and changed.json["written"] == 3  # index, the new file, the manifest
    assert (out / "docs/index.md").read_text().endswith("# Home v2\n")
    # Established names survive the new collision.
    assert before.keys() <= set((out / "docs").rglob("*.md"))


def test_export_refuses_local_edits_foreign_and_public_directories(admin_env, source, tmp_path):
    out = tmp_path / "out"
    assert export(admin_env, out).code == 0
    (out / "docs/index.md").write_text("edited locally\n")
    refused = export(admin_env, out)
    assert refused.code == 1 and "Local content differs from export baseline" in refused.stderr
    assert (out / "docs/index.md").read_text() == "edited locally\n"
    assert refused.json["ok"] is False

    public = tmp_path / "public"
    public.mkdir(mode=0o755)
    public.chmod(0o755)
    denied = export(admin_env, public)
    assert denied.code == 1 and "must be owned by you and private (mode 0700)" in denied.stderr
    assert list(public.iterdir()) == []

    clone = tmp_path / "clone"
    shutil.copytree(out, clone, ignore=shutil.ignore_patterns(".agor"))
    clone.chmod(0o700)
    again = export(admin_env, clone)
    assert again.code == 1 and "use a new output directory" in again.stderr


def test_member_cannot_export_and_invisible_is_not_found(member_env, source, tmp_path):
    denied = export(member_env, tmp_path / "x")
    assert denied.code == 1 and "HTTP 404" in denied.stderr  # alice cannot even see team-docs
    assert not any((tmp_path / "x").iterdir())


def test_member_sees_403_for_a_visible_namespace(live_server, alice, source, tmp_path, admin):
    from tests.transfer.helpers import cli_env
    from workspaces.services import namespace_update

    namespace_update(actor=admin.actor, namespace=source["namespace"], changes={"others_can": "read"})
    env = cli_env(live_server.url, alice.token, tmp_path / "cfg")
    denied = export(env, tmp_path / "x")
    assert denied.code == 1 and "HTTP 403" in denied.stderr and "export needs a workspace admin" in denied.stderr


def test_import_resume_skips_unchanged_and_reports_conflicts(admin_env, member_env, source, alice, tmp_path):
    out = tmp_path / "out"
    assert export(admin_env, out).code == 0
    first = agor("kb", "import", str(out), "--namespace", "copy", "--apply", env=member_env)
    assert first.code == 0, first.stderr
    again = agor("kb", "import", str(out), "--namespace", "copy", "--apply", env=member_env)
    assert again.code == 1 and "already exists at the destination; re-run with --resume" in again.stderr
    resumed = agor("kb", "import", str(out), "--namespace", "copy", "--apply", "--resume", env=member_env)
    assert resumed.code == 0, resumed.stderr
    assert resumed.json["created"] == 0 and resumed.json["unchanged"] == 9
    assert DocumentVersion.objects.filter(document__namespace__slug="copy").count() == 9

    doc = Document.objects.get(namespace__slug="copy", path="index")
    document_revise(actor=alice.actor, document_id=doc.pk, content="edited in the destination\n")
    conflict = agor("kb", "import", str(out), "--namespace", "copy", "--apply", "--resume", env=member_env)
    assert conflict.code == 1 and conflict.json["conflicts"] == 1 and conflict.json["failed"] == 1
    assert "imported_document_changed" in conflict.stderr
    assert DocumentVersion.objects.filter(document=doc).count() == 2
    assert Document.objects.filter(namespace__slug="copy").count() == 9
    dry = agor("kb", "import", str(out), "--namespace", "copy", "--resume", "--dry-run", env=member_env)
    assert dry.code == 0 and dry.json["conflicts"] == 1

    # A modified bundle is a new import: it needs a new destination namespace.
    (out / "docs/index.md").write_bytes((out / "docs/index.md").read_bytes() + b"\nmore\n")
    modified = agor("kb", "import", str(out), "--namespace", "copy", "--apply", "--resume", env=member_env)
    assert modified.code == 1 and "namespace_exists" in modified.stderr
    assert Document.objects.filter(namespace__slug="copy").count() == 9


def test_unrelated_namespace_is_never_merged(admin_env, member_env, source, alice, tmp_path):
    from workspaces.services import namespace_create

    out = tmp_path / "out"
    assert export(admin_env, out).code == 0
    namespace_create(actor=alice.actor, slug="taken")
    refused = agor("kb", "import", str(out), "--namespace", "taken", "--apply", "--resume", env=member_env)
    assert refused.code == 1 and "HTTP 409 namespace_exists" in refused.stderr
    assert Document.objects.filter(namespace__slug="taken").count() == 0
    assert not NamespaceImport.objects.exists()


def test_progress_is_animated_on_a_terminal_and_plain_when_redirected(admin_env, source, tmp_path):
    redirected = export(admin_env, tmp_path / "a")
    assert "\r" not in redirected.stderr and "Exporting: 0 / 9" in redirected.stderr
    assert json.loads(redirected.stdout)["documents"] == 9  # stdout holds only the JSON summary
    on_tty = agor_pty("kb", "export", "--namespace", SOURCE, "--output", str(tmp_path / "b"), env=admin_env)
    assert on_tty.code == 0
    assert b"\r\x1b[KExporting: " in on_tty.raw
    for doc in ("# Getting started", "BOM and Unicode"):
        assert doc not in redirected.stderr and doc not in on_tty.stdout


def test_refresh_keeps_removed_documents_as_unlisted_files(admin_env, source, admin, tmp_path):
    from knowledge.services import document_set_archived

    out = tmp_path / "out"
    assert export(admin_env, out).code == 0
    document_set_archived(actor=admin.actor, document_id=source["docs"]["private.md"].pk, archived=True)
    refreshed = export(admin_env, out)
    assert refreshed.code == 0, refreshed.stderr
    assert refreshed.json["documents"] == 8 and refreshed.json["retained"] == ["docs/private.md"]
    assert "1 old files retained, not imported" in refreshed.stderr
    valid = agor("kb", "validate", str(out), env=admin_env)
    assert valid.json["documents"] == 8 and valid.json["unlisted"] == ["docs/private.md"]


def test_refresh_refuses_altered_cache_and_another_user(admin_env, source, make_member, live_server, tmp_path):
    from tests.transfer.helpers import cli_env

    out = tmp_path / "out"
    assert export(admin_env, out).code == 0
    other = make_member("admin", username="otto")
    foreign = export(cli_env(live_server.url, other.token, tmp_path / "cfg-otto"), out)
    assert foreign.code == 1 and "belongs to another deployment/user" in foreign.stderr
    cached = sorted((out / ".agor" / "snapshot").iterdir())[0]
    cached.write_bytes(b"tampered")
    altered = export(admin_env, out)
    assert altered.code == 1 and "snapshot cache file was altered" in altered.stderr
    assert cached.read_bytes() == b"tampered"


def test_incomplete_export_resumes_only_against_the_same_source(admin_env, source, admin, tmp_path):
    out = tmp_path / "out"
    killed = agor(
        "kb",
        "export",
        "--namespace",
        SOURCE,
        "--output",
        str(out),
        env={**admin_env, "AGOR_TRANSFER_FAULT": "export:planned"},
    )
    assert killed.code == -9
    (out / ".agor-lock").rmdir()
    plain = export(admin_env, out)
    assert plain.code == 1 and "re-run with --resume" in plain.stderr
    document_create(actor=admin.actor, namespace=source["namespace"], path="new.md", content="# New\n")
    changed = export(admin_env, out, "--resume")
    assert changed.code == 1 and "Source changed since the incomplete export plan" in changed.stderr
    assert not (out / "manifest.yaml").exists()


def test_existing_git_control_files_are_kept_with_a_reminder(admin_env, source, tmp_path):
    out = tmp_path / "out"
    out.mkdir(mode=0o700)
    (out / ".gitignore").write_text("*.tmp\n")
    first = export(admin_env, out)
    assert first.code == 0, first.stderr
    assert (out / ".gitignore").read_text() == "*.tmp\n"
    assert "Kept the existing .gitignore" in first.stderr and "Kept the existing .gitattributes" not in first.stderr
    assert (out / ".gitattributes").read_text() == "docs/**/*.md -text\nmanifest.yaml text eol=lf\n"


def test_an_edited_clone_imports_into_a_new_namespace(admin_env, member_env, source, tmp_path):
    out = tmp_path / "out"
    assert export(admin_env, out).code == 0
    clone = tmp_path / "clone"
    shutil.copytree(out, clone, ignore=shutil.ignore_patterns(".agor"))
    index = clone / "docs/index.md"
    text = re.sub(r"^  title: .*$", "  title: Edited in git", index.read_text(), count=1, flags=re.MULTILINE)
    index.write_text(text + "Added in git.\n")
    run = agor("kb", "import", str(clone), "--namespace", "edited", "--apply", env=member_env)
    assert run.code == 0, run.stderr
    doc = Document.objects.get(namespace__slug="edited", path="index")
    assert doc.title == "Edited in git" and doc.current_version.content.endswith("Added in git.\n")
