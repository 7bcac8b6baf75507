"""Content checks and derived facts for a version (pure functions)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

import yaml
from django.conf import settings

from config.exceptions import TooLarge

FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


@dataclass(frozen=True)
class ContentFacts:
    sha256: str
    md5: str
    byte_length: int
    char_length: int
    frontmatter: dict[str, Any]


def check_size(content: str) -> bytes:
    encoded = content.encode("utf-8")
    limit = settings.KNOWLEDGE_MAX_CONTENT_BYTES
    if len(encoded) > limit:
        raise TooLarge(
            f"Document content is {len(encoded)} bytes; the limit is {limit} bytes.",
            code="content_too_large",
            limit_bytes=limit,
        )
    return encoded


def parse_frontmatter(content: str) -> dict[str, Any]:
    """YAML front matter at the top of the document, or {} when absent or not a mapping."""
    match = FRONTMATTER.match(content)
    if not match:
        return {}
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return {}
    if not isinstance(data, dict):
        return {}
    # JSON columns need string keys and JSON-safe values.
    return yaml_to_json(data)


def yaml_to_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): yaml_to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [yaml_to_json(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def content_facts(content: str) -> ContentFacts:
    encoded = check_size(content)
    return ContentFacts(
        sha256=hashlib.sha256(encoded).hexdigest(),
        md5=hashlib.md5(encoded, usedforsecurity=False).hexdigest(),
        byte_length=len(encoded),
        char_length=len(content),
        frontmatter=parse_frontmatter(content),
    )
