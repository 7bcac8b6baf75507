"""The ACL contract every namespaced endpoint keeps.

No token: 401. A token from another workspace: 404. No namespace access: 404 (same body as a
missing object). Read-only access: reads succeed, writes 403. Writers write; owners manage.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import pytest

from knowledge.services import document_create
from workspaces.services import namespace_acl_replace, namespace_create

pytestmark = pytest.mark.django_db(transaction=True)
_unique = itertools.count()


@dataclass(frozen=True)
class Endpoint:
    name: str
    method: str
    url: str
    level: str  # "read", "write" or "manage": the least permission that succeeds
    body: Any = None
    params: Any = None


def _new_path() -> str:
    return f"contract/new-{next(_unique)}.md"


ENDPOINTS = [
    Endpoint("namespace-get", "GET", "/kb/namespaces/{ns}", "read"),
    Endpoint("namespace-acl-get", "GET", "/kb/namespaces/{ns}/acl", "read"),
    Endpoint("namespace-patch", "PATCH", "/kb/namespaces/{ns}", "manage", body=lambda: {"description": "x"}),
    Endpoint(
        "namespace-acl-put",
        "PUT",
        "/kb/namespaces/{ns}/acl",
        "manage",
        body=lambda: {
            "entries": [
                {"subject_type": "user", "subject": "owner", "permission": "own"},
                {"subject_type": "user", "subject": "reader", "permission": "read"},
                {"subject_type": "user", "subject": "writer", "permission": "write"},
            ]
        },
    ),
    Endpoint("namespace-archive", "DELETE", "/kb/namespaces/{ns}", "manage"),
    Endpoint("documents-list", "GET", "/kb/documents", "read", params=lambda: {"namespace": "contract"}),
    Endpoint("document-get", "GET", "/kb/documents/{doc}", "read"),
    Endpoint(
        "document-by-path-get",
        "GET",
        "/kb/documents/by-path",
        "read",
        params=lambda: {"namespace": "contract", "path": "shared/page.md"},
    ),
    Endpoint("versions-list", "GET", "/kb/documents/{doc}/versions", "read"),
    Endpoint("version-get", "GET", "/kb/documents/{doc}/versions/1", "read"),
    Endpoint(
        "document-create",
        "POST",
        "/kb/documents",
        "write",
        body=lambda: {"namespace": "contract", "path": _new_path(), "content": "x"},
    ),
    Endpoint(
        "document-upsert",
        "PUT",
        "/kb/documents/by-path",
        "write",
        body=lambda: {"namespace": "contract", "path": _new_path(), "content": "x"},
    ),
    Endpoint(
        "document-revise",
        "POST",
        "/kb/documents/{doc}/revise",
        "write",
        body=lambda: {"content": f"revision {next(_unique)}"},
    ),
    Endpoint("document-patch", "PATCH", "/kb/documents/{doc}", "write", body=lambda: {"title": f"T{next(_unique)}"}),
    Endpoint("document-archive", "PATCH", "/kb/documents/{doc}", "manage", body=lambda: {"archived": True}),
    Endpoint("document-delete", "DELETE", "/kb/documents/{doc}", "manage"),
    Endpoint("document-governance", "PATCH", "/kb/documents/{doc}", "manage", body=lambda: {"visibility": "private"}),
]

LEVEL_RANK = {"read": 1, "write": 2, "manage": 3}


@pytest.fixture
def world(make_member, other_workspace):
    """A namespace with a public, publicly-editable document, and one actor per access level."""
    owner = make_member("member", username="owner")
    reader = make_member("member", username="reader")
    writer = make_member("member", username="writer")
    stranger = make_member("member", username="stranger")
    outsider = make_member("owner", workspace_=other_workspace, username="outsider")
    namespace = namespace_create(actor=owner.actor, slug="contract")
    namespace_acl_replace(
        actor=owner.actor,
        namespace=namespace,
        entries=[
            {"subject_type": "user", "subject": "owner", "permission": "own"},
            {"subject_type": "user", "subject": "reader", "permission": "read"},
            {"subject_type": "user", "subject": "writer", "permission": "write"},
        ],
    )
    doc = document_create(
        actor=owner.actor, namespace=namespace, path="shared/page.md", content="# Page\n", edit_policy="public"
    )
    return {"owner": owner, "reader": reader, "writer": writer, "stranger": stranger, "outsider": outsider, "doc": doc}


def _call(http, member, endpoint: Endpoint, doc_id: str):
    url = endpoint.url.format(ns="contract", doc=doc_id)
    kwargs: dict[str, Any] = {}
    if endpoint.body:
        kwargs["json"] = endpoint.body()
    if endpoint.params:
        kwargs["params"] = endpoint.params()
    return http.as_(member).request(endpoint.method, url, **kwargs)


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=[e.name for e in ENDPOINTS])
def test_acl_contract(http, world, endpoint: Endpoint):
    doc_id = str(world["doc"].id)
    anonymous = _call(http, None, endpoint, doc_id)
    assert anonymous.status_code == 401, anonymous.text
    assert anonymous.json()["code"] == "not_authenticated"
    assert anonymous.headers["WWW-Authenticate"].startswith("Bearer")

    for name in ("outsider", "stranger"):
        response = _call(http, world[name], endpoint, doc_id)
        assert response.status_code == 404, (name, response.text)
        assert response.json()["code"] == "not_found"

    needed = LEVEL_RANK[endpoint.level]
    for name, level in (("reader", 1), ("writer", 2), ("owner", 3)):
        response = _call(http, world[name], endpoint, doc_id)
        if level >= needed:
            assert response.status_code in (200, 201), (name, response.text)
        else:
            assert response.status_code == 403, (name, response.text)
            assert response.json()["code"] == "permission_denied"


def test_revoked_and_malformed_tokens_are_401(http, world):
    from workspaces.models import ApiToken
    from workspaces.services import token_revoke

    reader = world["reader"]
    assert http.as_(reader).get("/kb/namespaces/contract").status_code == 200
    for token in ApiToken.objects.filter(user=reader.user):
        token_revoke(token=token)
    revoked = http.as_(reader).get("/kb/namespaces/contract")
    assert revoked.status_code == 401 and revoked.json()["code"] == "authentication_failed"
    for header in ("Bearer", "Bearer kb_nope", "Bearer a b"):
        response = http.get("/kb/namespaces", headers={"Authorization": header})
        assert response.status_code == 401, header


def test_token_is_stored_only_as_digest(world):
    from workspaces.models import ApiToken

    raw = world["reader"].token
    stored = ApiToken.objects.filter(user=world["reader"].user).values_list("digest", "prefix")
    for digest, prefix in stored:
        assert raw not in digest and len(digest) == 64 and raw.startswith(prefix)


def test_token_acts_only_in_its_workspace(http, world):
    """The outsider's token sees its own `contract` namespace, never the other workspace's documents."""
    outsider = world["outsider"]
    namespace_create(actor=outsider.actor, slug="contract")
    own = http.as_(outsider).get("/kb/namespaces/contract")
    assert own.status_code == 200 and own.json()["owner"] == "outsider"
    assert http.as_(outsider).get("/kb/documents").json()["total"] == 0
