"""Heading-aware chunking of markdown for embeddings (pure, no ORM).

Sections follow headings (fenced code never starts a section); long sections split on
paragraphs, then lines, then words, never past `max_tokens`; consecutive chunks overlap;
tiny neighbours under the same heading merge. Hashes are taken over a fence-aware normalised
form so whitespace-only edits keep their hashes and their vectors.
"""

from __future__ import annotations

import hashlib
import math
import re
import uuid
from dataclasses import dataclass, field

CHUNKER_VERSION = "knowledge-markdown-v1"
HASH_NORMALIZATION = "markdown-fence-aware-v1"
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
SLICE_CHARS = 240


@dataclass(frozen=True)
class ChunkingPolicy:
    target_tokens: int = 850
    max_tokens: int = 1200
    overlap_tokens: int = 100
    min_tokens: int = 80


@dataclass
class Chunk:
    ordinal: int
    heading_path: list[str]
    text: str
    kind: str  # "section" or "auto_split"
    anchor: str
    content_hash: str
    start_line: int
    metadata: dict = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text)


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text.strip()) / 4)


def slug(text: str) -> str:
    value = re.sub(r"[^\w\s-]", "", text.lower()).strip()
    return re.sub(r"[\s_]+", "-", value) or "section"


def normalise_for_hash(text: str) -> str:
    """CRLF→LF; outside fences trim trailing spaces and collapse blank runs to two."""
    out: list[str] = []
    fence: str | None = None
    blanks = 0
    for line in text.replace("\r\n", "\n").split("\n"):
        marker = FENCE.match(line)
        if fence:
            out.append(line)
            if marker and marker.group(1)[0] == fence[0] and len(marker.group(1)) >= len(fence):
                fence = None
            continue
        if marker:
            fence = marker.group(1)
            blanks = 0
            out.append(line)
            continue
        line = line.rstrip()
        if not line:
            blanks += 1
            if blanks > 2:
                continue
        else:
            blanks = 0
        out.append(line)
    return "\n".join(out).strip("\n")


def content_hash(text: str) -> str:
    return hashlib.md5(normalise_for_hash(text).encode("utf-8"), usedforsecurity=False).hexdigest()


@dataclass
class _Section:
    path: list[str]
    start_line: int
    lines: list[str]


def _sections(content: str) -> list[_Section]:
    lines = content.replace("\r\n", "\n").split("\n")
    sections: list[_Section] = [_Section([], 1, [])]
    stack: list[tuple[int, str]] = []
    fence: str | None = None
    for number, line in enumerate(lines, start=1):
        marker = FENCE.match(line)
        if fence:
            if marker and marker.group(1)[0] == fence[0] and len(marker.group(1)) >= len(fence):
                fence = None
            sections[-1].lines.append(line)
            continue
        if marker:
            fence = marker.group(1)
            sections[-1].lines.append(line)
            continue
        level, title = 0, ""
        atx = ATX.match(line)
        if atx and (atx.group(2) or "").strip():
            level, title = len(atx.group(1)), atx.group(2).strip()
        elif SETEXT.match(line) and sections[-1].lines and sections[-1].lines[-1].strip():
            previous = sections[-1].lines.pop()
            level, title = (1 if line.strip().startswith("=") else 2), previous.strip()
            number -= 1
        if level:
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            sections.append(_Section([t for _, t in stack], number, [line if atx else f"{'#' * level} {title}"]))
        else:
            sections[-1].lines.append(line)
    return [s for s in sections if "\n".join(s.lines).strip()]


def _split_long(text: str, limit_chars: int) -> list[str]:
    """Paragraphs, then lines, then words, then fixed slices: every piece fits `limit_chars`."""
    if len(text) <= limit_chars:
        return [text]
    for separator in ("\n\n", "\n", " "):
        parts = text.split(separator)
        if len(parts) > 1:
            pieces: list[str] = []
            for part in parts:
                pieces.extend(_split_long(part, limit_chars))
            return _pack(pieces, limit_chars, separator)
    return [text[i : i + SLICE_CHARS] for i in range(0, len(text), SLICE_CHARS)]


def _pack(pieces: list[str], limit_chars: int, separator: str) -> list[str]:
    packed: list[str] = []
    current = ""
    for piece in pieces:
        candidate = f"{current}{separator}{piece}" if current else piece
        if len(candidate) <= limit_chars:
            current = candidate
        else:
            if current:
                packed.append(current)
            current = piece
    if current:
        packed.append(current)
    return packed


def chunk_markdown(content: str, policy: ChunkingPolicy | None = None, *, document_path: str = "") -> list[Chunk]:
    """Split a document into embedding chunks, each prefixed with its heading path."""
    policy = policy or ChunkingPolicy()
    target_chars = policy.target_tokens * 4
    max_chars = policy.max_tokens * 4
    overlap_words = int(policy.overlap_tokens * 0.75)
    drafts: list[tuple[list[str], str, str, int, int, int]] = []  # path, body, kind, line, index, count
    for section in _sections(content):
        body = "\n".join(section.lines).strip("\n")
        prefix_len = len(" > ".join(section.path)) + 2 if section.path else 0
        budget = max(target_chars - prefix_len, 200)
        if len(body) <= budget:
            drafts.append((section.path, body, "section", section.start_line, 0, 1))
            continue
        # Leave room for the overlap so no chunk ends up over max_tokens.
        pieces = _split_long(body, min(budget, max_chars - prefix_len - overlap_words * 8 - 16))
        for index, piece in enumerate(pieces):
            if index and overlap_words:
                tail = " ".join(pieces[index - 1].split()[-overlap_words:])
                piece = f"{tail}\n\n{piece}"
            drafts.append((section.path, piece, "auto_split", section.start_line, index, len(pieces)))
    merged: list[list] = []
    for draft in drafts:
        path, body = draft[0], draft[1]
        if (
            merged
            and merged[-1][0] == path
            and (estimate_tokens(body) < policy.min_tokens or estimate_tokens(merged[-1][1]) < policy.min_tokens)
            and len(merged[-1][1]) + len(body) + 2 + len(" > ".join(path)) + 2 <= max_chars
        ):
            merged[-1][1] = merged[-1][1] + "\n\n" + body
            merged[-1][6] = True
            continue
        merged.append([*draft, False])
    chunks: list[Chunk] = []
    seen: dict[str, int] = {}
    for ordinal, (path, body, kind, line, index, count, was_merged) in enumerate(merged):
        heading = " > ".join(path)
        text = f"{heading}\n\n{body}" if heading else body
        anchor = slug(heading) if heading else "preamble"
        if kind == "auto_split":
            anchor = f"{anchor}-part-{index + 1}"
        seen[anchor] = seen.get(anchor, 0) + 1
        if seen[anchor] > 1:
            anchor = f"{anchor}-{seen[anchor]}"
        chunks.append(
            Chunk(
                ordinal=ordinal,
                heading_path=list(path),
                text=text,
                kind=kind,
                anchor=anchor,
                content_hash=content_hash(text),
                start_line=line,
                metadata={
                    "chunker_version": CHUNKER_VERSION,
                    "hash_normalization": HASH_NORMALIZATION,
                    "estimated_tokens": estimate_tokens(text),
                    "split_index": index,
                    "split_count": count,
                    "merged": was_merged,
                    "document_path": document_path,
                },
            )
        )
    return chunks


def chunk_id(version_id: str, chunk: Chunk) -> uuid.UUID:
    """Deterministic id: the same version and chunk always get the same id."""
    digest = hashlib.sha256(f"{version_id}:{chunk.ordinal}:{chunk.anchor}:{chunk.content_hash}".encode()).digest()
    return uuid.UUID(bytes=digest[:16], version=5)
