"""Pure helpers for the reader pages: the namespace tree and version diffs (no ORM)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field

from knowledge.rendering import reader_path

DIFF_MAX_CHARS = 2 * 1024 * 1024  # per side; bigger versions are not diffed in the page
DIFF_CONTEXT_LINES = 3


@dataclass
class TreeDocument:
    title: str
    path: str
    icon: str
    url: str
    current: bool = False


@dataclass
class TreeFolder:
    name: str
    path: str
    folders: list[TreeFolder] = field(default_factory=list)
    documents: list[TreeDocument] = field(default_factory=list)
    open: bool = False
    _index: dict[str, TreeFolder] = field(default_factory=dict, repr=False)

    def folder(self, name: str) -> TreeFolder:
        found = self._index.get(name)
        if found is None:
            found = TreeFolder(name=name, path=f"{self.path}/{name}" if self.path else name)
            self._index[name] = found
            self.folders.append(found)
        return found


def build_tree(namespace: str, rows: Iterable[tuple[str, str, str]], current_path: str | None = None) -> TreeFolder:
    """Group (path, title, icon) rows, sorted by path, into folders; open the current one's."""
    root = TreeFolder(name="", path="", open=True)
    for path, title, icon in rows:
        *folders, _leaf = path.split("/")
        node = root
        for name in folders:
            node = node.folder(name)
        is_current = path == current_path
        node.documents.append(
            TreeDocument(title=title, path=path, icon=icon, url=reader_path(namespace, path), current=is_current)
        )
    if current_path:
        node = root
        for name in current_path.split("/")[:-1]:
            node = node._index.get(name)
            if node is None:
                break
            node.open = True
    return root


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "meta", "hunk", "add", "del" or "context"
    text: str


def unified_diff_rows(old: str, new: str, old_label: str, new_label: str) -> list[DiffLine] | None:
    """Unified diff as typed lines (escaped by the template), or None when too large to show."""
    if len(old) > DIFF_MAX_CHARS or len(new) > DIFF_MAX_CHARS:
        return None
    rows: list[DiffLine] = []
    lines = difflib.unified_diff(
        old.splitlines(), new.splitlines(), old_label, new_label, lineterm="", n=DIFF_CONTEXT_LINES
    )
    for line in lines:
        if line.startswith(("---", "+++")) and len(rows) < 2:
            kind = "meta"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "context"
        rows.append(DiffLine(kind=kind, text=line))
    return rows
