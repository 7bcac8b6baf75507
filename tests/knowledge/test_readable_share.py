"""`selectors.readable_share`: the estimate semantic search sizes its candidate list with."""

from __future__ import annotations

import pytest

from knowledge import selectors
from tests.conftest import create_namespace, grant
from workspaces.access import actor_for

pytestmark = pytest.mark.django_db(transaction=True)


def share(member, **filters) -> float:
    return selectors.readable_share(
        actor=actor_for(member.user, member.workspace), filters=selectors.DocumentFilters(**filters)
    )


def test_the_share_is_readable_namespaces_over_all(http, alice, bob, owner):
    for slug in ("a", "b", "c", "d"):
        create_namespace(http, alice, slug)
    assert share(owner) == 1.0  # workspace owners read everything
    assert share(alice) == 1.0  # she owns all four
    assert share(bob) == 0.0
    grant(http, alice, "a", [("bob", "read")])
    assert share(bob) == 0.25
    create_namespace(http, alice, "e", others_can="read")
    assert share(bob) == pytest.approx(2 / 5)
    assert share(alice, namespace="a") == pytest.approx(1 / 5)  # a namespace filter keeps one
