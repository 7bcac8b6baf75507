"""Repository format version 2: pure, deterministic code (no ORM, no I/O, no Django).

A namespace becomes a folder that reads well in git:

    manifest.yaml          format, version, namespace, omissions, the sorted list of document files
    docs/<path>.md         a generated YAML header between `---` lines, then the body exactly as stored
    .agor/                 local checkpoint, snapshot and refresh state (git-ignored)
    .gitignore, .gitattributes

Everything here is shared by the CLI (export, import, validate) and the server (limits, link
targets), so the same bytes are produced and accepted everywhere. YAML is read at the event
level with a bounded, JSON-compatible schema, because PyYAML's safe_load silently keeps duplicate
keys, expands aliases and honours merge keys and YAML 1.1 implicit types.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import posixpath
import re
import unicodedata
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

import yaml

# --- constants -----------------------------------------------------------------------------

NAMESPACE_FORMAT = "agor-knowledge-namespace"
DOCUMENT_FORMAT = "agor-knowledge-document"
VERSION = 2
DOCS_DIR = "docs"
MANIFEST_FILE = "manifest.yaml"
LEGACY_MANIFEST_FILE = "manifest.json"
STATE_DIR = ".agor"
LOCK_DIR = ".agor-lock"
GITIGNORE = ".gitignore"
GITATTRIBUTES = ".gitattributes"
GITIGNORE_TEXT = ".agor/\n.agor-lock/\n"
GITATTRIBUTES_TEXT = "docs/**/*.md -text\nmanifest.yaml text eol=lf\n"

MIB = 1024 * 1024
MAX_DOCUMENTS = 10_000
MAX_DOCUMENT_BYTES = 10 * MIB
MAX_TOTAL_BYTES = 100 * MIB
MAX_MANIFEST_BYTES = 10 * MIB
MAX_HEADER_BYTES = 10 * MIB  # aggregate of every serialized document header
MAX_REQUEST_BYTES = 9 * MIB  # below the deployment's JSON body ceiling
MAX_TOTAL_REQUEST_BYTES = 110 * MIB
MAX_FILE_BYTES = MAX_DOCUMENT_BYTES + MAX_HEADER_BYTES
MAX_YAML_DEPTH = 20
MAX_YAML_NODES = 200_000
MAX_OMISSIONS = 20
MAX_FILE_PATH_BYTES = 2048
MAX_COMPONENT_BYTES = 240
DEFAULT_COMPONENT_BYTES = 160
MAX_PATH_LENGTH = 1024
MAX_SEGMENT_LENGTH = 255
MAX_TITLE_LENGTH = 500
MAX_ICON_CODE_POINTS = 32
MAX_INT = 2**63
SUFFIX_HEX = 10
PLAN_EPOCH = "1970-01-01T00:00:00Z"

DOCUMENT_KINDS = ("doc", "memory", "skill", "prompt", "guide", "decision", "bundle", "external")
DOCUMENT_STATUSES = ("draft", "published")
OMISSIONS = (
    "history",
    "archived documents",
    "ACLs",
    "explicit graph edges",
    "asset bytes",
    "authoritative source attribution",
)
SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
KEY = re.compile(r"^d[0-9]{6}$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
_FORBIDDEN = set('<>:"\\|?*')
_WINDOWS_RESERVED = re.compile(r"^(con|prn|aux|nul|com[1-9]|lpt[1-9])(\..*)?$", re.IGNORECASE)

YAML_ERROR = (
    "Invalid Knowledge YAML: use unique keys and bounded JSON values; aliases, tags and merge keys are not supported"
)


class FormatError(Exception):
    """A repository that must not be imported. Messages never echo file content."""

    def __init__(self, message: str, *, code: str = "invalid_repository", file: str | None = None) -> None:
        self.message = message
        self.code = code
        self.file = file
        super().__init__(f"{file}: {message}" if file else message)


# --- hashing and canonical JSON ------------------------------------------------------------


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no whitespace, UTF-8: the one encoding that hashes and limits are measured on."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")


def sha256_hex(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def json_depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((json_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((json_depth(v) for v in value), default=0)
    return 0


# --- bounded YAML --------------------------------------------------------------------------

_NULL = re.compile(r"^(?:null|Null|NULL|~|)$")
_TRUE = re.compile(r"^(?:true|True|TRUE)$")
_FALSE = re.compile(r"^(?:false|False|FALSE)$")
_INT = re.compile(r"^-?(?:0|[1-9][0-9]*)$")
_FLOAT = re.compile(r"^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?$")
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _plain_scalar(text: str, line: int | None) -> Any:
    """The JSON schema for unquoted scalars: `no`, `012`, `1:30` and dates stay strings."""
    if _NULL.match(text):
        return None
    if _TRUE.match(text):
        return True
    if _FALSE.match(text):
        return False
    if _INT.match(text):
        number = int(text)
        if abs(number) >= MAX_INT:
            raise _yaml_error(line)
        return number
    if _FLOAT.match(text):
        value = float(text)
        if value in (float("inf"), float("-inf")) or value != value:
            raise _yaml_error(line)
        return value
    return text


def _yaml_error(line: int | None = None, file: str | None = None) -> FormatError:
    where = f" (line {line + 1})" if line is not None else ""
    return FormatError(YAML_ERROR + where, code="invalid_yaml", file=file)


def load_yaml(text: str, *, max_bytes: int = MAX_MANIFEST_BYTES, file: str | None = None) -> Any:
    """Parse one YAML document into JSON values, rejecting everything a safe loader lets through.

    Refused: more than one document, explicit document ends, anchors and aliases, any tag, merge
    keys, duplicate or non-scalar keys, nesting deeper than 20, more than 200,000 nodes, and
    integers or floats JSON cannot carry. Errors name the line, never the content.
    """
    if len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise FormatError("YAML exceeds the size limit.", code="yaml_too_large", file=file)
    stack: list[Any] = []  # containers under construction; dict entries carry a pending key
    keys: list[Any] = []
    result: Any = None
    have_result = False
    documents = 0
    nodes = 0

    def add(value: Any, line: int | None) -> None:
        nonlocal result, have_result
        if not stack:
            result, have_result = value, True
            return
        top = stack[-1]
        if isinstance(top, list):
            top.append(value)
            return
        pending = keys[-1]
        if pending is None:
            raise _yaml_error(line, file)  # a collection used as a key
        if pending in top:
            raise _yaml_error(line, file)  # duplicate key
        top[pending] = value
        keys[-1] = None

    try:
        for event in yaml.parse(text, Loader=_Loader):
            line = event.start_mark.line if event.start_mark is not None else None
            if isinstance(event, (yaml.StreamStartEvent, yaml.StreamEndEvent)):
                continue
            if isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise _yaml_error(line, file)
                continue
            if isinstance(event, yaml.DocumentEndEvent):
                if event.explicit:
                    raise _yaml_error(line, file)
                continue
            if isinstance(event, yaml.AliasEvent):
                raise _yaml_error(line, file)
            if getattr(event, "anchor", None) is not None or getattr(event, "tag", None) is not None:
                raise _yaml_error(line, file)
            nodes += 1
            if nodes > MAX_YAML_NODES:
                raise _yaml_error(line, file)
            if isinstance(event, yaml.ScalarEvent):
                plain = event.style in (None, "")
                top = stack[-1] if stack else None
                if isinstance(top, dict) and keys[-1] is None:
                    if plain and event.value == "<<":
                        raise _yaml_error(line, file)  # merge key
                    if event.value in top:
                        raise _yaml_error(line, file)
                    keys[-1] = event.value
                    continue
                add(_plain_scalar(event.value, line) if plain else event.value, line)
            elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                top = stack[-1] if stack else None
                if isinstance(top, dict) and keys[-1] is None:
                    raise _yaml_error(line, file)  # complex key
                if len(stack) >= MAX_YAML_DEPTH:
                    raise _yaml_error(line, file)
                container: Any = {} if isinstance(event, yaml.MappingStartEvent) else []
                stack.append(container)
                keys.append(None)
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                container = stack.pop()
                keys.pop()
                add(container, line)
    except yaml.YAMLError:
        raise _yaml_error(None, file) from None
    except RecursionError:
        raise _yaml_error(None, file) from None
    if not have_result:
        return None
    return result


# Plain (unquoted) scalars: a conservative alphabet, and only when every YAML reader (this one,
# and YAML 1.1 tools such as PyYAML) would read the text back as the same string.
_PLAIN_ASCII = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_ ./@+~()-")
_YAML_11 = yaml.resolver.Resolver()
_STR_TAG = "tag:yaml.org,2002:str"
_NOT_YAML_PRINTABLE = re.compile(
    "[^\x09\x0a\x0d\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)


def _plain_char(ch: str) -> bool:
    if ch in _PLAIN_ASCII:
        return True
    return ord(ch) >= 0xA0 and unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs")


def _yaml_string(text: str) -> str:
    if (
        text
        and (text[0].isalnum() or text[0] == "_" or (ord(text[0]) >= 0xA0 and _plain_char(text[0])))
        and not text.endswith(" ")
        and all(_plain_char(ch) for ch in text)
        and _plain_scalar(text, None) == text
        and _YAML_11.resolve(yaml.ScalarNode, text, (True, False)) == _STR_TAG
    ):
        return text
    # A JSON string is a valid YAML double-quoted scalar; characters YAML may not carry raw
    # (C1, DEL, surrogates, line/paragraph separators, BOM) become \u escapes.
    quoted = json.dumps(text, ensure_ascii=False)
    return _NOT_YAML_PRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", quoted)


def _yaml_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise FormatError("Only finite numbers can be written.", code="invalid_value")
        text = repr(value)
        if "e" in text and "." not in text:
            mantissa, exponent = text.split("e")
            text = f"{mantissa}.0e{exponent}"  # YAML 1.1 readers need the dot to see a float
        return text
    if isinstance(value, str):
        return _yaml_string(value)
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    raise FormatError("Only JSON values can be written.", code="invalid_value")


def _yaml_mapping(data: dict[str, Any], indent: int) -> Iterator[str]:
    pad = " " * indent
    for key in sorted(data):
        if not isinstance(key, str):
            raise FormatError("Mapping keys must be strings.", code="invalid_value")
        value = data[key]
        name = _yaml_string(key)
        if isinstance(value, dict) and value:
            yield f"{pad}{name}:\n"
            yield from _yaml_mapping(value, indent + 2)
        elif isinstance(value, list) and value:
            yield f"{pad}{name}:\n"
            yield from _yaml_sequence(value, indent)
        else:
            yield f"{pad}{name}: {_yaml_scalar(value)}\n"


def _yaml_sequence(items: list[Any], indent: int) -> Iterator[str]:
    pad = " " * indent
    for value in items:
        if isinstance(value, (dict, list)) and value:
            inner = list(
                _yaml_mapping(value, indent + 2) if isinstance(value, dict) else _yaml_sequence(value, indent + 2)
            )
            yield f"{pad}- {inner[0][indent + 2 :]}"
            yield from inner[1:]
        else:
            yield f"{pad}- {_yaml_scalar(value)}\n"


def dump_yaml(value: Any) -> str:
    """Deterministic block YAML for JSON values: sorted keys, indent 2, one scalar per line.

    A small emitter of our own (PyYAML's pure-Python one is the slowest step of an export, and
    libyaml's output may differ between machines). Strings are plain when unambiguous, else
    JSON-quoted; no line can ever read `---` or `...`, so a header cannot end early.
    """
    if isinstance(value, dict) and value:
        return "".join(_yaml_mapping(value, 0))
    if isinstance(value, list) and value:
        return "".join(_yaml_sequence(value, 0))
    return _yaml_scalar(value) + "\n"


# --- logical Knowledge paths ---------------------------------------------------------------


def path_problem(path: Any) -> str | None:
    """Why a logical document path is not in normal form (the server's rules), or None."""
    if not isinstance(path, str) or not path:
        return "a document path is required"
    if path != path.strip() or path.startswith("/") or "//" in path:
        return "the path is not normalised"
    if len(path) > MAX_PATH_LENGTH:
        return "the path is too long"
    for segment in path.split("/"):
        if segment in ("", ".", ".."):
            return "empty, '.' or '..' segments are not allowed"
        if any(ch in _FORBIDDEN or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in segment):
            return "a segment contains a forbidden character"
        if segment.endswith((" ", ".")):
            return "a segment ends with a space or a period"
        if _WINDOWS_RESERVED.match(segment):
            return "a segment is a reserved name"
        if len(segment) > MAX_SEGMENT_LENGTH:
            return "a segment is too long"
    return None


def fold(name: str) -> str:
    """Case- and Unicode-folded comparison key: NFD, upper then lower, default-ignorables dropped."""
    decomposed = unicodedata.normalize("NFD", name)
    visible = "".join(ch for ch in decomposed if unicodedata.category(ch) != "Cf" and not 0xFE00 <= ord(ch) <= 0xFE0F)
    return unicodedata.normalize("NFC", visible.upper().lower())


def _truncate_utf8(text: str, limit: int) -> str:
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text
    return encoded[:limit].decode("utf-8", "ignore")


# --- filename mapping ----------------------------------------------------------------------


@dataclass
class _Node:
    logical: str  # full logical path of this node
    component: str  # last logical component
    is_file: bool
    children: dict[str, _Node] = field(default_factory=dict)  # keyed by logical component + kind


def _default_name(component: str, is_file: bool) -> str:
    name = unicodedata.normalize("NFC", component)
    if name.startswith("."):
        name = "_" + name[1:]
    if is_file:
        stem = name[:-3] if name.endswith(".md") else name
        return _truncate_utf8(stem, DEFAULT_COMPONENT_BYTES - 3) + ".md"
    return _truncate_utf8(name, DEFAULT_COMPONENT_BYTES)


def _with_suffix(name: str, is_file: bool, digest: str, length: int) -> str:
    suffix = "--" + digest[:length]
    if is_file:
        stem = name[:-3]
        return _truncate_utf8(stem, MAX_COMPONENT_BYTES - 3 - len(suffix)) + suffix + ".md"
    return _truncate_utf8(name, MAX_COMPONENT_BYTES - len(suffix)) + suffix


def _node_identity(node: _Node) -> str:
    return sha256_hex(("file:" if node.is_file else "dir:") + node.logical)


def map_files(paths: Iterable[str], previous: dict[str, str] | None = None) -> dict[str, str]:
    """Logical document path -> repository file (`docs/...md`), deterministic for any input order.

    Names are the NFC path components, `.md` appended to extensionless documents, a leading `.`
    turned into `_`, components cut to 160 bytes. Names that collide under case/Unicode folding,
    file/folder conflicts, and names that had to change get `--<sha256 prefix>` suffixes (10 hex
    digits, longer until unique); an unchanged name that is the only exact one in its collision
    group keeps it. Names from the previous mapping are reserved first, so a new collision never
    renames an established file.
    """
    previous = previous or {}
    root = _Node("", "", False)
    for path in sorted(set(paths)):
        parts = path.split("/")
        node = root
        for index, part in enumerate(parts):
            is_file = index == len(parts) - 1
            key = ("f:" if is_file else "d:") + part
            child = node.children.get(key)
            if child is None:
                child = _Node("/".join(parts[: index + 1]), part, is_file)
                node.children[key] = child
            node = child
    # Established physical names per logical node, from the previous mapping.
    established: dict[tuple[str, bool], str] = {}
    conflicting: set[tuple[str, bool]] = set()
    for logical, file_path in previous.items():
        if not isinstance(file_path, str) or not file_path.startswith(DOCS_DIR + "/"):
            continue
        physical = file_path[len(DOCS_DIR) + 1 :].split("/")
        parts = logical.split("/")
        if len(physical) != len(parts):
            continue
        for index in range(len(parts)):
            node_key = ("/".join(parts[: index + 1]), index == len(parts) - 1)
            name = physical[index]
            if established.get(node_key, name) != name:
                conflicting.add(node_key)
            established[node_key] = name
    for node_key in conflicting:
        established.pop(node_key, None)

    result: dict[str, str] = {}

    def assign(node: _Node, prefix: str) -> None:
        children = sorted(node.children.values(), key=lambda n: (n.logical, n.is_file))
        names: dict[int, str] = {}
        taken: set[str] = set()
        # 1. established names, when valid and unique among themselves
        kept: dict[str, list[int]] = {}
        for index, child in enumerate(children):
            name = established.get((child.logical, child.is_file))
            if name is not None and _valid_component(name, child.is_file):
                kept.setdefault(fold(name), []).append(index)
        for folded, members in kept.items():
            if len(members) == 1:
                names[members[0]] = established[(children[members[0]].logical, children[members[0]].is_file)]
                taken.add(folded)
        # 2. default names: unique and unchanged ones are reserved before any suffix is generated
        groups: dict[str, list[int]] = {}
        for index, child in enumerate(children):
            if index in names:
                continue
            groups.setdefault(fold(_default_name(child.component, child.is_file)), []).append(index)
        pending: list[int] = []
        for folded, members in groups.items():
            exact = [i for i in members if _is_exact(children[i])]
            keeper = exact[0] if len(exact) == 1 and folded not in taken else None
            if keeper is None and len(members) == 1 and folded not in taken and _is_unchanged(children[members[0]]):
                keeper = members[0]
            for index in members:
                if index == keeper:
                    names[index] = _default_name(children[index].component, children[index].is_file)
                    taken.add(folded)
                else:
                    pending.append(index)
        # 3. suffixed names, growing until unique in this folder
        for index in sorted(pending, key=lambda i: (children[i].logical, children[i].is_file)):
            child = children[index]
            base = _default_name(child.component, child.is_file)
            digest = _node_identity(child)
            length = SUFFIX_HEX
            candidate = _with_suffix(base, child.is_file, digest, length)
            while fold(candidate) in taken and length < len(digest):
                length += 1
                candidate = _with_suffix(base, child.is_file, digest, length)
            names[index] = candidate
            taken.add(fold(candidate))
        for index, child in enumerate(children):
            physical = f"{prefix}/{names[index]}"
            if child.is_file:
                result[child.logical] = physical
            else:
                assign(child, physical)

    assign(root, DOCS_DIR)
    return result


def _is_unchanged(node: _Node) -> bool:
    """The default name is the component itself, or the component plus `.md` for a document."""
    default = _default_name(node.component, node.is_file)
    return default == node.component or (node.is_file and default == node.component + ".md")


def _is_exact(node: _Node) -> bool:
    return _default_name(node.component, node.is_file) == node.component


def _valid_component(name: str, is_file: bool) -> bool:
    if not name or name.startswith(".") or name != unicodedata.normalize("NFC", name):
        return False
    if len(name.encode("utf-8")) > MAX_COMPONENT_BYTES or name in (".", ".."):
        return False
    if any(ch in _FORBIDDEN or ord(ch) < 0x20 or ord(ch) == 0x7F or ch == "/" for ch in name):
        return False
    if fold(name).startswith(".") or _WINDOWS_RESERVED.match(name) or name.endswith((" ", ".")):
        return False
    return not is_file or (name.endswith(".md") and len(name) > 3)


def file_problem(file_path: Any) -> str | None:
    """Why a manifest entry is not a safe repository document file, or None."""
    if not isinstance(file_path, str) or not file_path:
        return "a file path is required"
    if len(file_path.encode("utf-8", "surrogatepass")) > MAX_FILE_PATH_BYTES:
        return "the file path is too long"
    if "\\" in file_path or "\x00" in file_path:
        return "the file path contains a backslash or NUL"
    parts = file_path.split("/")
    if parts[0] != DOCS_DIR or len(parts) < 2:
        return "document files live under docs/"
    for index, part in enumerate(parts[1:], start=1):
        is_file = index == len(parts) - 1
        if part in ("", ".", ".."):
            return "empty, '.' or '..' components are not allowed"
        if part.startswith(".") or fold(part).startswith("."):
            return "hidden components (such as .git) are not allowed"
        if any(ch in _FORBIDDEN for ch in part):
            return 'a component contains < > : " \\ | ? or *'
        if part != unicodedata.normalize("NFC", part):
            return "components must be NFC-normalised"
        if len(part.encode("utf-8", "surrogatepass")) > MAX_COMPONENT_BYTES:
            return "a component is too long"
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in part):
            return "a component contains a control character"
        if is_file and (not part.endswith(".md") or part == ".md"):
            return "document files end in .md"
    return None


def check_file_list(files: list[str]) -> None:
    """Listed files are unique, safe, and free of case-folded file/file and file/folder collisions."""
    seen: dict[str, str] = {}
    folders: dict[str, str] = {}
    for file_path in files:
        problem = file_problem(file_path)
        if problem:
            raise FormatError(f"Unsafe document file name in the manifest: {problem}.", code="unsafe_name")
        key = fold(file_path)
        if key in seen:
            raise FormatError("The manifest lists two files that collide (case/Unicode).", code="file_collision")
        seen[key] = file_path
        parts = file_path.split("/")
        for index in range(2, len(parts)):
            folders[fold("/".join(parts[:index]))] = file_path
    for key in seen:
        if key in folders:
            raise FormatError("A manifest file collides with a folder of another file.", code="file_collision")


# --- manifest and headers ------------------------------------------------------------------


@dataclass(frozen=True)
class NamespaceInfo:
    slug: str
    display_name: str
    description: str | None
    provenance: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "slug": self.slug,
            "display_name": self.display_name,
            "description": self.description,
            "provenance": self.provenance,
        }


@dataclass(frozen=True)
class Manifest:
    namespace: NamespaceInfo
    documents: list[str]
    omissions: list[str]


@dataclass(frozen=True)
class Header:
    id: str
    path: str
    title: str
    icon: str | None
    kind: str
    status: str
    frontmatter: dict[str, Any] | None
    provenance: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": DOCUMENT_FORMAT,
            "version": VERSION,
            "agor": {
                "id": self.id,
                "path": self.path,
                "title": self.title,
                "icon": self.icon,
                "kind": self.kind,
                "status": self.status,
            },
            "frontmatter": self.frontmatter,
            "provenance": self.provenance,
        }


def render_manifest(manifest: Manifest) -> str:
    return dump_yaml(
        {
            "format": NAMESPACE_FORMAT,
            "version": VERSION,
            "namespace": manifest.namespace.as_dict(),
            "documents": sorted(manifest.documents),
            "omissions": list(manifest.omissions),
        }
    )


def _require_keys(data: Any, allowed: set[str], required: set[str], what: str, file: str | None) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise FormatError(f"{what} must be a mapping.", code="invalid_schema", file=file)
    if set(data) - allowed:
        raise FormatError(f"{what} has unsupported fields.", code="invalid_schema", file=file)
    if required - set(data):
        raise FormatError(f"{what} is missing required fields.", code="invalid_schema", file=file)
    return data


def _check_version(data: dict[str, Any], expected_format: str, file: str | None) -> None:
    if data.get("format") != expected_format:
        raise FormatError("Not an Agor Knowledge repository file (format).", code="invalid_schema", file=file)
    if data.get("version") == 1:
        raise FormatError(
            "Unsupported Knowledge export version 1; make a fresh export with a CLI that writes version 2.",
            code="unsupported_version",
            file=file,
        )
    if data.get("version") != VERSION or isinstance(data.get("version"), bool):
        raise FormatError("Unsupported repository format version.", code="unsupported_version", file=file)


def parse_manifest(text: str) -> Manifest:
    """manifest.yaml -> Manifest, strictly: known fields only, bounded lists, safe file names."""
    data = load_yaml(text, max_bytes=MAX_MANIFEST_BYTES, file=MANIFEST_FILE)
    if isinstance(data, dict):
        _check_version(data, NAMESPACE_FORMAT, MANIFEST_FILE)
    data = _require_keys(
        data,
        {"format", "version", "namespace", "documents", "omissions"},
        {"format", "version", "namespace", "documents"},
        "manifest.yaml",
        MANIFEST_FILE,
    )
    _check_version(data, NAMESPACE_FORMAT, MANIFEST_FILE)
    ns = _require_keys(
        data["namespace"],
        {"slug", "display_name", "description", "provenance"},
        {"slug"},
        "manifest namespace",
        MANIFEST_FILE,
    )
    slug = ns.get("slug")
    if not isinstance(slug, str) or not SLUG.match(slug):
        raise FormatError("The manifest namespace slug is invalid.", code="invalid_schema", file=MANIFEST_FILE)
    display_name = ns.get("display_name") or slug
    description = ns.get("description")
    provenance = ns.get("provenance") or {}
    if not isinstance(display_name, str) or len(display_name) > 200:
        raise FormatError("The namespace display name is invalid.", code="invalid_schema", file=MANIFEST_FILE)
    if description is not None and (not isinstance(description, str) or len(description) > 10_000):
        raise FormatError("The namespace description is invalid.", code="invalid_schema", file=MANIFEST_FILE)
    if not isinstance(provenance, dict):
        raise FormatError("The namespace provenance must be a mapping.", code="invalid_schema", file=MANIFEST_FILE)
    documents = data["documents"]
    if documents is None:
        documents = []
    if not isinstance(documents, list) or not all(isinstance(d, str) for d in documents):
        raise FormatError("manifest documents must be a list of file paths.", code="invalid_schema", file=MANIFEST_FILE)
    if len(documents) > MAX_DOCUMENTS:
        raise FormatError(
            f"The manifest lists more than {MAX_DOCUMENTS} documents.", code="limit_exceeded", file=MANIFEST_FILE
        )
    check_file_list(documents)
    omissions = data.get("omissions") or []
    if (
        not isinstance(omissions, list)
        or len(omissions) > MAX_OMISSIONS
        or not all(isinstance(o, str) and len(o) <= 200 for o in omissions)
    ):
        raise FormatError(
            "manifest omissions must be at most 20 short strings.", code="invalid_schema", file=MANIFEST_FILE
        )
    return Manifest(NamespaceInfo(slug, display_name, description, provenance), list(documents), list(omissions))


_HEADER_OPEN = re.compile(r"---[ \t]*\r?\n")
_HEADER_CLOSE = re.compile(r"^---[ \t]*(?:\r?\n|\Z)", re.MULTILINE)


def split_document(text: str, *, file: str | None = None) -> tuple[str, str]:
    """(header YAML, body). The header opens at byte 0 (a BOM allowed) and closes at the next `---`."""
    if text.startswith("\ufeff"):
        text = text[1:]
    opening = _HEADER_OPEN.match(text)
    if not opening:
        raise FormatError("The document has no repository header.", code="missing_header", file=file)
    closing = _HEADER_CLOSE.search(text, opening.end())
    if not closing:
        raise FormatError("The document header is not closed with ---.", code="missing_header", file=file)
    return text[opening.end() : closing.start()], text[closing.end() :]


def render_document(header: Header, body: str) -> str:
    return "---\n" + dump_yaml(header.as_dict()) + "---\n" + body


def parse_header(yaml_text: str, *, file: str | None = None) -> Header:
    """A document header, validated field by field (ids lowercased, paths in normal form)."""
    data = load_yaml(yaml_text, max_bytes=MAX_HEADER_BYTES, file=file)
    if isinstance(data, dict):
        _check_version(data, DOCUMENT_FORMAT, file)
    data = _require_keys(
        data,
        {"format", "version", "agor", "frontmatter", "provenance"},
        {"format", "version", "agor"},
        "The header",
        file,
    )
    _check_version(data, DOCUMENT_FORMAT, file)
    agor = _require_keys(
        data["agor"], {"id", "path", "title", "icon", "kind", "status"}, {"id", "path"}, "The agor block", file
    )
    raw_id = agor["id"]
    try:
        doc_id = str(uuid.UUID(str(raw_id))) if isinstance(raw_id, str) else None
    except ValueError:
        doc_id = None
    if doc_id is None:
        raise FormatError("agor.id must be a UUID string.", code="invalid_schema", file=file)
    path = agor["path"]
    problem = path_problem(path)
    if problem:
        raise FormatError(f"agor.path is invalid: {problem}.", code="invalid_path", file=file)
    title = agor.get("title")
    if title is None or title == "":
        title = _title_from_path(path)
    if not isinstance(title, str) or len(title) > MAX_TITLE_LENGTH or not title.strip() or "\x00" in title:
        raise FormatError(
            "agor.title must be a non-empty string of at most 500 characters.", code="invalid_schema", file=file
        )
    icon = agor.get("icon")
    if icon is not None and (not isinstance(icon, str) or len(icon.strip()) > MAX_ICON_CODE_POINTS or "\x00" in icon):
        raise FormatError("agor.icon must be a short string or null.", code="invalid_schema", file=file)
    kind = agor.get("kind", "doc")
    status = agor.get("status", "published")
    if kind not in DOCUMENT_KINDS:
        raise FormatError("agor.kind is not a known document kind.", code="invalid_schema", file=file)
    if status not in DOCUMENT_STATUSES:
        raise FormatError("agor.status must be draft or published.", code="invalid_schema", file=file)
    frontmatter = data.get("frontmatter")
    if frontmatter is not None and not isinstance(frontmatter, dict):
        raise FormatError("frontmatter must be a mapping or null.", code="invalid_schema", file=file)
    provenance = data.get("provenance") or {}
    if not isinstance(provenance, dict):
        raise FormatError("provenance must be a mapping.", code="invalid_schema", file=file)
    return Header(doc_id, path, title, (icon or "").strip() or None, kind, status, frontmatter, provenance)


def _title_from_path(path: str) -> str:
    leaf = path.rsplit("/", 1)[-1]
    leaf = re.sub(r"\.(md|markdown)$", "", leaf, flags=re.IGNORECASE)
    return re.sub(r"[-_]+", " ", leaf).strip() or "Untitled"


# --- markdown link destinations ------------------------------------------------------------


@dataclass(frozen=True)
class Destination:
    """One link destination in a body: `body[start:end]` is its spelling (angle brackets excluded)."""

    start: int
    end: int
    text: str
    kind: str  # "inline", "definition" or "autolink"
    angle: bool = False


_FENCE_OPEN = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_LIST_ITEM = re.compile(r"^ {0,3}(?:[-*+]|[0-9]{1,9}[.)])(?:[ \t]|$)")
_DEFINITION = re.compile(r" {0,3}\[((?:[^\]\\\n]|\\.){1,999})\]:[ \t]*(?:\n[ \t]*)?")
_AUTOLINK = re.compile(r"<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^<>\x00-\x20]*)>")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _lines(body: str) -> list[tuple[int, str]]:
    offsets = []
    position = 0
    for line in body.splitlines(keepends=True):
        offsets.append((position, line))
        position += len(line)
    return offsets


def _strip_eol(line: str) -> str:
    return line.rstrip("\r\n")


def _text_regions(body: str) -> list[tuple[int, int]]:
    """Spans of the body that are prose (not front matter, fenced or indented code)."""
    lines = _lines(body)
    regions: list[tuple[int, int]] = []
    index = 0
    # Leading YAML front matter in the body is data, not markdown.
    if lines and _strip_eol(lines[0][1]).lstrip("\ufeff") == "---":
        for j in range(1, len(lines)):
            if _strip_eol(lines[j][1]) in ("---", "..."):
                index = j + 1
                break
    fence: tuple[str, int] | None = None
    region_start: int | None = None
    previous_blank = True
    indented_code = False
    in_list = False
    for offset, raw in lines[index:]:
        line = _strip_eol(raw)
        blank = not line.strip()
        if fence is not None:
            code = True
            stripped = line.lstrip(" ")
            closes = len(line) - len(stripped) <= 3 and stripped.startswith(fence[0] * fence[1])
            if closes and not stripped.rstrip().strip(fence[0]):
                fence = None
        else:
            opening = _FENCE_OPEN.match(line)
            if opening and not (opening.group(2)[0] == "`" and "`" in opening.group(3)):
                fence = (opening.group(2)[0], len(opening.group(2)))
                code = True
                indented_code = False
            elif not blank and line.startswith(("    ", "\t")) and (previous_blank or indented_code) and not in_list:
                code = True
                indented_code = True
            else:
                code = False
                if not blank:
                    indented_code = False
        if not code and not blank:
            if _LIST_ITEM.match(line):
                in_list = True
            elif previous_blank and not line.startswith((" ", "\t")):
                in_list = False
        if code:
            if region_start is not None:
                regions.append((region_start, offset))
                region_start = None
        elif region_start is None:
            region_start = offset
        previous_blank = blank
    if region_start is not None:
        regions.append((region_start, len(body)))
    return regions


def _parse_inline_destination(body: str, start: int, stop: int) -> tuple[int, int, bool, int] | None:
    """Parse `(dest "title")` starting after `(`: (dest_start, dest_end, angle, close_index)."""
    i = start
    newline_seen = False
    while i < stop and body[i] in " \t\n":
        if body[i] == "\n":
            if newline_seen:
                return None
            newline_seen = True
        i += 1
    if i < stop and body[i] == "<":
        j = i + 1
        while j < stop and body[j] not in "<>\n":
            if body[j] == "\\":
                j += 1
            j += 1
        if j >= stop or body[j] != ">":
            return None
        dest_start, dest_end, angle = i + 1, j, True
        i = j + 1
    else:
        depth = 0
        j = i
        while j < stop:
            ch = body[j]
            if ch == "\\" and j + 1 < stop:
                j += 2
                continue
            if ch in " \t\n" or ord(ch) < 0x20:
                break
            if ch == "(":
                depth += 1
            elif ch == ")":
                if depth == 0:
                    break
                depth -= 1
            j += 1
        if depth:
            return None
        dest_start, dest_end, angle = i, j, False
        i = j
    # optional title
    k = i
    while k < stop and body[k] in " \t\n":
        k += 1
    if k < stop and body[k] in "\"'(" and k > i:
        closer = ")" if body[k] == "(" else body[k]
        m = k + 1
        while m < stop and body[m] != closer:
            if body[m] == "\\":
                m += 1
            m += 1
        if m >= stop:
            return None
        k = m + 1
        while k < stop and body[k] in " \t\n":
            k += 1
    if k < stop and body[k] == ")":
        return dest_start, dest_end, angle, k
    return None


_INLINE_SPECIAL = re.compile(r"[\\`<\[\]]|\n[ \t\r]*(?=\n)")


def _scan_inline(body: str, start: int, stop: int) -> Iterator[Destination]:
    """Inline destinations, jumping from one interesting character to the next."""
    i = start
    open_brackets = 0
    search = _INLINE_SPECIAL.search
    while True:
        match = search(body, i, stop)
        if match is None:
            return
        i = match.start()
        ch = body[i]
        if ch == "\n":
            open_brackets = 0  # a blank line ends the paragraph
            i = match.end()
            continue
        if ch == "\\":
            i += 2
            continue
        if ch == "`":
            run = i
            while run < stop and body[run] == "`":
                run += 1
            ticks = body[i:run]
            close = body.find(ticks, run, stop)
            while close != -1 and close + len(ticks) < stop and body[close + len(ticks)] == "`":
                close = body.find(ticks, close + len(ticks) + 1, stop)
            i = run if close == -1 else close + len(ticks)
            continue
        if ch == "<":
            autolink = _AUTOLINK.match(body, i, stop)
            if autolink:
                yield Destination(autolink.start(1), autolink.end(1), autolink.group(1), "autolink", True)
                i = autolink.end()
                continue
        elif ch == "[":
            open_brackets += 1
        elif ch == "]" and open_brackets:
            open_brackets -= 1
            if i + 1 < stop and body[i + 1] == "(":
                parsed = _parse_inline_destination(body, i + 2, stop)
                if parsed:
                    dest_start, dest_end, angle, close = parsed
                    if dest_end > dest_start:
                        yield Destination(dest_start, dest_end, body[dest_start:dest_end], "inline", angle)
                    i = close + 1
                    continue
        i += 1


def find_destinations(body: str) -> list[Destination]:
    """Markdown link, image and reference-definition destinations outside code and front matter."""
    found: list[Destination] = []
    for start, stop in _text_regions(body):
        definitions: list[Destination] = []
        skip_until = start
        # Reference definitions start a line.
        for offset, _raw in _lines(body[start:stop]):
            line_start = start + offset
            if line_start < skip_until:
                continue
            match = _DEFINITION.match(body, line_start, stop)
            if not match:
                continue
            i = match.end()
            if i < stop and body[i] == "<":
                close = body.find(">", i + 1, stop)
                newline = body.find("\n", i + 1, stop)
                if close == -1 or (newline != -1 and newline < close):
                    continue
                definitions.append(Destination(i + 1, close, body[i + 1 : close], "definition", True))
                skip_until = close
            else:
                j = i
                while j < stop and body[j] not in " \t\r\n":
                    j += 1
                if j > i:
                    definitions.append(Destination(i, j, body[i:j], "definition", False))
                    skip_until = j
        starts = [d.start for d in definitions]
        for destination in _scan_inline(body, start, stop):
            at = bisect.bisect_right(starts, destination.start) - 1
            if at >= 0 and definitions[at].start <= destination.start < definitions[at].end + 1:
                continue
            found.append(destination)
        found.extend(definitions)
    found.sort(key=lambda d: d.start)
    return found


def rewrite_destinations(body: str, replace: Callable[[Destination], str | None]) -> str:
    """Apply `replace` to every destination; None keeps the spelling. Other bytes are untouched."""
    pieces: list[str] = []
    cursor = 0
    for destination in find_destinations(body):
        new = replace(destination)
        if new is None:
            continue
        if destination.kind == "autolink" and not new.startswith("agor://"):
            # <agor://...> becomes [agor://...](relative): the visible text stays the original address.
            pieces.append(body[cursor : destination.start - 1])
            pieces.append(f"[{_escape_link_text(destination.text)}]({new})")
            cursor = destination.end + 1
        else:
            pieces.append(body[cursor : destination.start])
            pieces.append(new)
            cursor = destination.end
    pieces.append(body[cursor:])
    return "".join(pieces)


def _escape_link_text(text: str) -> str:
    return re.sub(r"([\\\[\]*_`<>])", r"\\\1", text)


# --- Knowledge link targets ----------------------------------------------------------------

_DOCUMENT_URI = re.compile(r"^agor://kb/document/([0-9A-Fa-f-]{36})$")
_PATH_FORMS = (
    re.compile(r"^agor://kb/([^/?#]+)/(.+)$"),
    re.compile(r"^/ui/kb/([^/?#]+)/(.+)$"),
    re.compile(r"^/ui/knowledge/([^/?#]+)/(.+)$"),
    re.compile(r"^/kb/([^/?#]+)/(.+)$"),
    re.compile(r"^/knowledge/([^/?#]+)/(.+)$"),
)


@dataclass(frozen=True)
class KbLink:
    """A Knowledge link: by document id, or by namespace slug + logical path. `suffix` is ?query#fragment."""

    document_id: str | None
    slug: str | None
    path: str | None
    suffix: str


def split_suffix(destination: str) -> tuple[str, str]:
    cut = len(destination)
    for marker in ("?", "#"):
        position = destination.find(marker)
        if position != -1:
            cut = min(cut, position)
    return destination[:cut], destination[cut:]


def _decode(text: str) -> str | None:
    try:
        decoded = unquote(text, errors="strict")
    except UnicodeDecodeError:
        return None
    if "\x00" in decoded or "\\" in decoded:
        return None
    return decoded


def parse_kb_link(destination: str) -> KbLink | None:
    """Recognise agor://kb/document/<uuid>, agor://kb/<slug>/<path> and the /kb, /ui/kb route forms."""
    if "\\" in destination:
        return None
    base, suffix = split_suffix(destination)
    match = _DOCUMENT_URI.match(base)
    if match:
        try:
            return KbLink(str(uuid.UUID(match.group(1))), None, None, suffix)
        except ValueError:
            return None
    for form in _PATH_FORMS:
        match = form.match(base)
        if match:
            slug = _decode(match.group(1))
            path = _decode(match.group(2))
            if slug is None or path is None or (slug == "document" and form is _PATH_FORMS[0]):
                return None
            return KbLink(None, slug, path, suffix)
    return None


def looks_like_kb_link(destination: str) -> bool:
    base = split_suffix(destination)[0]
    return base.startswith(("agor://kb/", "/ui/kb/", "/ui/knowledge/", "/kb/", "/knowledge/"))


def encode_relative(path: str) -> str:
    """Percent-encode each segment (parentheses included) so any destination parses back."""
    return "/".join(segment if segment in (".", "..") else quote(segment, safe="") for segment in path.split("/"))


def kb_uri(slug: str, path: str) -> str:
    return f"agor://kb/{slug}/{quote(path, safe='/')}"


@dataclass
class RewriteResult:
    body: str
    unresolved: int = 0
    resolved: int = 0


def export_links(
    body: str,
    *,
    slug: str,
    file: str,
    path_to_file: dict[str, str],
    id_to_path: dict[str, str],
) -> RewriteResult:
    """Same-namespace Knowledge links -> relative paths between repository files (fragments kept)."""
    result = RewriteResult(body)
    if "agor://kb/" not in body and "/kb/" not in body and "/knowledge/" not in body:
        return result  # nothing that could be a Knowledge link
    directory = posixpath.dirname(file)

    def replace(destination: Destination) -> str | None:
        link = parse_kb_link(destination.text)
        if link is None:
            if looks_like_kb_link(destination.text):
                result.unresolved += 1
            return None
        path = id_to_path.get(link.document_id) if link.document_id else link.path if link.slug == slug else None
        target = path_to_file.get(path) if path is not None else None
        if target is None:
            result.unresolved += 1
            return None
        result.resolved += 1
        return encode_relative(posixpath.relpath(target, directory or ".")) + link.suffix

    result.body = rewrite_destinations(body, replace)
    return result


def import_links(
    body: str,
    *,
    source_slug: str,
    target_slug: str,
    file: str,
    file_to_path: dict[str, str],
    id_to_path: dict[str, str],
) -> RewriteResult:
    """Relative repository links and source Knowledge links -> destination `agor://kb/<slug>/<path>`.

    Links to other namespaces, escapes out of the repository and unknown files are left as they
    are and counted as unresolved; nothing is guessed.
    """
    result = RewriteResult(body)
    if "](" not in body and "]:" not in body and "<agor://" not in body:
        return result  # no inline link, definition or Knowledge autolink at all
    directory = posixpath.dirname(file)
    paths = set(file_to_path.values())

    def replace(destination: Destination) -> str | None:
        text = destination.text
        link = parse_kb_link(text)
        if link is not None:
            if link.document_id:
                path = id_to_path.get(link.document_id)
            else:
                path = link.path if link.slug == source_slug else None
            if path is None or path not in paths:
                result.unresolved += 1
                return None
            new = kb_uri(target_slug, path) + link.suffix
        elif looks_like_kb_link(text):
            result.unresolved += 1
            return None
        else:
            base, suffix = split_suffix(text)
            if not base or base.startswith("/") or _SCHEME.match(base) or destination.kind == "autolink":
                return None
            decoded = _decode(base)
            resolved = posixpath.normpath(posixpath.join(directory, decoded)) if decoded is not None else None
            target = file_to_path.get(resolved) if resolved and resolved.startswith(DOCS_DIR + "/") else None
            if target is None:
                result.unresolved += 1
                return None
            new = kb_uri(target_slug, target) + suffix
        result.resolved += 1
        return None if new == text else new

    result.body = rewrite_destinations(body, replace)
    return result


def link_targets(body: str, slug: str) -> list[str]:
    """Logical paths in `slug` that the body links to (for reference reconciliation)."""
    targets = []
    for destination in find_destinations(body):
        link = parse_kb_link(destination.text)
        if link is not None and link.slug == slug and link.path:
            targets.append(link.path)
    return sorted(set(targets))


# --- the canonical import plan -------------------------------------------------------------


def plan_key(index: int) -> str:
    return f"d{index + 1:06d}"


def bundle_fingerprint(namespace: NamespaceInfo, target_slug: str, entries: list[dict[str, Any]]) -> str:
    """sha256 of the canonical plan: independent of YAML layout, dependent on content and target."""
    return sha256_hex(
        canonical_json(
            {
                "format": NAMESPACE_FORMAT,
                "version": VERSION,
                "namespace": namespace.as_dict(),
                "target": target_slug,
                "exported_at": PLAN_EPOCH,
                "entries": entries,
            }
        )
    )


def header_digest_fields(header: Header) -> dict[str, Any]:
    return {
        "source_id": header.id,
        "path": header.path,
        "title": header.title,
        "icon": header.icon,
        "kind": header.kind,
        "status": header.status,
        "frontmatter": header.frontmatter,
        "provenance": header.provenance,
    }
