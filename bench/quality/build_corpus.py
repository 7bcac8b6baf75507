"""Regenerate the search-quality corpus (bench/quality/corpus/) from documentation on this machine.

    .venv/bin/python bench/quality/build_corpus.py            # rewrite corpus/ and manifest.json
    .venv/bin/python bench/quality/build_corpus.py --check    # exit 1 if the output would differ

Sources (all real documentation that ships with the machine's packages):

- python-stdlib/   module, class and function docstrings of ~90 standard-library modules
- python-reference/ the language-reference topics behind `help("with")` (pydoc_data.topics)
- python-packages/ the long descriptions (READMEs) in the virtualenv's *.dist-info/METADATA
- nodejs-api/      the Node.js API reference under /usr/share/doc/nodejs/api/*.md
- npm-cli/         the npm CLI documentation under /usr/lib/node_modules/npm/docs/content
- man/             manual pages rendered with man(1) as plain text
- debian/          README and reference files under /usr/share/doc

Output is deterministic for a given machine: files are processed in a fixed order, nothing carries a
timestamp, memory addresses are scrubbed. Pages above MAX_CHARS are split at headings (then at
paragraphs) into parts under a folder named after the page. The committed corpus is the reference;
this script documents how it was made and rebuilds it on a machine with the same packages.
"""

from __future__ import annotations

import argparse
import email
import gzip
import hashlib
import importlib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CORPUS = HERE / "corpus"
MANIFEST = HERE / "manifest.json"
SITE_PACKAGES = ROOT / ".venv" / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
NODE_API = Path("/usr/share/doc/nodejs/api")
NPM_DOCS = Path("/usr/lib/node_modules/npm/docs/content")
DOC = Path("/usr/share/doc")

MAX_CHARS = 30_000  # pages above this are split into parts
MIN_CHARS = 400  # pages below this carry too little text to be worth a document
MIN_PART_CHARS = 3_000  # a part smaller than this joins its neighbour

STDLIB_MODULES = [
    "argparse", "array", "asyncio", "base64", "builtins", "calendar", "collections",
    "concurrent.futures", "configparser", "contextlib", "csv", "dataclasses", "datetime", "decimal",
    "difflib", "email.message", "enum", "fractions", "functools", "glob", "gzip", "hashlib", "heapq",
    "hmac", "http.client", "http.cookies", "http.server", "importlib", "inspect", "io", "ipaddress",
    "itertools", "json", "logging", "logging.handlers", "lzma", "math", "mimetypes", "multiprocessing",
    "operator", "os", "os.path", "pathlib", "pickle", "platform", "pprint", "queue", "random", "re",
    "secrets", "shlex", "shutil", "signal", "smtplib", "socket", "sqlite3", "ssl", "statistics",
    "string", "struct", "subprocess", "sys", "tarfile", "tempfile", "textwrap", "threading", "time",
    "timeit", "traceback", "types", "typing", "unittest", "unittest.mock", "urllib.parse",
    "urllib.request", "uuid", "venv", "warnings", "xml.etree.ElementTree", "zipfile", "zlib",
    "zoneinfo",
]  # fmt: skip

# Topics that merely concatenate others (compound statements, all special names, all types).
PYTHON_TOPICS_SKIPPED = {"compound", "specialnames", "types"}

NODE_MODULES = [
    "buffer", "child_process", "console", "events", "fs", "http", "modules", "net", "path", "process",
    "stream", "timers", "url", "util", "worker_threads",
]  # fmt: skip

MAN_PAGES = [
    ("1", "ssh"), ("5", "ssh_config"), ("1", "scp"), ("1", "ssh-keygen"), ("1", "ssh-agent"),
    ("1", "ssh-copy-id"), ("1", "sftp"), ("1", "rsync"), ("1", "tar"), ("1", "gzip"), ("1", "unzip"),
    ("1", "grep"), ("1", "sed"), ("1", "find"), ("1", "xargs"), ("1", "sort"), ("1", "ls"), ("1", "cp"),
    ("1", "chmod"), ("1", "ps"), ("1", "timeout"), ("1", "date"), ("1", "curl"), ("1", "git"),
    ("1", "git-commit"), ("1", "git-rebase"), ("1", "git-stash"), ("1", "git-bisect"),
    ("1", "git-cherry-pick"), ("1", "git-reset"), ("1", "git-worktree"), ("1", "git-clone"),
    ("1", "git-push"), ("1", "git-branch"), ("1", "git-tag"), ("5", "gitignore"), ("1", "make"),
    ("1", "journalctl"), ("5", "journald.conf"), ("5", "fstab"), ("8", "ss"), ("1", "openssl"),
    ("1", "diff"), ("1", "patch"), ("1", "sha256sum"), ("8", "useradd"), ("5", "nsswitch.conf"),
    ("5", "resolv.conf"), ("5", "hosts"), ("1", "pg_dump"), ("1", "jq"), ("1", "sqlite3"),
]  # fmt: skip

DEBIAN_FILES = [
    "adduser/README.gz", "apt/README.md.gz", "base-passwd/users-and-groups.txt.gz",
    "coreutils/README.gz", "dpkg/spec/rootless-builds.txt", "dpkg/spec/triggers.txt", "gdb/README.gz",
    "git/README.md", "jq/README", "libkrb5-3/README.Debian", "libwrap0/README.gz", "man-db/FAQ",
    "man-db/README.md.gz", "mariadb-server/README.Debian.gz", "mosquitto/README.md",
    "mosquitto/examples/mosquitto.conf", "nodejs/SECURITY.md", "openssh-client/README.Debian.gz",
    "openssh-client/README.dns", "openssh-client/README.tun.gz", "openssl/HOWTO/certificates.txt.gz",
    "openssl/HOWTO/keys.txt", "openssl/README-ENGINES.md.gz", "postgresql-common/README.Debian.gz",
    "postgresql-common/README.systemd", "rabbitmq-server/README.Debian.gz", "redis-server/README.md.gz",
    "systemd/ENVIRONMENT.md.gz", "systemd/README.gz", "systemd/TRANSIENT-SETTINGS.md.gz",
    "systemd/UIDS-GIDS.md.gz", "tmux/README",
]  # fmt: skip

PACKAGES_SKIPPED = {"knowledge"}  # this project itself
CHANGELOG = re.compile(
    r"^(?:#{1,6} *)?(?:change ?log|changes|release history|release notes|history)\s*:?\s*\n(?:[=~^*+-]{3,}\s*\n)?",
    re.IGNORECASE | re.MULTILINE,
)


@dataclass
class Page:
    path: str  # corpus path, also the document path in the knowledge service
    content: str  # markdown, first line "# Title"
    source: str  # where it came from on this machine
    license: str


# --------------------------------------------------------------------------- text helpers

ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
FENCE = re.compile(r"^\s{0,3}(```|~~~)")
ATX = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
UNDERLINE = re.compile(r"^([=\-~^*+#\"'`])\1{2,}\s*$")


def read_text(path: Path) -> str:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace")


def clean(text: str) -> str:
    """Normalise newlines, strip trailing spaces and control characters, collapse blank runs."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").expandtabs(8)
    text = "".join(ch for ch in text if ch == "\n" or ch >= " " or ch == "\t")
    lines = [line.rstrip() for line in text.split("\n")]
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip("\n") + "\n"


def setext_to_atx(text: str) -> str:
    """Turn reStructuredText / setext underlined (and overlined) titles into '#' headings.

    Levels follow the order in which underline styles first appear, as in docutils.
    """
    lines = text.split("\n")
    styles: list[tuple[str, bool]] = []
    out: list[str] = []
    in_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if FENCE.match(line):
            in_fence = not in_fence
        if in_fence:
            out.append(line)
            i += 1
            continue
        over = UNDERLINE.match(line)
        # overline + title + underline
        if (
            over
            and i + 2 < len(lines)
            and lines[i + 1].strip()
            and UNDERLINE.match(lines[i + 2])
            and lines[i + 2].strip()[0] == line.strip()[0]
        ):
            style = (line.strip()[0], True)
            styles.append(style) if style not in styles else None
            out.append("#" * min(styles.index(style) + 1, 6) + " " + lines[i + 1].strip())
            i += 3
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        under = UNDERLINE.match(nxt)
        if (
            under
            and line.strip()
            and not line.startswith((" ", "\t"))
            and not UNDERLINE.match(line)
            and len(nxt.strip()) >= max(3, len(line.strip()) - 3)
            and (not out or not out[-1].strip())
        ):
            style = (nxt.strip()[0], False)
            styles.append(style) if style not in styles else None
            out.append("#" * min(styles.index(style) + 1, 6) + " " + line.strip())
            i += 2
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


def demote_headings(text: str, by: int = 1) -> str:
    """Push every ATX heading down `by` levels (outside fenced code)."""
    out = []
    in_fence = False
    for line in text.split("\n"):
        if FENCE.match(line):
            in_fence = not in_fence
        m = None if in_fence else ATX.match(line)
        if m and m.group(2):
            out.append("#" * min(len(m.group(1)) + by, 6) + " " + m.group(2))
        else:
            out.append(line)
    return "\n".join(out)


def slugify(text: str, limit: int = 60) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if len(slug) > limit:
        slug = slug[:limit].rsplit("-", 1)[0] or slug[:limit]
    return slug or "section"


def plain_heading(text: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[`*\\]", "", text).strip()


def short_title(text: str, limit: int = 110) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " …"


# --------------------------------------------------------------------------- splitting


def _headings(lines: list[str]) -> list[tuple[int, int, str]]:
    """(line index, level, text) of ATX headings outside fenced code."""
    found = []
    in_fence = False
    for index, line in enumerate(lines):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            m = ATX.match(line)
            if m and m.group(2):
                found.append((index, len(m.group(1)), m.group(2)))
    return found


def _pieces(lines: list[str], heading: str, max_chars: int) -> list[tuple[str, list[str]]]:
    """Cut lines into pieces no longer than max_chars: at the shallowest headings first, then at
    paragraphs. Each piece carries the heading in force at its start."""
    if len("\n".join(lines)) <= max_chars:
        return [(heading, lines)]
    heads = [h for h in _headings(lines) if h[0] > 0]
    for level in sorted({h[1] for h in heads}):
        cuts = [h for h in heads if h[1] == level]
        bounds = [0] + [h[0] for h in cuts] + [len(lines)]
        names = [heading] + [plain_heading(h[2]) for h in cuts]
        blocks = [(names[k], lines[bounds[k] : bounds[k + 1]]) for k in range(len(bounds) - 1)]
        blocks = [(name, block) for name, block in blocks if block]
        if len(blocks) > 1:
            result = []
            for name, block in blocks:
                result.extend(_pieces(block, name, max_chars))
            return result
    # No headings left: cut at blank lines (outside code fences), else hard at lines.
    result: list[tuple[str, list[str]]] = []
    current: list[str] = []
    size = 0
    in_fence = False
    part = 1
    for line in lines:
        if FENCE.match(line):
            in_fence = not in_fence
        if size + len(line) + 1 > max_chars and current and ((not line.strip() and not in_fence) or size > max_chars):
            result.append((heading if part == 1 else f"{heading} (part {part})", current))
            part += 1
            current, size = [], 0
        current.append(line)
        size += len(line) + 1
    if current:
        result.append((heading if part == 1 else f"{heading} (part {part})", current))
    return result


def split_page(page: Page, short: str, max_chars: int = MAX_CHARS) -> list[Page]:
    """One page, or parts under `<page path without .md>/` when the page is long.

    Parts are packed greedily from the pieces; each starts with '# <short>: <first heading>'.
    """
    if len(page.content) <= max_chars:
        return [page]
    title_line, _, body = page.content.partition("\n")
    pieces = _pieces(body.split("\n"), "Overview", max_chars - 200)
    parts: list[tuple[str, list[str]]] = []
    for name, lines in pieces:
        if parts and len("\n".join(parts[-1][1])) + len("\n".join(lines)) + 1 <= max_chars - 200:
            parts[-1][1].extend(lines)
        else:
            parts.append((name, list(lines)))
    # Fold small leftovers (a short preamble, a trailing SEE ALSO) into a neighbour.
    merged: list[tuple[str, list[str]]] = []
    for name, lines in parts:
        if merged and len("\n".join(lines)) < MIN_PART_CHARS:
            merged[-1][1].extend(lines)
        elif merged and len("\n".join(merged[-1][1])) < MIN_PART_CHARS:
            merged[-1] = (merged[-1][0], merged[-1][1] + lines)
        else:
            merged.append((name, list(lines)))
    parts = merged
    base = page.path.removesuffix(".md")
    used: set[str] = set()
    result = []
    for index, (name, lines) in enumerate(parts):
        slug = "overview" if index == 0 else slugify(name)
        candidate, n = slug, 2
        while candidate in used:
            candidate, n = f"{slug}-{n}", n + 1
        used.add(candidate)
        heading = title_line if index == 0 else f"# {short}: {short_title(name, 140)}"
        text = clean(heading + "\n\n" + "\n".join(lines).strip("\n"))
        result.append(Page(f"{base}/{candidate}.md", text, page.source, page.license))
    return result


# --------------------------------------------------------------------------- python stdlib


def _signature(name: str, obj: Any) -> str:
    try:
        return f"{name}{inspect.signature(obj)}"
    except (TypeError, ValueError):
        return f"{name}(...)"


def _doc(obj: Any) -> str:
    try:
        doc = inspect.getdoc(obj)
    except Exception:
        return ""
    return doc or ""


def render_module(name: str) -> str:
    module = importlib.import_module(name)
    doc = _doc(module)
    first = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
    lines = [f"# {name} — {short_title(first, 100)}" if first else f"# {name}", "", doc, ""]
    public = getattr(module, "__all__", None)
    if public is None:
        public = [
            key
            for key, value in vars(module).items()
            if not key.startswith("_")
            and (inspect.isclass(value) or callable(value))
            and getattr(value, "__module__", None) == module.__name__
        ]
    seen: set[str] = set()
    for key in public:
        if key in seen or not hasattr(module, key):
            continue
        seen.add(key)
        value = getattr(module, key)
        if inspect.ismodule(value):
            continue
        if inspect.isclass(value):
            lines += [f"## class {_signature(f'{name}.{key}', value)}", "", _doc(value), ""]
            for attr, member in vars(value).items():
                if attr.startswith("_"):
                    continue
                raw = member.__func__ if isinstance(member, classmethod | staticmethod) else member
                if isinstance(raw, property):
                    mdoc, heading = _doc(raw), f"{key}.{attr}"
                elif callable(raw):
                    mdoc, heading = _doc(raw), _signature(f"{key}.{attr}", raw)
                else:
                    continue
                if mdoc and mdoc != _doc(type(raw)):
                    lines += [f"### {heading}", "", mdoc, ""]
        elif callable(value):
            lines += [f"## {_signature(f'{name}.{key}', value)}", "", _doc(value), ""]
        else:
            vdoc = getattr(value, "__doc__", None)
            if isinstance(vdoc, str) and vdoc.strip() and vdoc != type(value).__doc__:
                lines += [f"## {name}.{key}", "", inspect.cleandoc(vdoc), ""]
    text = "\n".join(lines)
    return ADDRESS.sub("", text)


def python_stdlib() -> Iterator[Page]:
    for name in STDLIB_MODULES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            text = render_module(name)
        page = Page(
            f"python-stdlib/{name}.md",
            clean(text),
            f"docstrings of the Python {sys.version.split()[0]} module {name}",
            "PSF-2.0",
        )
        yield from split_page(page, name)


def python_reference() -> Iterator[Page]:
    from pydoc_data.topics import topics

    for key in sorted(topics):
        if key in PYTHON_TOPICS_SKIPPED or len(topics[key]) < MIN_CHARS:
            continue
        text = setext_to_atx(clean(topics[key]))
        if not text.startswith("# "):
            text = f"# {key}\n\n{text}"
        page = Page(
            f"python-reference/{key}.md",
            clean(text),
            f"pydoc_data.topics[{key!r}] (Python {sys.version.split()[0]})",
            "PSF-2.0",
        )
        yield from split_page(page, f"Python reference ({key})")


# --------------------------------------------------------------------------- python packages


def _package_license(meta: email.message.Message) -> str:
    expression = meta.get("License-Expression")
    if expression:
        return expression
    licence = (meta.get("License") or "").strip()
    if licence and len(licence) < 60 and "\n" not in licence:
        return licence
    classifiers = [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License")]
    return "; ".join(classifiers) or "see the package metadata"


def python_packages() -> Iterator[Page]:
    for dist in sorted(SITE_PACKAGES.glob("*.dist-info")):
        meta = email.message_from_bytes((dist / "METADATA").read_bytes())
        name = meta["Name"]
        if name.lower() in PACKAGES_SKIPPED:
            continue
        body = meta.get_payload()
        if not isinstance(body, str) or not body.strip():
            body = meta.get("Description") or ""
        body = HTML_COMMENT.sub("", body)
        body = CHANGELOG.split(body, maxsplit=1)[0]  # release notes are not usage documentation
        if len(body.strip()) < 1500:
            continue
        body = demote_headings(setext_to_atx(clean(body)))
        summary = (meta.get("Summary") or "").strip()
        if not summary or summary.lower().startswith(name.lower()):
            title = f"# {summary or name}"
        else:
            title = f"# {name}: {summary}"
        page = Page(
            f"python-packages/{name.lower().replace('_', '-')}.md",
            clean(f"{title}\n\n{body}"),
            f"{dist.relative_to(ROOT)}/METADATA (long description of {name} {meta['Version']})",
            _package_license(meta),
        )
        yield from split_page(page, name)


# --------------------------------------------------------------------------- Node.js and npm

NPM_MIN_CHARS = 700  # skip stub command pages (npm-get, npm-ping, ...)


def nodejs_api() -> Iterator[Page]:
    for name in NODE_MODULES:
        source = NODE_API / f"{name}.md"
        text = clean(HTML_COMMENT.sub("", read_text(source)))
        title = text.split("\n", 1)[0].removeprefix("# ").strip()
        if not text.startswith("# "):
            text = f"# Node.js {name}\n\n{text}"
        else:
            text = f"# Node.js {title}" + text[len(title) + 2 :]
        page = Page(f"nodejs-api/{name}.md", clean(text), str(source), "MIT (Node.js)")
        yield from split_page(page, f"Node.js {title}")


def npm_cli() -> Iterator[Page]:
    for source in sorted(NPM_DOCS.rglob("*.md")):
        raw = read_text(source)
        front: dict[str, str] = {}
        if raw.startswith("---\n"):
            header, _, raw = raw[4:].partition("\n---\n")
            for line in header.split("\n"):
                key, _, value = line.partition(":")
                front[key.strip()] = value.strip()
        body = HTML_COMMENT.sub("", raw)
        title = front.get("title", source.stem)
        description = front.get("description", "")
        heading = f"# {title}: {description}" if description else f"# {title}"
        if len(body.strip()) < NPM_MIN_CHARS:
            continue
        rel = source.relative_to(NPM_DOCS)
        page = Page(f"npm-cli/{rel.as_posix()}", clean(f"{heading}\n\n{body}"), str(source), "Artistic-2.0 (npm)")
        yield from split_page(page, title)


# --------------------------------------------------------------------------- man pages

MAN_SECTION = re.compile(r"^[A-Z][A-Z0-9 ,/()&'-]*[A-Z)]$")


def _owning_package(path: str) -> str:
    result = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True, check=False)
    line = result.stdout.strip().split("\n")[0] if result.returncode == 0 else ""
    return line.split(":")[0] if line else "unknown"


def render_man(section: str, name: str) -> tuple[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "MANWIDTH": "80",
        "MAN_KEEP_FORMATTING": "",
    }
    where = subprocess.run(["man", "-w", section, name], capture_output=True, text=True, check=True, env=env)
    location = where.stdout.strip().split("\n")[0]
    rendered = subprocess.run(
        ["man", "--no-hyphenation", "--no-justification", "-P", "cat", section, name],
        capture_output=True,
        check=True,
        env=env,
    ).stdout.decode("utf-8", errors="replace")
    plain = subprocess.run(["col", "-bx"], input=rendered.encode(), capture_output=True, check=True, env=env)
    return location, plain.stdout.decode("utf-8", errors="replace")


def man_to_markdown(section: str, name: str, text: str) -> str:
    lines = clean(text).split("\n")
    if lines and re.match(r"^\S.*\(\S+\)\s*$", lines[0]):
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines.pop()
    if lines and not lines[-1].startswith(" ") and not MAN_SECTION.match(lines[-1]):
        lines = lines[:-1]  # the footer: source, date, page name
    body = [line for line in lines if line.strip() and not MAN_SECTION.match(line)]
    base = len(body[0]) - len(body[0].lstrip()) if body else 0  # the column of the NAME text
    out: list[str] = []
    summary = ""
    current = ""
    for line in lines:
        if line.strip() and MAN_SECTION.match(line):
            current = line.strip()
            out += ["", f"## {current}", ""]
            continue
        indent = len(line) - len(line.lstrip())
        if line.strip() and 0 < indent < base and len(line.strip()) < 60:
            out += ["", f"### {line.strip()}", ""]  # a subsection title (GNU style, 3 columns)
            continue
        out.append(line[base:] if indent >= base else line.lstrip())
        if current == "NAME" and line.strip():
            summary += " " + line.strip()
    summary = summary.strip()
    match = re.split(r"\s+[-—–]+\s+|\\-", summary, maxsplit=1)
    what = match[1].strip() if len(match) > 1 else summary
    title = f"# {name}({section}) — {what}" if what else f"# {name}({section})"
    return clean(title + "\n" + "\n".join(out))


def man_pages() -> Iterator[Page]:
    for section, name in MAN_PAGES:
        location, text = render_man(section, name)
        package = _owning_package(location)
        page = Page(
            f"man/{name}.{section}.md",
            man_to_markdown(section, name, text),
            f"man {section} {name} ({location}, Debian package {package})",
            f"see /usr/share/doc/{package}/copyright",
        )
        yield from split_page(page, f"{name}({section})")


# --------------------------------------------------------------------------- Debian docs


CONF_BANNER = re.compile(r"^# ?={10,}\n# ?(\S[^\n]*)\n# ?={10,}\n", re.MULTILINE)


def conf_to_markdown(text: str) -> str:
    """An annotated example config: one fenced block per banner-delimited section."""
    pieces = CONF_BANNER.split(text)
    out = [f"```\n{pieces[0].strip()}\n```"] if pieces[0].strip() else []
    for name, block in zip(pieces[1::2], pieces[2::2], strict=True):
        out.append(f"## {name.strip()}\n\n```\n{block.strip()}\n```")
    return "\n\n".join(out)


def _debian_title(body: str, package: str) -> str:
    """The document's own title: a heading or a short first line near the top, if it has one."""
    lines = [line.strip() for line in body.split("\n")[:8] if line.strip()]
    for line in lines:
        m = ATX.match(line)
        if m and m.group(2) and m.group(2).lower() != package.lower():
            return plain_heading(m.group(2))
    first = lines[0] if lines else ""
    if 3 < len(first) < 60 and first[0].isalnum() and ". " not in first and not first.endswith((".", ":")):
        return first
    return ""


def debian_docs() -> Iterator[Page]:
    for rel in DEBIAN_FILES:
        source = DOC / rel
        package, _, inner = rel.partition("/")
        leaf = inner.removesuffix(".gz")
        text = clean(HTML_COMMENT.sub("", read_text(source)))
        front = ""
        if text.startswith("---\n"):
            header, _, text = text[4:].partition("\n---\n")
            found = re.search(r"^title:\s*(.+)$", header, re.MULTILINE)
            front = found.group(1).strip() if found else ""
        if leaf.endswith(".md"):
            body = demote_headings(setext_to_atx(text))
        elif leaf.endswith(".conf"):
            body = conf_to_markdown(text)
        else:
            body = setext_to_atx(text)
        title = f"# {package}: {front or _debian_title(body, package) or leaf}"
        page = Page(
            f"debian/{package}/{re.sub(r'[.](md|txt)$', '', leaf)}.md",
            clean(f"{title}\n\n{body}"),
            str(source),
            f"see /usr/share/doc/{package}/copyright",
        )
        yield from split_page(page, f"{package} {leaf}")


# --------------------------------------------------------------------------- main

SOURCES: list[tuple[str, Callable[[], Iterator[Page]]]] = [
    ("python-stdlib", python_stdlib),
    ("python-reference", python_reference),
    ("python-packages", python_packages),
    ("nodejs-api", nodejs_api),
    ("npm-cli", npm_cli),
    ("man", man_pages),
    ("debian", debian_docs),
]


def build() -> list[Page]:
    pages: list[Page] = []
    for _label, producer in SOURCES:
        pages.extend(page for page in producer() if len(page.content) >= MIN_CHARS)
    paths = [page.path for page in pages]
    duplicates = {p for p in paths if paths.count(p) > 1}
    if duplicates:
        raise SystemExit(f"duplicate corpus paths: {sorted(duplicates)}")
    return sorted(pages, key=lambda page: page.path)


def manifest(pages: list[Page]) -> str:
    entries = [
        {
            "path": page.path,
            "title": page.content.split("\n", 1)[0].removeprefix("# "),
            "bytes": len(page.content.encode()),
            "sha256": hashlib.sha256(page.content.encode()).hexdigest(),
            "source": page.source,
            "license": page.license,
        }
        for page in pages
    ]
    return json.dumps(entries, indent=1, ensure_ascii=False) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the committed corpus, write nothing")
    args = parser.parse_args()
    pages = build()
    if args.check:
        current = {p.relative_to(CORPUS).as_posix(): p.read_text() for p in CORPUS.rglob("*.md")}
        wanted = {page.path: page.content for page in pages}
        changed = sorted(k for k in wanted.keys() | current.keys() if wanted.get(k) != current.get(k))
        for path in changed[:50]:
            print(f"differs: {path}")
        print(f"{len(wanted)} pages built, {len(changed)} differ from {CORPUS.relative_to(ROOT)}")
        return 1 if changed else 0
    if CORPUS.exists():
        shutil.rmtree(CORPUS)
    for page in pages:
        target = CORPUS / page.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(page.content)
    MANIFEST.write_text(manifest(pages))
    total = sum(len(page.content.encode()) for page in pages)
    by_source: dict[str, int] = {}
    for page in pages:
        by_source[page.path.split("/", 1)[0]] = by_source.get(page.path.split("/", 1)[0], 0) + 1
    print(f"{len(pages)} pages, {total / 1e6:.2f} MB: " + ", ".join(f"{k} {v}" for k, v in sorted(by_source.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
