"""The optional deployment YAML file (KNOWLEDGE_CONFIG_FILE). Read once, at start-up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from django.core.exceptions import ImproperlyConfigured

REMOVED_KNOWLEDGE_BLOCK = (
    "{path}: the top-level `knowledge:` block is no longer supported. Semantic search settings are "
    "per workspace now: record the values under knowledge.semantic_search, remove the whole "
    "`knowledge:` block from this file, restart, and have a workspace admin re-enter them in the admin "
    "(Workspaces -> Semantic search policy) or with PATCH /kb/settings/semantic. Stored encrypted "
    "API keys stay where they are."
)


def load_yaml_config(path: Path | None) -> dict[str, Any]:
    """Parse the file if it exists; refuse the removed `knowledge:` block loudly."""
    if path is None or not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ImproperlyConfigured(f"{path}: cannot read the configuration file ({exc.__class__.__name__}).") from exc
    if not isinstance(data, dict):
        raise ImproperlyConfigured(f"{path}: the configuration file must be a YAML mapping.")
    if "knowledge" in data:
        raise ImproperlyConfigured(REMOVED_KNOWLEDGE_BLOCK.format(path=path))
    return data
