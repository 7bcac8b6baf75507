"""Escaping for text the CLI prints: titles, paths and server messages are untrusted.

One function decides what a terminal may see. C0 and C1 controls, DEL, Unicode format characters
(bidi overrides, zero-width joiners) and line/paragraph separators are shown as `\\x..` / `\\u....`,
so a hostile title cannot move the cursor, write the clipboard (OSC 52) or forge an "OK" line.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

_KEEP_MULTILINE = {"\n", "\t"}


def _needs_escape(ch: str) -> bool:
    code = ord(ch)
    if code < 0x20 or code == 0x7F or 0x80 <= code <= 0x9F:
        return True
    if 0xD800 <= code <= 0xDFFF:
        return True
    return unicodedata.category(ch) in ("Cf", "Zl", "Zp", "Cs")


def _escape_char(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def escape_text(value: Any, *, multiline: bool = False) -> str:
    """Printable form of untrusted text. `multiline` keeps newlines and tabs (document bodies)."""
    text = value if isinstance(value, str) else str(value)
    if not any(_needs_escape(ch) for ch in text):
        return text
    out = []
    for ch in text:
        if multiline and ch in _KEEP_MULTILINE:
            out.append(ch)
        elif _needs_escape(ch):
            out.append(_escape_char(ch))
        else:
            out.append(ch)
    return "".join(out)


def safe_json(data: Any, *, indent: int | None = 2) -> str:
    """JSON for stdout: readable Unicode, but every control/format character as a \\u escape.

    json.dumps already escapes C0; DEL, C1 and format characters are legal raw in JSON strings,
    so they are escaped here too. The result decodes to exactly the same value.
    """
    text = json.dumps(data, ensure_ascii=False, indent=indent, sort_keys=False)
    if not any(_needs_escape(ch) for ch in text if ch not in "\n "):
        return text
    out = []
    for ch in text:
        if ch == "\n" or not _needs_escape(ch):
            out.append(ch)
        else:
            code = ord(ch)
            if code > 0xFFFF:
                code -= 0x10000
                out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
            else:
                out.append(f"\\u{code:04x}")
    return "".join(out)
