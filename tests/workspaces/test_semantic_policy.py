"""Semantic search policy: validation, admin-only access, the sealed key, the removed YAML block."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workspaces.models import SemanticPolicy
from workspaces.secrets import SecretError, needs_reseal, seal, unseal

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-test-" + "q" * 40


def test_defaults_and_admin_only(http, alice, make_member):
    admin = make_member("admin", username="ada")
    policy = http.as_(admin).get("/kb/settings/semantic").json()
    assert policy["enabled"] is False and policy["provider"] == "openai" and policy["dimensions"] == 1536
    assert policy["chunking"] == {"target_tokens": 850, "max_tokens": 1200, "overlap_tokens": 100, "min_tokens": 80}
    assert policy["indexing"] == {"paused": False, "batch_size": 32}
    assert policy["api_key_configured"] is False
    denied = http.as_(alice).get("/kb/settings/semantic")
    assert denied.status_code == 403 and denied.json()["code"] == "permission_denied"
    assert http.as_(alice).patch("/kb/settings/semantic", json={"enabled": True}).status_code == 403


@pytest.mark.parametrize(
    "patch, field",
    [
        ({"surprise": 1}, "surprise"),
        ({"chunking": {"size": 3}}, "chunking.size"),
        ({"chunking": {"max_tokens": 50}}, "chunking.max_tokens"),
        ({"chunking": {"target_tokens": 1300}}, "chunking.target_tokens"),
        ({"chunking": {"overlap_tokens": 1200}}, "chunking.overlap_tokens"),
        ({"chunking": {"min_tokens": 9000}}, "chunking.min_tokens"),
        ({"indexing": {"batch_size": 129}}, "indexing.batch_size"),
        ({"indexing": {"batch_size": True}}, "indexing.batch_size"),
        ({"provider": "voyage"}, "provider"),
        ({"model": "ada-002"}, "model"),
        ({"dimensions": 4000}, "dimensions"),
        ({"provider": "openai-compatible", "model": "m", "dimensions": 8}, "base_url"),
        ({"provider": "local", "model": "all-MiniLM-L6-v2", "dimensions": 768}, "dimensions"),
        ({"enabled": "yes"}, "enabled"),
    ],
)
def test_invalid_patches_are_400_and_change_nothing(http, make_member, patch, field):
    admin = make_member("admin", username="ada")
    response = http.as_(admin).patch("/kb/settings/semantic", json=patch)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "invalid" and field in response.json()["errors"]
    assert http.as_(admin).get("/kb/settings/semantic").json()["generation"] == 1


def test_valid_patch_null_reset_and_generation(http, make_member):
    admin = make_member("admin", username="ada")
    client = http.as_(admin)
    body = client.patch(
        "/kb/settings/semantic",
        json={
            "enabled": True,
            "provider": "local",
            "model": "all-MiniLM-L6-v2",
            "dimensions": 384,
            "chunking": {"target_tokens": 400},
            "indexing": {"batch_size": 8},
        },
    ).json()
    assert body["provider"] == "local" and body["chunking"]["target_tokens"] == 400 and body["generation"] == 2
    reset = client.patch("/kb/settings/semantic", json={"chunking": {"target_tokens": None}, "indexing": None}).json()
    assert reset["chunking"]["target_tokens"] == 850 and reset["indexing"]["batch_size"] == 32
    assert reset["generation"] == 2  # chunking and indexing do not change the embedding space


def test_key_is_sealed_never_returned_blank_keeps_null_removes(http, make_member, workspace):
    admin = make_member("admin", username="ada")
    client = http.as_(admin)
    stored = client.patch("/kb/settings/semantic", json={"api_key": KEY})
    assert stored.status_code == 200 and stored.json()["api_key_configured"] is True
    assert KEY not in stored.text
    row = SemanticPolicy.objects.get(workspace=workspace)
    assert KEY not in row.api_key_sealed and unseal(row.api_key_sealed, workspace_id=workspace.pk) == KEY
    kept = client.patch("/kb/settings/semantic", json={"api_key": "  ", "enabled": True}).json()
    assert kept["api_key_configured"] is True
    for url in ("/kb/settings/semantic", "/kb/schema"):
        assert KEY not in client.get(url).text
    removed = client.patch("/kb/settings/semantic", json={"api_key": None}).json()
    assert removed["api_key_configured"] is False
    assert SemanticPolicy.objects.get(workspace=workspace).api_key_sealed == ""


def test_ciphertext_is_bound_to_its_workspace(workspace, other_workspace):
    token = seal(KEY, workspace_id=workspace.pk)
    assert unseal(token, workspace_id=workspace.pk) == KEY
    with pytest.raises(SecretError):
        unseal(token, workspace_id=other_workspace.pk)
    tampered = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    with pytest.raises(SecretError):
        unseal(tampered, workspace_id=workspace.pk)


def test_key_rotation_old_ciphertexts_decrypt_and_reseal(settings, workspace):
    old = base64.b64encode(os.urandom(32)).decode()
    new = base64.b64encode(os.urandom(32)).decode()
    settings.KNOWLEDGE_SECRET_KEYS = [old]
    token = seal(KEY, workspace_id=workspace.pk)
    settings.KNOWLEDGE_SECRET_KEYS = [new, old]
    assert unseal(token, workspace_id=workspace.pk) == KEY and needs_reseal(token)
    assert not needs_reseal(seal(KEY, workspace_id=workspace.pk))
    settings.KNOWLEDGE_SECRET_KEYS = [new]
    with pytest.raises(SecretError):
        unseal(token, workspace_id=workspace.pk)


def test_semantic_search_explains_why_it_is_unavailable(http, alice):
    response = http.as_(alice).get("/kb/search", params={"q": "x", "mode": "semantic"})
    assert response.status_code == 400 and response.json()["code"] == "semantic_unavailable"
    assert response.json()["reason"]


def test_yaml_knowledge_block_stops_startup(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("knowledge:\n  semantic_search:\n    enabled: true\n")
    env = {**os.environ, "KNOWLEDGE_CONFIG_FILE": str(config)}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    assert "`knowledge:` block is no longer supported" in result.stderr and "workspace admin" in result.stderr
    config.write_text("instance:\n  label: fine\n")
    ok = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert ok.returncode == 0, ok.stderr
