"""Reader pages through Django's test client: login, access (404 for invisible), CSP, links,
history and diff, archived pages and restore, search, static files served locally."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.test import Client
from django.urls import reverse

from knowledge import rendering, services
from knowledge.models import Document
from knowledge.rendering import DOCUMENT_LINK_PREFIX, READER_PREFIX
from tests.ui.conftest import make_document, make_namespace
from workspaces.models import OthersCan

pytestmark = pytest.mark.django_db


def client_for(member: Any) -> Client:
    client = Client()
    client.force_login(member.user)
    return client


@pytest.fixture
def eng(alice: Any, bob: Any) -> Any:
    """Namespace `eng` owned by alice; every workspace member may read it."""
    return make_namespace(alice, "eng", display_name="Engineering", others_can=OthersCan.READ)


def test_routes_match_the_renderer_prefixes():
    assert reverse("ui:reader", args=["eng", "a/b.md"]) == READER_PREFIX + "eng/a/b.md"
    doc_id = "0a3c5e7f-1234-4abc-8def-0123456789ab"
    assert reverse("ui:document", args=[doc_id]) == DOCUMENT_LINK_PREFIX + doc_id


def test_pages_redirect_to_login_with_next(client: Client):
    response = client.get("/ui/kb/eng/guides/setup.md")
    assert response.status_code == 302
    assert response["Location"] == "/ui/login?next=/ui/kb/eng/guides/setup.md"
    for url in ("/ui/", "/ui/kb/eng/", "/ui/graph/eng", "/ui/archived/eng", "/ui/kb/search?q=x"):
        assert client.get(url)["Location"].startswith("/ui/login?next=")


def test_login_form_logs_in_and_follows_next(client: Client, alice: Any, eng: Any):
    make_document(alice, eng, "a.md", "# A\n")
    page = client.get("/ui/login?next=/ui/kb/eng/a.md")
    assert page.status_code == 200 and b'name="next" value="/ui/kb/eng/a.md"' in page.content
    response = client.post("/ui/login", {"username": "alice", "password": "pw-for-tests", "next": "/ui/kb/eng/a.md"})
    assert response.status_code == 302 and response["Location"] == "/ui/kb/eng/a.md"
    assert client.get("/ui/kb/eng/a.md").status_code == 200


def test_reader_page_shows_document_metadata_tree_and_rendered_body(alice: Any, eng: Any):
    make_document(
        alice, eng, "guides/setup.md", "# Setup\n\nRun `make`.\n\n| a |\n|---|\n| b |\n", icon="🛠", kind="guide"
    )
    make_document(alice, eng, "guides/deep/more.md", "# More\n")
    make_document(alice, eng, "readme.md", "# Readme\n")
    response = client_for(alice).get("/ui/kb/eng/guides/setup.md")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<title>Setup · Knowledge</title>" in html
    assert "🛠" in html and "Guide" in html and "Published" in html
    assert re.search(r'id="kb-version">1</a>', html)
    assert "by alice" in html
    assert '<h1 id="user-content-setup">Setup' in html and "<code>make</code>" in html and "<table>" in html
    # The namespace tree: folders as <details>, the current document's folder open.
    assert "<summary>guides</summary>" in html and "<summary>deep</summary>" in html
    assert 'href="/ui/kb/eng/readme.md"' in html
    assert 'aria-current="page"' in html
    assert 'data-endpoint="/kb/documents/' in html  # links panel, filled from the graph API


def test_reader_page_says_when_part_of_a_document_is_shown_plain(alice: Any, eng: Any, monkeypatch: Any):
    monkeypatch.setattr(rendering, "RAW_HTML_BLOCK_SCAN_MAX_TAGS", 2)
    make_document(alice, eng, "plain.md", "# Plain\n\n<div>one</div>\n")
    make_document(alice, eng, "pasted.md", "# Pasted\n\n<div>one</div>\n<div>two</div>\n<div>three</div>\n")
    client = client_for(alice)
    banner = "part of it is shown as plain text"
    assert banner not in client.get("/ui/kb/eng/plain.md").content.decode()
    assert banner in client.get("/ui/kb/eng/pasted.md").content.decode()


def test_reader_pages_send_the_content_security_policy(alice: Any, eng: Any):
    make_document(alice, eng, "a.md", "# A\n\n```mermaid\ngraph TD; A-->B\n```\n\n$x$\n")
    client = client_for(alice)
    for url in ("/ui/", "/ui/kb/eng/", "/ui/kb/eng/a.md", "/ui/graph/eng", "/ui/archived/eng", "/ui/kb/search?q=a"):
        response = client.get(url)
        assert response.status_code == 200, url
        policy = response["Content-Security-Policy"]
        assert policy == settings.KNOWLEDGE_READER_CSP
        for directive in (
            "default-src 'self'",
            "script-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
            "img-src 'self' data:",
        ):
            assert directive in policy
        script_part = policy.split("script-src", 1)[1].split(";", 1)[0]
        assert "unsafe-inline" not in script_part and "unsafe-eval" not in script_part
        # Every script is a local static file; none is inline, none from another origin.
        html = response.content.decode()
        for tag in re.findall(r"<script[^>]*>", html):
            assert re.search(r'src="/static/', tag), tag
        # Whatever the page loads (scripts, images, stylesheets) comes from this origin.
        for attribute, value in re.findall(r'\b(src|srcset|data)="([^"]*)"', html):
            assert value.startswith(("/", "data:")) and not value.startswith("//"), (attribute, value)
        for tag in re.findall(r"<link[^>]*>", html):
            assert re.search(r'href="(/static/|data:)', tag), tag
    assert client.get("/ui/login").get("Content-Security-Policy") == settings.KNOWLEDGE_READER_CSP
    assert "Content-Security-Policy" not in client.get("/health")


def test_mermaid_and_katex_are_loaded_only_when_needed(alice: Any, eng: Any):
    make_document(alice, eng, "plain.md", "# Plain\n")
    make_document(alice, eng, "rich.md", "# Rich\n\n```mermaid\ngraph TD; A-->B\n```\n\n$x$\n")
    client = client_for(alice)
    plain = client.get("/ui/kb/eng/plain.md").content.decode()
    rich = client.get("/ui/kb/eng/rich.md").content.decode()
    assert "mermaid.min.js" not in plain and "katex.min.js" not in plain
    assert "/static/mermaid/mermaid.min.js" in rich and "/static/knowledge/mermaid-init.js" in rich
    assert "/static/katex/katex.min.js" in rich and "/static/katex/katex.min.css" in rich


def test_static_assets_are_local_files():
    for name in (
        "mermaid/mermaid.min.js",
        "katex/katex.min.js",
        "katex/katex.min.css",
        "katex/fonts/KaTeX_Main-Regular.woff2",
        "knowledge/reader.js",
        "knowledge/graph.js",
        "knowledge/math.js",
        "knowledge/mermaid-init.js",
        "knowledge/ui.css",
        "knowledge/pygments.css",
    ):
        assert finders.find(name), f"{name} is not served (did `npm ci` run?)"
    init = Path(finders.find("knowledge/mermaid-init.js")).read_text()
    assert 'securityLevel: "strict"' in init and "startOnLoad: true" in init
    math = Path(finders.find("knowledge/math.js")).read_text()
    assert "trust: false" in math and "maxExpand" in math


def test_invisible_documents_answer_404(alice: Any, bob: Any, make_member: Any, eng: Any, other_workspace: Any):
    private = make_document(alice, eng, "private.md", "# Secret\n", visibility="private")
    closed = make_namespace(alice, "closed")  # others_can none
    hidden = make_document(alice, closed, "x.md", "# Hidden\n")
    rival = make_member("owner", workspace_=other_workspace, username="mallory")
    client = client_for(bob)
    for url in (
        "/ui/kb/eng/private.md",
        f"/ui/doc/{private.pk}",
        f"/ui/history/{private.pk}",
        "/ui/kb/closed/x.md",
        "/ui/kb/closed/",
        f"/ui/doc/{hidden.pk}",
        "/ui/graph/closed",
        "/ui/archived/closed",
        "/ui/kb/eng/missing.md",
        "/ui/kb/nope/x.md",
    ):
        response = client.get(url)
        assert response.status_code == 404, url
        assert b"Secret" not in response.content and b"Hidden" not in response.content
    assert client_for(rival).get("/ui/kb/eng/private.md").status_code == 404
    assert client_for(rival).get(f"/ui/doc/{hidden.pk}").status_code == 404
    assert client_for(alice).get("/ui/kb/eng/private.md").status_code == 200


def test_user_without_workspace_gets_a_clear_page(django_user_model: Any):
    lonely = django_user_model.objects.create_user("lonely", password="x")
    client = Client()
    client.force_login(lonely)
    response = client.get("/ui/")
    assert response.status_code == 403 and b"not a member of any workspace" in response.content


def test_document_links_follow_renames_and_never_leak_private_paths(alice: Any, bob: Any, eng: Any):
    target = make_document(alice, eng, "old/name.md", "# Target\n\n## Part\n")
    secret = make_document(alice, eng, "secret/plans.md", "# Plans\n", visibility="private")
    make_document(
        alice,
        eng,
        "index.md",
        f"[t](agor://kb/document/{str(target.pk).upper()}#part) [p](agor://kb/eng/old/name.md)"
        f" [s](agor://kb/document/{secret.pk}) [rel](old/name) [up](../outside.md)",
    )
    services.document_update(actor=alice.actor, document_id=target.pk, changes={"path": "new/place.md"})

    html = client_for(bob).get("/ui/kb/eng/index.md").content.decode()
    assert 'href="/ui/kb/eng/new/place.md#part"' in html  # the id link found the new path
    assert 'href="/ui/kb/eng/old/name.md"' in html  # a path link stays a path link
    assert f'href="/ui/doc/{secret.pk}"' in html and "secret/plans.md" not in html
    assert "agor:" not in html
    owner_html = client_for(alice).get("/ui/kb/eng/index.md").content.decode()
    assert 'href="/ui/kb/eng/secret/plans.md"' in owner_html

    # The rename-proof route redirects to the current path.
    response = client_for(bob).get(f"/ui/doc/{target.pk}")
    assert response.status_code == 302 and response["Location"] == "/ui/kb/eng/new/place.md"
    assert client_for(bob).get(f"/ui/doc/{secret.pk}").status_code == 404


def test_links_without_md_extension_find_the_document(alice: Any, eng: Any):
    make_document(alice, eng, "guides/setup.md", "# Setup\n")
    response = client_for(alice).get("/ui/kb/eng/guides/setup")
    assert response.status_code == 302 and response["Location"] == "/ui/kb/eng/guides/setup.md"
    assert client_for(alice).get("/ui/kb/eng/guides/nothing").status_code == 404


def test_history_lists_versions_and_diffs_any_two(alice: Any, bob: Any, eng: Any):
    document = make_document(alice, eng, "notes.md", "# Notes\n\nfirst line\nshared\n")
    services.document_revise(actor=alice.actor, document_id=document.pk, content="# Notes\n\nsecond line\nshared\n")
    services.document_revise(
        actor=alice.actor, document_id=document.pk, content="# Notes\n\n<script>alert(1)</script>\nshared\n",
        change_summary="third",
    )  # fmt: skip
    client = client_for(bob)
    page = client.get(f"/ui/history/{document.pk}").content.decode()
    assert page.count('href="/ui/kb/eng/notes.md?version=') == 3
    assert "third" in page
    # Default: the newest against the one before.
    assert '<span class="diff-del">-second line</span>' in page
    assert '<span class="diff-add">+&lt;script&gt;alert(1)&lt;/script&gt;</span>' in page
    assert "<script>alert(1)</script>" not in page
    diff = client.get(f"/ui/history/{document.pk}?a=1&b=2").content.decode()
    assert '<span class="diff-del">-first line</span>' in diff and '<span class="diff-add">+second line</span>' in diff
    assert '<span class="diff-context"> shared</span>' in diff
    assert client.get(f"/ui/history/{document.pk}?a=1&b=9").status_code == 404
    assert client.get(f"/ui/history/{document.pk}?a=x").status_code == 400
    # Any version can be read rendered.
    old = client.get("/ui/kb/eng/notes.md?version=1").content.decode()
    assert "first line" in old and "You are reading version 1" in old


def test_archived_browser_banner_and_restore_for_allowed_users_only(alice: Any, bob: Any, eng: Any):
    document = make_document(alice, eng, "old.md", "# Old\n")
    make_document(alice, eng, "live.md", "# Live\n")
    services.document_set_archived(actor=alice.actor, document_id=document.pk, archived=True)

    for member, can_restore in ((alice, True), (bob, False)):
        client = client_for(member)
        listing = client.get("/ui/archived/eng").content.decode()
        assert f'href="/ui/doc/{document.pk}"' in listing and "live.md" not in listing
        assert (f'action="/ui/restore/{document.pk}"' in listing) is can_restore
        assert client.get("/ui/kb/eng/old.md")["Location"] == f"/ui/doc/{document.pk}"
        page = client.get(f"/ui/doc/{document.pk}").content.decode()
        assert "This document is archived." in page
        assert ('id="kb-restore"' in page) is can_restore
        assert "old.md" not in re.sub(r"<code>eng/old.md</code>", "", page.split('id="kb-tree"')[1])

    # bob may read but not restore: the service says no, whatever the page showed.
    response = client_for(bob).post(f"/ui/restore/{document.pk}")
    assert response.status_code == 403
    assert Document.objects.get(pk=document.pk).archived is True
    assert client_for(bob).get(f"/ui/restore/{document.pk}").status_code == 405

    response = client_for(alice).post(f"/ui/restore/{document.pk}")
    assert response.status_code == 302 and response["Location"] == "/ui/kb/eng/old.md"
    restored = Document.objects.get(pk=document.pk)
    assert restored.archived is False and restored.current_version.number == 1


def test_restore_conflict_is_reported_on_the_page(alice: Any, eng: Any):
    first = make_document(alice, eng, "spot.md", "# First\n")
    services.document_set_archived(actor=alice.actor, document_id=first.pk, archived=True)
    second = make_document(alice, eng, "other.md", "# Second\n")
    services.document_update(actor=alice.actor, document_id=second.pk, changes={"path": "spot.md"})
    client = client_for(alice)
    response = client.post(f"/ui/restore/{first.pk}", follow=True)
    assert response.status_code == 200
    assert b"Another active document now holds" in response.content
    assert Document.objects.get(pk=first.pk).archived is True


def test_search_page_lists_readable_hits(alice: Any, bob: Any, eng: Any):
    make_document(alice, eng, "guides/rotate.md", "# Rotate certificates\n\nHow to rotate the certificate.\n")
    make_document(alice, eng, "private.md", "# Rotate secrets\n\nrotate privately\n", visibility="private")
    html = client_for(bob).get("/ui/kb/search?q=rotate").content.decode()
    assert 'href="/ui/kb/eng/guides/rotate.md"' in html and "Rotate certificates" in html
    assert "private.md" not in html
    assert 'id="kb-search-total">1 result' in html
    assert client_for(bob).get("/ui/kb/search").status_code == 200
    bad = client_for(bob).get("/ui/kb/search?q=x&namespace=nope")
    assert bad.status_code == 200 and b'class="error"' in bad.content


def test_home_namespace_and_graph_pages(alice: Any, bob: Any, eng: Any):
    make_document(alice, eng, "a.md", "# A doc\n")
    client = client_for(bob)
    home = client.get("/ui/").content.decode()
    assert 'href="/ui/kb/eng/"' in home and "Engineering" in home
    index = client.get("/ui/kb/eng/").content.decode()
    assert "A doc" in index and 'href="/ui/graph/eng"' in index and 'href="/ui/archived/eng"' in index
    graph = client.get("/ui/graph/eng").content.decode()
    assert 'data-endpoint="/kb/namespaces/eng/graph"' in graph and "/static/knowledge/graph.js" in graph


def test_xss_document_page_has_no_executable_markup(alice: Any, eng: Any):
    from tests.knowledge.test_rendering import XSS_CORPUS, assert_safe

    content = "\n\n".join(payload for _, payload in XSS_CORPUS)
    make_document(alice, eng, "xss.md", content, title='"><svg onload=alert(1)> title')
    html = client_for(alice).get("/ui/kb/eng/xss.md").content.decode()
    body = html.split('id="kb-body">', 1)[1].split("</article>", 1)[0]
    assert_safe(body)
    assert "&quot;&gt;&lt;svg onload=alert(1)&gt; title" in html  # the title is escaped everywhere
    assert "<svg onload" not in html


def test_paths_with_spaces_hashes_and_unicode(alice: Any, eng: Any):
    make_document(alice, eng, "notes/my doc #1 100%.md", "# Odd\n\n[sib](über.md)\n")
    make_document(alice, eng, "notes/über.md", "# Über\n")
    client = client_for(alice)
    index = client.get("/ui/kb/eng/").content.decode()
    assert 'href="/ui/kb/eng/notes/my%20doc%20%231%20100%25.md"' in index
    page = client.get("/ui/kb/eng/notes/my%20doc%20%231%20100%25.md")
    assert page.status_code == 200 and b"Odd" in page.content
    assert 'href="/ui/kb/eng/notes/%C3%BCber.md"' in page.content.decode()
    assert client.get("/ui/kb/eng/notes/%C3%BCber.md").status_code == 200


def test_reader_page_query_count_does_not_grow_with_the_namespace(
    alice: Any, eng: Any, django_assert_max_num_queries: Any
):
    for index in range(40):
        make_document(alice, eng, f"folder{index % 5}/doc{index}.md", f"# Doc {index}\n")
    target = Document.objects.get(path="folder1/doc1.md")
    make_document(alice, eng, "links.md", "".join(f"[x](agor://kb/document/{target.pk}) " for _ in range(20)))
    client = client_for(alice)
    client.get("/ui/kb/eng/links.md")  # warm the render cache
    with django_assert_max_num_queries(14):
        response = client.get("/ui/kb/eng/links.md")
    assert response.status_code == 200
    assert response.content.decode().count('href="/ui/kb/eng/folder1/doc1.md"') >= 20
