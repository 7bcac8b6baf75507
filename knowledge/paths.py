"""Document path normalisation and title derivation (pure functions, no ORM)."""

from __future__ import annotations

import re

from config.exceptions import Invalid

MAX_PATH_LENGTH = 1024
MAX_SEGMENT_LENGTH = 255
MAX_ICON_CODE_POINTS = 32
FORBIDDEN_CHARACTERS = set('<>:"\\|?*')
WINDOWS_RESERVED = re.compile(r"^(con|prn|aux|nul|com[1-9]|lpt[1-9])(\..*)?$", re.IGNORECASE)
ATX_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+\S")


def normalise_path(raw: str, *, field: str = "path") -> str:
    """Trim, drop leading slashes, collapse repeated slashes, and reject unsafe segments."""
    path = re.sub(r"/{2,}", "/", (raw or "").strip()).lstrip("/")
    if not path:
        raise Invalid("A document path is required.", code="invalid_path", field=field)
    if len(path) > MAX_PATH_LENGTH:
        raise Invalid(f"Paths are limited to {MAX_PATH_LENGTH} characters.", code="invalid_path", field=field)
    for segment in path.split("/"):
        _check_segment(segment, field)
    return path


def normalise_folder(raw: str | None, *, field: str = "path_prefix") -> str:
    """A folder prefix: like a path, but trailing slashes are dropped and empty means the root."""
    folder = re.sub(r"/{2,}", "/", (raw or "").strip()).strip("/")
    if not folder:
        return ""
    return normalise_path(folder, field=field)


def _check_segment(segment: str, field: str) -> None:
    problem = None
    if segment in ("", ".", ".."):
        problem = "empty, '.' or '..' segments are not allowed"
    elif any(ch in FORBIDDEN_CHARACTERS or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in segment):
        problem = 'segments may not contain < > : " \\ | ? * or control characters'
    elif segment.endswith((" ", ".")):
        problem = "segments may not end with a space or a period"
    elif WINDOWS_RESERVED.match(segment):
        problem = f"'{segment}' is a reserved name"
    elif len(segment) > MAX_SEGMENT_LENGTH:
        problem = f"segments are limited to {MAX_SEGMENT_LENGTH} characters"
    if problem:
        raise Invalid(f"Invalid path: {problem}.", code="invalid_path", field=field)


def title_from_path(path: str) -> str:
    leaf = path.rstrip("/").rsplit("/", 1)[-1]
    leaf = re.sub(r"\.(md|markdown)$", "", leaf, flags=re.IGNORECASE)
    title = re.sub(r"[-_]+", " ", leaf).strip()
    return title or "Untitled"


def first_line_is_heading(content: str) -> bool:
    line = next((line for line in content.splitlines() if line.strip()), "")
    return bool(ATX_HEADING.match(line))


def title_from_content(content: str) -> str:
    line = next((line for line in content.splitlines() if line.strip()), "")
    line = re.sub(r"^\s*#+\s*", "", line)
    line = re.sub(r"\s+#+\s*$", "", line)
    line = re.sub(r"^\s*[-*+]\s+", "", line)
    line = re.sub(r"[*_`~\\]", "", line).strip()
    return line[:500] or "Untitled"


def clean_icon(raw: str | None) -> str:
    """Trimmed icon, at most 32 code points; empty clears it."""
    icon = (raw or "").strip()
    if len(icon) > MAX_ICON_CODE_POINTS:
        raise Invalid(f"icon is limited to {MAX_ICON_CODE_POINTS} characters.", code="invalid_icon", field="icon")
    return icon
