"""Fixtures: workspaces with members and tokens, and a real HTTP client against a live server."""

from __future__ import annotations

import itertools
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import redis
from celery import Celery
from django.conf import settings
from django.db import connection

from config.db_workers import side_queries
from workspaces.access import Actor, actor_for
from workspaces.models import Workspace
from workspaces.services import membership_set, token_issue, user_ensure, workspace_ensure

_names = itertools.count(1)
ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Member:
    user: Any
    workspace: Workspace
    role: str
    token: str

    @property
    def actor(self) -> Actor:
        return actor_for(self.user, self.workspace)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@pytest.fixture(scope="session", autouse=True)
def _side_connections_closed(django_db_setup: Any) -> Iterator[None]:
    """Hybrid search's worker threads keep their database connections, as request threads do;
    they close before the test database is dropped."""
    yield
    side_queries.shutdown()


@pytest.fixture
def workspace(db: Any) -> Workspace:
    return workspace_ensure(slug="acme", name="Acme")


@pytest.fixture
def other_workspace(db: Any) -> Workspace:
    return workspace_ensure(slug="rival", name="Rival")


@pytest.fixture
def make_member(db: Any, workspace: Workspace):
    """make_member(role="member", workspace=None, username=None) -> Member with a fresh token."""

    def make(role: str = "member", *, workspace_: Workspace | None = None, username: str | None = None) -> Member:
        ws = workspace_ or workspace
        user = user_ensure(username=username or f"user{next(_names)}", password="pw-for-tests")
        membership_set(workspace=ws, user=user, role=role)
        _, raw = token_issue(user=user, workspace=ws)
        return Member(user=user, workspace=ws, role=role, token=raw)

    return make


@pytest.fixture
def owner(make_member) -> Member:
    return make_member("owner", username="olivia")


@pytest.fixture
def alice(make_member) -> Member:
    return make_member("member", username="alice")


@pytest.fixture
def bob(make_member) -> Member:
    return make_member("member", username="bob")


class Http:
    """A real HTTP client for the live server; `.as_(member)` picks the bearer token."""

    def __init__(self, base_url: str, member: Member | None = None) -> None:
        self.base_url = base_url
        self.member = member
        self._client = httpx.Client(base_url=base_url, timeout=60)

    def as_(self, member: Member | None) -> Http:
        clone = Http.__new__(Http)
        clone.base_url, clone.member, clone._client = self.base_url, member, self._client
        return clone

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        headers = dict(kwargs.pop("headers", {}) or {})
        if self.member is not None:
            headers.setdefault("Authorization", f"Bearer {self.member.token}")
        return self._client.request(method, url, headers=headers, **kwargs)

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", url, **kwargs)

    def put(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("PUT", url, **kwargs)

    def patch(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("PATCH", url, **kwargs)

    def delete(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("DELETE", url, **kwargs)

    def close(self) -> None:
        self._client.close()


@pytest.fixture
def http(live_server: Any, transactional_db: Any) -> Iterator[Http]:
    client = Http(live_server.url)
    yield client
    client.close()


# --- real Celery workers (PostgreSQL tests) --------------------------------------------------


@pytest.fixture
def broker_url():
    url = f"redis://127.0.0.1:6379/{random.randint(5, 15)}"
    redis.Redis.from_url(url).flushdb()
    yield url
    redis.Redis.from_url(url).flushdb()


@pytest.fixture
def worker_env() -> dict[str, str]:
    """Extra environment for the worker processes; a test module overrides it."""
    return {}


@pytest.fixture
def process_env(broker_url, worker_env) -> dict[str, str]:
    """Environment for another process on this test's PostgreSQL database, queueing to its broker."""
    db = connection.settings_dict
    database_url = f"postgres://{db['USER']}@{quote(db['HOST'], safe='')}/{db['NAME']}"
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "DATABASE_URL": database_url,
        "REDIS_URL": broker_url,
        "SECRET_KEY": settings.SECRET_KEY,
        "KNOWLEDGE_SECRET_KEYS": ",".join(settings.KNOWLEDGE_SECRET_KEYS),
        **worker_env,
    }


@pytest.fixture
def workers(process_env, tmp_path):
    """start() launches one solo worker process on this test's database; all are killed at the end."""
    env = process_env
    started: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        log = open(tmp_path / f"worker{len(started)}.log", "w")  # noqa: SIM115 (lives as long as the worker)
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config.celery_app", "worker", "--pool=solo", "-l", "INFO",
             "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"w{len(started)}@%h"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(10)


@pytest.fixture
def queue(broker_url):
    """queue(name, *args) sends knowledge.tasks.<name> to the workers' broker."""
    # Not the current app: shared tasks would follow it, and later tests in this process would
    # send their tasks to this broker instead of running them eagerly.
    sender = Celery(broker=broker_url, set_as_current=False)
    yield lambda name, *args: sender.send_task(f"knowledge.tasks.{name}", args=list(args))
    sender.close()


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """Poll `condition` until it returns something true (returned), failing after `timeout` s:
    for work another process does (a worker, a server)."""
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return result


# --- small builders used across tests ------------------------------------------------------


def create_namespace(http: Http, member: Member, slug: str, **fields: Any) -> dict[str, Any]:
    response = http.as_(member).post("/kb/namespaces", json={"slug": slug, **fields})
    assert response.status_code == 201, response.text
    return response.json()


def create_document(http: Http, member: Member, namespace: str, path: str, content: str = "# Doc\n", **fields: Any):
    response = http.as_(member).post(
        "/kb/documents", json={"namespace": namespace, "path": path, "content": content, **fields}
    )
    assert response.status_code == 201, response.text
    return response.json()


def grant(http: Http, owner: Member, namespace: str, entries: list[tuple[str, str]], others_can: str | None = None):
    """Replace a namespace ACL with user grants (username, permission); the owner keeps `own`."""
    body: dict[str, Any] = {
        "entries": [{"subject_type": "user", "subject": owner.user.username, "permission": "own"}]
        + [{"subject_type": "user", "subject": name, "permission": perm} for name, perm in entries]
    }
    if others_can:
        body["others_can"] = others_can
    response = http.as_(owner).put(f"/kb/namespaces/{namespace}/acl", json=body)
    assert response.status_code == 200, response.text
    return response.json()
