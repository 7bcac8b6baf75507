"""List endpoints run a fixed number of queries, whatever the page size."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from knowledge.services import document_create, document_revise
from workspaces.models import NamespaceACL
from workspaces.services import namespace_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def corpus(make_member):
    owner = make_member("member", username="qowner")
    reader = make_member("member", username="qreader")
    for n in range(3):
        namespace = namespace_create(actor=owner.actor, slug=f"q{n}")
        NamespaceACL.objects.create(namespace=namespace, user=reader.user, permission="read")
        for i in range(20):
            doc = document_create(
                actor=owner.actor, namespace=namespace, path=f"d{i}.md", content=f"# D{i}\n\nshared words\n"
            )
            if n == 0 and i == 0:
                for k in range(30):
                    document_revise(actor=owner.actor, document_id=doc.pk, content=f"v{k}")
                first = doc
    return owner, reader, first


def _captured(member, url: str, params: dict) -> list[str]:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {member.token}")
    client.get("/kb/me")  # the first use of a token records last_used_at once; keep it out of the count
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, params)
    assert response.status_code == 200, response.content
    assert response.json().get("total", 1) > 0
    return [query["sql"] for query in captured]


def _queries(member, url: str, params: dict) -> int:
    return len(_captured(member, url, params))


@pytest.mark.parametrize("who", [0, 1])
def test_document_list_queries_do_not_grow_with_page_size(corpus, who):
    member = corpus[who]
    small = _queries(member, "/kb/documents", {"limit": 2})
    large = _queries(member, "/kb/documents", {"limit": 60})
    with_content = _queries(member, "/kb/documents", {"limit": 60, "include_content": "true"})
    assert small == large == with_content
    assert large <= 8


@pytest.mark.parametrize("who", [0, 1])
def test_search_queries_do_not_grow_with_page_size(corpus, who):
    member = corpus[who]
    _queries(member, "/kb/search", {"q": "shared"})  # PostgreSQL looks a word's stems up once per process
    for mode in ("snippet", "none", "full"):
        small = _queries(member, "/kb/search", {"q": "shared", "limit": 2, "content_mode": mode})
        large = _queries(member, "/kb/search", {"q": "shared", "limit": 60, "content_mode": mode})
        assert small == large <= 10, mode
    assert _queries(member, "/kb/search", {"limit": 2}) == _queries(member, "/kb/search", {"limit": 60})


@pytest.mark.parametrize("url", ["/kb/documents", "/kb/search"])
def test_pages_leave_out_columns_they_never_show(corpus, url):
    """Users' password hashes and versions' front matter stay in the database on list pages."""
    statements = _captured(corpus[1], url, {"q": "shared", "limit": 60})
    page = [sql for sql in statements if "knowledge_documentversion" in sql and "auth_user" in sql]
    assert page, statements
    for sql in page:
        assert '"password"' not in sql and '"frontmatter"' not in sql, sql
        assert '"username"' in sql and '"sha256"' in sql


def test_namespace_list_and_history_queries_are_bounded(corpus):
    owner, _, doc = corpus
    assert _queries(owner, "/kb/namespaces", {"limit": 1}) == _queries(owner, "/kb/namespaces", {"limit": 100})
    small = _queries(owner, f"/kb/documents/{doc.pk}/versions", {"limit": 2})
    large = _queries(owner, f"/kb/documents/{doc.pk}/versions", {"limit": 30, "include_content": "true"})
    assert small == large <= 10


def test_a_token_request_reads_the_membership_with_the_token(corpus):
    statements = _captured(corpus[1], "/kb/documents", {"limit": 5})
    token_reads = [sql for sql in statements if 'FROM "workspaces_apitoken"' in sql]
    assert len(token_reads) == 1 and '"workspaces_membership"' in token_reads[0]
    assert not [sql for sql in statements if sql.startswith('SELECT "workspaces_membership"')]
