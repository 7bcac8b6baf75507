"""A source namespace worth moving, and CLI environments for its admin and for a member."""

from __future__ import annotations

from typing import Any

import pytest

from knowledge.services import document_create, document_set_archived
from tests.transfer.helpers import cli_env
from workspaces.services import namespace_acl_replace, namespace_create

SOURCE = "team-docs"


@pytest.fixture
def admin(make_member):
    return make_member("admin", username="ada")


@pytest.fixture
def admin_env(live_server, admin, tmp_path):
    return cli_env(live_server.url, admin.token, tmp_path / "cfg-admin")


@pytest.fixture
def member_env(live_server, alice, tmp_path):
    return cli_env(live_server.url, alice.token, tmp_path / "cfg-alice")


@pytest.fixture
def source(admin, bob) -> dict[str, Any]:
    """Links by path and by id, drafts, a private document of another author, collisions, CRLF."""
    ns = namespace_create(actor=admin.actor, slug=SOURCE, display_name="Team docs", description="Runbooks")
    docs: dict[str, Any] = {}

    def add(path: str, content: str, **fields: Any) -> Any:
        docs[path] = document_create(actor=admin.actor, namespace=ns, path=path, content=content, **fields)
        return docs[path]

    guide_link = "[the guide](agor://kb/team-docs/guides/getting-started.md#install)"
    decision = add("decisions/adr-1.md", f"# ADR 1\n\nWe chose {guide_link}.\n", kind="decision")
    add(
        "guides/getting-started.md",
        "---\ntags: [onboarding]\n---\n# Getting started\r\n\r\nSee [ADR](agor://kb/document/"
        + str(decision.pk)
        + ") and [missing](agor://kb/team-docs/nope.md).\r\n\r\n```md\n[code](agor://kb/team-docs/decisions/adr-1.md)\n```\r\n",
        kind="guide",
        icon="🚀",
    )
    add("index", "# Home\n\n[start](</ui/kb/team-docs/guides/getting-started.md>) [ext](https://example.com)\n")
    add("Guide.md", "# Upper\n")
    add("guide.md", "# Lower\n\n[café](agor://kb/team-docs/notes/caf%C3%A9.md)\n")
    add("notes/café.md", "\ufeffBOM and Unicode ☕\n", status="draft")
    add(".hidden/secret.md", "hidden component\n")
    add("private.md", "# Private\n", visibility="private")
    namespace_acl_replace(
        actor=admin.actor,
        namespace=ns,
        entries=[
            {"subject_type": "user", "subject": "ada", "permission": "own"},
            {"subject_type": "user", "subject": "bob", "permission": "write"},
        ],
    )
    docs["bob/draft.md"] = document_create(
        actor=bob.actor,
        namespace=ns,
        path="bob/draft.md",
        content="# Bob's draft\n",
        visibility="private",
        status="draft",
    )
    namespace_create(actor=bob.actor, slug="bobs")
    gone = add("archived.md", "# Gone\n")
    document_set_archived(actor=admin.actor, document_id=gone.pk, archived=True)
    docs.pop("archived.md")
    return {"namespace": ns, "docs": docs}
