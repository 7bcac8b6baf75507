"""Access rules in workspaces.access, exercised with real rows."""

from __future__ import annotations

import pytest

from knowledge.services import document_create
from workspaces import access
from workspaces.models import Group, NamespaceACL
from workspaces.services import namespace_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup(make_member):
    owner = make_member("member", username="nsowner")
    author = make_member("member", username="author")
    editor = make_member("member", username="editor")
    admin = make_member("admin", username="wsadmin")
    namespace = namespace_create(actor=owner.actor, slug="rules", others_can="read")
    NamespaceACL.objects.create(namespace=namespace, user=author.user, permission="write")
    NamespaceACL.objects.create(namespace=namespace, user=editor.user, permission="write")
    return owner, author, editor, admin, namespace


def _doc(actor, namespace, path, **fields):
    return document_create(actor=actor, namespace=namespace, path=path, content="x", **fields)


def test_effective_permission_is_the_highest_path(setup, make_member, workspace):
    owner, author, _, admin, namespace = setup
    grouped = make_member("member", username="grouped")
    group = Group.objects.create(workspace=workspace, name="leads")
    group.members.add(grouped.user)
    NamespaceACL.objects.create(namespace=namespace, group=group, permission="own")
    NamespaceACL.objects.create(namespace=namespace, user=grouped.user, permission="read")
    assert access.permission_on(owner.actor, namespace) == "own"
    assert access.permission_on(author.actor, namespace) == "write"
    assert access.permission_on(grouped.actor, namespace) == "own"
    assert access.permission_on(admin.actor, namespace) == "own"
    assert access.permission_on(make_member().actor, namespace) == "read"  # others_can


def test_only_the_callers_live_grants_count(setup, make_member, workspace):
    """Grants to someone else, to a group the caller left or to an archived group give nothing;
    several grants on one namespace give the highest."""
    *_, namespace = setup
    caller, other = make_member("member", username="caller"), make_member("member", username="other")
    private = namespace_create(actor=other.actor, slug="private-rules")  # others_can none
    archived_group = Group.objects.create(workspace=workspace, name="old-team", archived=True)
    archived_group.members.add(caller.user)
    left_group = Group.objects.create(workspace=workspace, name="left-team")
    NamespaceACL.objects.create(namespace=private, group=archived_group, permission="own")
    NamespaceACL.objects.create(namespace=private, group=left_group, permission="own")
    NamespaceACL.objects.create(namespace=private, user=make_member().user, permission="own")
    assert access.namespace_permissions(caller.actor)[private.pk] == "none"
    assert access.namespace_permissions(caller.actor)[namespace.pk] == "read"
    live_group = Group.objects.create(workspace=workspace, name="team")
    live_group.members.add(caller.user)
    NamespaceACL.objects.create(namespace=private, group=live_group, permission="read")
    NamespaceACL.objects.create(namespace=private, user=caller.user, permission="write")
    assert access.namespace_permissions(caller.actor)[private.pk] == "write"


def test_archived_namespace_gives_none(setup):
    owner, *_, namespace = setup
    namespace.archived = True
    namespace.save()
    assert access.permission_on(owner.actor, namespace) == "none"
    assert access.permission_on(owner.actor, namespace, ignore_archive=True) == "own"


def test_private_document_reading(setup, make_member):
    owner, author, editor, admin, namespace = setup
    doc = _doc(author.actor, namespace, "private.md", visibility="private")
    assert access.can_read_document(author.actor, doc)
    assert access.can_read_document(owner.actor, doc)  # namespace own
    assert access.can_read_document(admin.actor, doc)
    assert not access.can_read_document(editor.actor, doc)
    assert not access.can_read_document(make_member().actor, doc)


def test_private_document_with_public_edit_policy_is_not_world_editable(setup):
    _, author, editor, _, namespace = setup
    doc = _doc(author.actor, namespace, "p.md", visibility="private", edit_policy="public")
    assert not access.can_write_document(editor.actor, doc)
    public = _doc(author.actor, namespace, "q.md", visibility="public", edit_policy="public")
    assert access.can_write_document(editor.actor, public)


def test_owner_policy_and_admins_policy(setup):
    owner, author, editor, admin, namespace = setup
    doc = _doc(author.actor, namespace, "o.md")
    assert access.can_write_document(author.actor, doc)
    assert not access.can_write_document(editor.actor, doc)
    locked = _doc(author.actor, namespace, "a.md", edit_policy="admins")
    assert not access.can_write_document(author.actor, locked)  # the creator without namespace own
    assert access.can_write_document(owner.actor, locked)
    assert access.can_write_document(admin.actor, locked)


def test_read_only_namespace_access_cannot_write_even_own_documents(setup):
    _, author, _, _, namespace = setup
    doc = _doc(author.actor, namespace, "mine.md")
    NamespaceACL.objects.filter(namespace=namespace, user=author.user).update(permission="read")
    actor = author.actor
    assert access.can_read_document(actor, doc)
    assert not access.can_write_document(actor, doc)
    assert not access.can_govern_document(actor, doc)


def test_governance_needs_creator_namespace_owner_or_admin(setup):
    owner, author, editor, admin, namespace = setup
    doc = _doc(author.actor, namespace, "g.md", edit_policy="public")
    assert access.can_write_document(editor.actor, doc)
    assert not access.can_govern_document(editor.actor, doc)
    for member in (author, owner, admin):
        assert access.can_govern_document(member.actor, doc)


def test_document_read_filter_matches_can_read(setup, make_member):
    from knowledge.models import Document

    owner, author, editor, admin, namespace = setup
    _doc(author.actor, namespace, "pub.md")
    _doc(author.actor, namespace, "priv.md", visibility="private")
    _doc(editor.actor, namespace, "epriv.md", visibility="private")
    for member in (owner, author, editor, admin, make_member()):
        actor = member.actor
        in_sql = set(Document.objects.filter(access.document_read_filter(actor)).values_list("path", flat=True))
        in_python = {d.path for d in Document.objects.all() if access.can_read_document(actor, d)}
        assert in_sql == in_python
