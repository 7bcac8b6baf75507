"""Public health, OpenAPI/docs served locally, production settings pass check --deploy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parent.parent
PRODUCTION_TEST_KEY = "f3Kq9-pZ!r8wL2@tX6vB#nM4yC7&hJ1sD5gA0eU^oI-TzQ-production-test-key"


def test_health_is_public_and_reports_version_and_database(http):
    response = http.get("/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["version"] == settings.KNOWLEDGE_VERSION
    assert body["database"]["ok"] is True and body["database"]["latency_ms"] >= 0


def test_me_reports_the_token_identity(http, alice):
    body = http.as_(alice).get("/kb/me").json()
    assert body == {"user": "alice", "workspace": "acme", "role": "member", "version": settings.KNOWLEDGE_VERSION}


def test_openapi_schema_and_docs_page_use_local_assets(http):
    schema = http.get("/kb/schema", params={"format": "json"})
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    for path in ("/kb/documents", "/kb/documents/{id}/revise", "/kb/namespaces/{slug}/acl", "/health"):
        assert path in paths
    docs = http.get("/kb/docs")
    assert docs.status_code == 200
    assert "//cdn" not in docs.text and "unpkg" not in docs.text and "jsdelivr" not in docs.text
    assert "/static/drf_spectacular_sidecar/" in docs.text


def test_unknown_urls_answer_json_404(http):
    response = http.get("/kb/nothing/here")
    assert response.status_code == 404 and response.json()["code"] == "not_found"


def _deploy_check(extra_env: dict[str, str]) -> subprocess.CompletedProcess:
    dropped = ("SECRET_KEY", "ALLOWED_HOSTS", "DEBUG", "DJANGO_ALLOW_ASYNC_UNSAFE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings.production", **extra_env})
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_settings_pass_check_deploy():
    result = _deploy_check(
        {
            "SECRET_KEY": PRODUCTION_TEST_KEY,
            "ALLOWED_HOSTS": "kb.example.com",
            "DATABASE_URL": os.environ.get("DATABASE_URL", "sqlite:///" + str(ROOT / "var" / "deploy.sqlite3")),
        }
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_settings_require_a_secret_key():
    result = _deploy_check({"ALLOWED_HOSTS": "kb.example.com", "DATABASE_URL": "sqlite:///tmp/x.sqlite3"})
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def _session_page_cost(extra_env: dict[str, str]) -> str:
    """random_page_cost of a session that the production settings open."""
    env = {k: v for k, v in os.environ.items() if k != "PG_RANDOM_PAGE_COST"}
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings.production", "SECRET_KEY": PRODUCTION_TEST_KEY, **extra_env})
    env["ALLOWED_HOSTS"] = "kb.example.com"
    code = (
        "import django; django.setup(); from django.db import connection; "
        "cursor = connection.cursor(); cursor.execute('SHOW random_page_cost'); print(cursor.fetchone()[0])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.skipif(not os.environ.get("DATABASE_URL", "").startswith("postgres"), reason="a PostgreSQL session option")
def test_postgres_sessions_plan_with_the_configured_page_cost():
    import psycopg

    with psycopg.connect(os.environ["DATABASE_URL"]) as plain:
        server_value = plain.execute("SHOW random_page_cost").fetchone()[0]
    assert server_value != "1.1"
    assert _session_page_cost({}) == "1.1"
    assert _session_page_cost({"PG_RANDOM_PAGE_COST": "2"}) == "2"
    assert _session_page_cost({"PG_RANDOM_PAGE_COST": ""}) == server_value  # nothing sent
