"""After-commit upkeep of content writes: one call per write, or one per batched block."""

from __future__ import annotations

import pytest
from django.db import transaction

from knowledge import services
from knowledge.models import DocumentOutline, EmbeddingChunk
from workspaces.services import namespace_create

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def recorded(monkeypatch):
    """Replace the registered upkeep with two recorders: one per write, one with a batch variant."""
    calls: dict[str, list] = {"single": [], "batched_single": [], "many": []}

    def single(document_id, version_id):
        calls["single"].append((document_id, version_id))

    def batched(document_id, version_id):
        calls["batched_single"].append((document_id, version_id))

    batched.many = lambda writes: calls["many"].append(writes)
    monkeypatch.setattr(services, "after_content_write", [single, batched])
    return calls


def create(alice, namespace, path: str):
    return services.document_create(actor=alice.actor, namespace=namespace, path=path, content=f"# {path}\n\nText.\n")


def test_each_write_hands_over_its_own_upkeep_outside_a_batch(alice, recorded):
    namespace = namespace_create(actor=alice.actor, slug="eng")
    doc = create(alice, namespace, "a.md")
    assert recorded["single"] == recorded["batched_single"] == [(doc.id, doc.current_version_id)]
    assert recorded["many"] == []


def test_a_batched_block_hands_over_its_committed_writes_once_at_the_end(alice, recorded):
    namespace = namespace_create(actor=alice.actor, slug="eng")
    with services.batched_content_hooks():
        first = create(alice, namespace, "a.md")
        with pytest.raises(RuntimeError), transaction.atomic():
            create(alice, namespace, "rolled-back.md")
            raise RuntimeError
        second = create(alice, namespace, "b.md")
        assert recorded == {"single": [], "batched_single": [], "many": []}  # nothing before the end
    writes = [(first.id, first.current_version_id), (second.id, second.current_version_id)]
    assert recorded["many"] == [writes]
    assert recorded["single"] == writes  # a callback without a batch variant runs once per write
    assert recorded["batched_single"] == []


def test_a_batched_block_inside_a_transaction_waits_for_its_commit(alice, recorded):
    namespace = namespace_create(actor=alice.actor, slug="eng")
    with transaction.atomic():
        with services.batched_content_hooks():
            doc = create(alice, namespace, "a.md")
        assert recorded["many"] == []
    assert recorded["many"] == [[(doc.id, doc.current_version_id)]]


def test_the_real_upkeep_of_a_batch_chunks_and_stores_outlines(alice):
    """The registered hooks (eager Celery here): one chunking and one outline message for the block."""
    namespace = namespace_create(actor=alice.actor, slug="eng")
    with services.batched_content_hooks():
        docs = [create(alice, namespace, f"d{n}.md") for n in range(3)]
    for doc in docs:
        assert EmbeddingChunk.objects.filter(document=doc, version=doc.current_version).exists()
        assert DocumentOutline.objects.filter(version=doc.current_version).exists()
