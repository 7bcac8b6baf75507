"""The client's version without importing Django: the server's `config.__version__`, read as text.

A source checkout reads `config/__init__.py` (always in step with the server it ships with); an
installed package falls back to its metadata, which pyproject.toml takes from the same attribute.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

_VERSION_LINE = re.compile(r"""^__version__\s*=\s*["']([^"']+)["']""", re.MULTILINE)


def client_version() -> str:
    source = Path(__file__).resolve().parent.parent / "config" / "__init__.py"
    try:
        match = _VERSION_LINE.search(source.read_text(encoding="utf-8"))
    except OSError:
        match = None
    if match:
        return match.group(1)
    try:
        return metadata.version("knowledge")
    except metadata.PackageNotFoundError:
        return "unknown"
