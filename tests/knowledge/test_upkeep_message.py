"""A save hands its after-commit upkeep to the broker as one message, which a real worker fans
out to the outline, chunking and reference tasks; each then runs as its own task."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from typing import Any

import pytest
import redis
from django.db import connection

from graph.models import ContentLink
from knowledge.models import Document, DocumentOutline
from tests.conftest import ROOT, create_document, create_namespace, wait_for

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="workers run on the PostgreSQL test database"),
]

SAVE = """
import sys, django
django.setup()
from django.contrib.auth import get_user_model
from knowledge.services import document_revise
from workspaces.access import actor_for
from workspaces.models import Workspace
user = get_user_model().objects.get(username=sys.argv[1])
actor = actor_for(user, Workspace.objects.get(slug=sys.argv[2]))
document_revise(actor=actor, document_id=sys.argv[3], content=sys.argv[4])
"""


def queued(broker_url: str) -> list[dict[str, Any]]:
    """The messages waiting in the default queue: task name and arguments."""
    messages = [json.loads(raw) for raw in redis.Redis.from_url(broker_url).lrange("celery", 0, -1)]
    return [
        {
            "task": m["headers"]["task"],
            "args": json.loads(base64.b64decode(m["body"]))[0],
            "argsrepr": m["headers"]["argsrepr"],
        }
        for m in reversed(messages)
    ]


def test_a_save_queues_one_message_that_a_worker_fans_out(http, owner, broker_url, process_env, workers, tmp_path):
    create_namespace(http, owner, "notes")
    create_document(http, owner, "notes", "target.md", "# Target\n")
    created = create_document(http, owner, "notes", "a.md", "# A\n")
    document = Document.objects.get(pk=created["id"])
    content = "# A\n\n## Part\n\nSee [the target](target.md).\n"
    subprocess.run(
        [sys.executable, "-c", SAVE, owner.user.username, owner.workspace.slug, str(document.pk), content],
        cwd=ROOT, env=process_env, check=True, timeout=120,
    )  # fmt: skip

    [message] = queued(broker_url)
    assert message["task"] == "knowledge.tasks.fan_out_task"
    inner = {task["task"]: task["args"] for task in message["args"][0]}
    document.refresh_from_db()
    version = str(document.current_version_id)
    assert inner == {
        "knowledge.tasks.store_outline_task": [version],
        "knowledge.tasks.sync_embedding_chunks_task": [str(document.pk)],
        "graph.tasks.sync_references_task": [str(document.pk), version],
    }
    # monitoring shows the task names, not a walk of every signature
    assert message["argsrepr"] == "[store_outline_task, sync_embedding_chunks_task, sync_references_task]"

    workers()
    wait_for(lambda: DocumentOutline.objects.filter(version_id=version).exists(), "the outline")
    wait_for(
        lambda: ContentLink.objects.filter(source__document=document, target_document__path="target.md").exists(),
        "the link to the target",
    )
    log = tmp_path / "worker0.log"
    for task in inner:  # each ran as a task of its own, with its own retries
        wait_for(lambda task=task: re.search(rf"Task {task}\[[^]]+\] succeeded", log.read_text()), task)
    assert not queued(broker_url)
