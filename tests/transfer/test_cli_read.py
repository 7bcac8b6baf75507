"""`agor login|logout|whoami|--version` and the read-only `agor kb` commands against a live server."""

from __future__ import annotations

import json
import stat

import pytest

from knowledge.services import document_create, document_set_archived
from tests.transfer.helpers import agor, agor_pty, cli_env
from workspaces.services import namespace_create

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE = "Evil \x1b]52;c;cGF5bG9hZA==\x07 \x1b[2J\r[OK] \u202egpj.md"


@pytest.fixture
def env(live_server, alice, tmp_path):
    return cli_env(live_server.url, alice.token, tmp_path / "cfg")


@pytest.fixture
def corpus(alice, bob):
    eng = namespace_create(actor=alice.actor, slug="eng", display_name="Engineering", others_can="read")
    namespace_create(actor=alice.actor, slug="zeta")
    namespace_create(actor=bob.actor, slug="bobs-private")
    docs = {}
    for path, content, extra in [
        ("b/setup.md", "# Setup\r\n\r\nCRLF body é\n", {}),
        ("a/intro", "# Intro\n", {}),
        ("draft.md", "# Draft\n", {"status": "draft"}),
        ("hostile.md", "# Hostile\n", {"title": HOSTILE}),
    ]:
        docs[path] = document_create(actor=alice.actor, namespace=eng, path=path, content=content, **extra)
    gone = document_create(actor=alice.actor, namespace=eng, path="old.md", content="# Old\n")
    document_set_archived(actor=alice.actor, document_id=gone.pk, archived=True)
    return docs


def test_version_matches_health(http, env):
    run = agor("--version", env=env)
    assert run.code == 0 and run.stderr == ""
    server = http.get("/health").json()["version"]
    assert run.stdout.strip() == f"agor {server}"


def test_login_stores_private_credentials_then_whoami_and_logout(live_server, alice, tmp_path):
    cfg = tmp_path / "cfg"
    bare = cli_env(config_dir=cfg)
    bad = agor("login", "--url", live_server.url, "--token", "kb_wrong", env=bare)
    assert bad.code == 1 and "Not authenticated" in bad.stderr and bad.stdout == ""
    assert not (cfg / "credentials.json").exists()

    run = agor("login", "--url", live_server.url + "/", env=bare, input=alice.token + "\n")
    assert run.code == 0, run.stderr
    assert "as alice (member) in workspace acme" in run.stdout
    stored = cfg / "credentials.json"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert json.loads(stored.read_text()) == {"url": live_server.url, "token": alice.token}
    assert alice.token not in run.stdout + run.stderr

    who = agor("whoami", "--json", env=bare)
    assert who.code == 0, who.stderr
    assert who.json["user"] == "alice" and who.json["workspace"] == "acme" and who.json["role"] == "member"
    assert who.json["server_version"] == who.json["client_version"]

    out = agor("logout", env=bare)
    assert out.code == 0 and not stored.exists()
    after = agor("whoami", env=bare)
    assert after.code == 1 and "Not logged in" in after.stderr and after.stdout == ""


def test_environment_overrides_the_file(live_server, alice, bob, tmp_path):
    cfg = tmp_path / "cfg"
    assert agor("login", "--url", live_server.url, "--token", alice.token, env=cli_env(config_dir=cfg)).code == 0
    who = agor("whoami", "--json", env=cli_env(token=bob.token, config_dir=cfg))
    assert who.json["user"] == "bob" and who.json["credentials"] == "environment"


def test_namespace_list_and_show(env, corpus):
    listed = agor("kb", "namespace", "list", "--json", env=env)
    assert listed.code == 0 and listed.stderr == ""
    assert listed.json["total"] == 2 and listed.json["limit"] == 50 and listed.json["offset"] == 0
    assert [ns["slug"] for ns in listed.json["data"]] == ["eng", "zeta"]

    table = agor("kb", "namespace", "list", env=env)
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["SLUG", "PERMISSION", "KIND", "DISPLAY", "NAME"]
    assert lines[1].startswith("eng") and "Engineering" in lines[1]
    assert lines[-1] == "2 of 2 accessible active entries (rows 1-2)"

    second = agor("kb", "namespace", "list", "--limit", "1", "--offset", "1", env=env)
    assert second.stdout.splitlines()[-1] == "1 of 2 accessible active entries (rows 2-2)"
    past = agor("kb", "namespace", "list", "--offset", "5", "--json", env=env)
    assert past.json == {"total": 2, "limit": 50, "offset": 5, "data": []}
    empty = agor("kb", "namespace", "list", "--offset", "5", env=env)
    assert empty.stdout.strip() == "0 of 2 accessible active entries"

    shown = agor("kb", "namespace", "show", "eng", "--json", env=env)
    assert shown.json["slug"] == "eng" and shown.json["effective_permission"] == "own"
    text = agor("kb", "namespace", "show", "eng", env=env)
    assert "display_name: Engineering" in text.stdout


def test_invisible_namespace_is_reported_like_a_missing_one(env, corpus):
    hidden = agor("kb", "namespace", "show", "bobs-private", env=env)
    missing = agor("kb", "namespace", "show", "nope", env=env)
    assert hidden.code == missing.code == 1
    assert hidden.stderr == missing.stderr and "not found" in hidden.stderr
    assert hidden.stdout == missing.stdout == ""
    docs = agor("kb", "document", "list", "--namespace", "bobs-private", env=env)
    assert docs.code == 1 and "not found" in docs.stderr


def test_document_list_filters_pages_and_footer(env, corpus):
    listed = agor("kb", "document", "list", "--namespace", "eng", "--json", env=env)
    assert listed.code == 0
    assert [d["path"] for d in listed.json["data"]] == ["a/intro", "b/setup.md", "draft.md", "hostile.md"]
    assert "content" not in listed.json["data"][0]
    drafts = agor("kb", "document", "list", "--namespace", "eng", "--status", "draft", "--json", env=env)
    assert [d["path"] for d in drafts.json["data"]] == ["draft.md"]
    archived = agor("kb", "document", "list", "--namespace", "eng", "--archive", "archived", env=env)
    assert archived.stdout.splitlines()[-1] == "1 of 1 accessible archived entries (rows 1-1)"
    every = agor("kb", "document", "list", "--namespace", "eng", "--archive", "all", "--json", env=env)
    assert every.json["total"] == 5

    page = agor("kb", "document", "list", "--namespace", "eng", "--limit", "2", "--offset", "2", env=env)
    lines = page.stdout.splitlines()
    assert lines[1].startswith("draft.md") and lines[-1] == "2 of 4 accessible active entries (rows 3-4)"
    past = agor("kb", "document", "list", "--namespace", "eng", "--offset", "40", env=env)
    assert past.code == 0 and past.stdout.strip() == "0 of 4 accessible active entries"
    # Redirected output is escaped as well: the hostile title cannot reach the terminal raw.
    table = agor("kb", "document", "list", "--namespace", "eng", env=env)
    assert "\x1b" not in table.stdout and "\r" not in table.stdout and "\u202e" not in table.stdout
    assert "\\x1b]52;c;" in table.stdout and "\\u202e" in table.stdout


def test_document_list_defaults_to_fifty_rows(env, alice):
    namespace = namespace_create(actor=alice.actor, slug="many")
    for index in range(53):
        document_create(actor=alice.actor, namespace=namespace, path=f"doc-{index:03d}.md", content="x")
    run = agor("kb", "document", "list", "--namespace", "many", env=env)
    lines = run.stdout.splitlines()
    assert len(lines) == 52 and lines[-1] == "50 of 53 accessible active entries (rows 1-50)"
    full = agor("kb", "document", "list", "--namespace", "many", "--limit", "300", "--json", env=env)
    assert len(full.json["data"]) == 53


def test_document_get_writes_markdown_byte_for_byte(env, corpus):
    run = agor("kb", "document", "get", "b/setup.md", "--namespace", "eng", env=env)
    assert run.code == 0 and run.stderr == ""
    assert run.raw == "# Setup\r\n\r\nCRLF body é\n".encode()
    data = agor("kb", "document", "get", "b/setup.md", "--namespace", "eng", "--json", env=env).json
    assert data["content"] == "# Setup\r\n\r\nCRLF body é\n"
    assert data["current_version"]["number"] == 1 and data["path"] == "b/setup.md"
    archived = agor("kb", "document", "get", "old.md", "--namespace", "eng", env=env)
    assert archived.code == 0 and archived.stdout == "# Old\n"
    missing = agor("kb", "document", "get", "nope.md", "--namespace", "eng", env=env)
    assert missing.code == 1 and missing.stdout == "" and "Document not found" in missing.stderr


def test_interactive_output_escapes_control_characters(live_server, alice, tmp_path, corpus):
    eng = corpus["hostile.md"].namespace
    document_create(actor=alice.actor, namespace=eng, path="ansi.md", content="line\x1b[31m red\x07\nnext\n")
    env = cli_env(live_server.url, alice.token, tmp_path / "cfg")
    table = agor_pty("kb", "document", "list", "--namespace", "eng", env=env)
    assert table.code == 0
    assert b"\x1b" not in table.raw and b"\x07" not in table.raw
    assert "\\x1b]52;c;" in table.stdout and "\\u202e" in table.stdout
    body = agor_pty("kb", "document", "get", "ansi.md", "--namespace", "eng", env=env)
    assert body.code == 0 and b"\x1b" not in body.raw and "line\\x1b[31m red\\x07" in body.stdout
    # The same command redirected keeps the bytes.
    piped = agor("kb", "document", "get", "ansi.md", "--namespace", "eng", env=env)
    assert piped.raw == b"line\x1b[31m red\x07\nnext\n"
