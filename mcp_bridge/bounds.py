"""Keep every tool result within an agent's budget (about 100 KB by default)."""

from __future__ import annotations

import json
from typing import Any

MAX_RESULT_CHARS = 100_000
TEXT_FIELDS = ("content", "numbered_content", "diff")


def cut_at_line(text: str, limit: int) -> tuple[str, int, int]:
    """(kept text, kept line count, total line count), cut at a line boundary."""
    if len(text) <= limit:
        lines = text.count("\n") + 1
        return text, lines, lines
    head = text[:limit]
    if "\n" in head:
        head = head[: head.rfind("\n") + 1]
    return head, head.count("\n"), text.count("\n") + 1


def truncate_content(text: str, limit: int, *, start_line: int = 1) -> tuple[str, dict[str, Any] | None]:
    """Cut long content with a marker telling the model how to read on."""
    kept, kept_lines, total_lines = cut_at_line(text, limit)
    if kept == text:
        return text, None
    next_line = start_line + kept_lines
    marker = (
        f"\n…[truncated: showing lines {start_line}-{next_line - 1} of {start_line + total_lines - 1}; "
        f"call agor_kb_get_range with startLine={next_line} to read on]"
    )
    info = {"truncated": True, "nextLine": next_line, "totalLines": start_line + total_lines - 1}
    return kept + marker, info


def _size(value: Any) -> int:
    return len(json.dumps(value, default=str, ensure_ascii=False))


def _text_slots(value: Any, path: tuple = ()) -> list[tuple[tuple, int]]:
    slots = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in TEXT_FIELDS and isinstance(item, str):
                slots.append(((*path, key), len(item)))
            else:
                slots.extend(_text_slots(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            slots.extend(_text_slots(item, (*path, index)))
    return slots


def bound_result(result: dict[str, Any], budget: int = MAX_RESULT_CHARS) -> dict[str, Any]:
    """Shrink the largest text fields until the JSON fits the budget."""
    if _size(result) <= budget:
        return result
    for slot, length in sorted(_text_slots(result), key=lambda s: -s[1]):
        excess = _size(result) - budget
        if excess <= 0:
            break
        parent: Any = result
        for key in slot[:-1]:
            parent = parent[key]
        keep = max(length - excess - 200, 0)
        text, info = truncate_content(parent[slot[-1]], keep)
        parent[slot[-1]] = text
        if info and isinstance(parent, dict):
            parent.setdefault("contentTruncation", info)
    return result
