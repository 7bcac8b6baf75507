"""Benchmark of the knowledge API through gunicorn, on a deterministic corpus.

`bench/run.sh` calls the subcommands in order, once per backend, with `DATABASE_URL` set:

- `build`: load the corpus into a freshly migrated database through the service layer
  (in-process; Django settings from the environment) and write a state file for `measure`;
- `measure`: drive the running server with `http.client` clients (1 and 4 threads) and write the raw
  numbers to `var/bench/core-<backend>.json`;
- `report`: print one markdown table per JSON file;
- `free-port`: print a free loopback TCP port.

Only `build` imports Django; `measure` talks HTTP to 127.0.0.1 and nothing else.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import os
import platform
import posixpath
import random
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

KIB = 1024
MIB = 1024 * KIB
MAX_CONTENT_BYTES = 10 * MIB  # settings.KNOWLEDGE_MAX_CONTENT_BYTES
LARGEST_CONTENT_BYTES = MAX_CONTENT_BYTES - KIB  # "10 MiB": just under the content limit
SEED = 20240611
ROOT = Path(__file__).resolve().parent.parent
WRITES_NAMESPACE = "bench-writes"
CLIENT_COUNTS = (1, 4)
BACKEND_VENDORS = {"sqlite": "sqlite", "postgres": "postgresql"}


# --- scales -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scale:
    """Corpus shape and iteration counts; `iterations` maps an operation to (n at 1 client, n at 4)."""

    name: str
    documents: int
    namespaces: int
    total_bytes: int
    median_bytes: int
    giants: tuple[int, ...]
    history_documents: int
    history_versions: int
    get_sample: int
    iterations: dict[str, tuple[int, int]]


FULL = Scale(
    name="full",
    documents=10_000,
    namespaces=50,
    total_bytes=100 * MIB,
    median_bytes=6_000,
    giants=(LARGEST_CONTENT_BYTES,) + (2 * MIB,) * 5,
    history_documents=50,
    history_versions=20,
    get_sample=2_000,
    iterations={
        "get": (400, 800),
        "list_admin": (200, 400),
        "list_reader10": (100, 200),
        "list_reader2": (200, 400),
        "history": (200, 400),
        "create": (150, 300),
        "revise_64k": (100, 200),
        "revise_1m": (20, 24),
        "rewrite_10m": (3, 4),
        "revise_10m": (3, 4),
        "outline_10m": (100, 200),
        "section_10m": (100, 200),
        "range_64k": (100, 200),
        "list_admin_after_writes": (100, 0),
    },
)

# A tenth of the corpus: same namespaces, users and size distribution, one 2 MiB document and no
# 10 MiB one (the 10 MiB save is still measured, with fewer iterations).
QUICK = Scale(
    name="quick",
    documents=1_000,
    namespaces=50,
    total_bytes=10 * MIB,
    median_bytes=6_000,
    giants=(2 * MIB,),
    history_documents=20,
    history_versions=20,
    get_sample=500,
    iterations={
        "get": (100, 200),
        "list_admin": (60, 120),
        "list_reader10": (40, 80),
        "list_reader2": (60, 120),
        "history": (60, 120),
        "create": (50, 100),
        "revise_64k": (40, 80),
        "revise_1m": (6, 8),
        "rewrite_10m": (2, 4),
        "revise_10m": (2, 4),
        "outline_10m": (60, 120),
        "section_10m": (60, 120),
        "range_64k": (60, 120),
        "list_admin_after_writes": (30, 0),
    },
)

SCALES = {scale.name: scale for scale in (FULL, QUICK)}


# --- markdown -----------------------------------------------------------------------------

VOCABULARY = """
    the a of to and in for with on when after before every each
    access agent alert api archive audit backend batch benchmark branch build cache canary cluster
    commit config consumer container cursor dashboard database deploy digest document endpoint event
    export feature fixture gateway graph handler health index ingest job kernel latency ledger lease
    limit link lock log manifest metric migration mirror module monitor namespace node owner page
    partition patch payload pipeline policy pool profile proxy query queue quota range record release
    replica request retry revision role rollout router runbook schema scope search secret server
    service session shard snapshot socket storage stream task tenant thread token trace upgrade
    version worker workspace
    """
HEAD_WORDS = (*VOCABULARY.split(), "café", "naïve", "façade", "Zürich", "→", "≤")
SYLLABLES = "ka lo mi nu per sa tor vi zen bar dul fen gri hol jas kem lun mor nax pil quo ras sel tam ul"


def _tail_words(count: int) -> list[str]:
    """Made-up words of two to four syllables, in a fixed order: the vocabulary's long tail."""
    syllables = SYLLABLES.split()
    rng = random.Random("vocabulary-tail")
    head, found = set(HEAD_WORDS), dict[str, None]()
    while len(found) < count:
        word = "".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))
        if word not in head:
            found[word] = None
    return list(found)


# Word frequencies follow Zipf's law (exponent 1.07) over 20,000 words, as in real prose: the
# head words appear in nearly every document, the tail gives mid-frequency and rare terms
# (search benchmarks pick one of each class by document frequency).
WORDS = (*HEAD_WORDS, *_tail_words(20_000 - len(HEAD_WORDS)))
WORD_WEIGHTS = tuple(itertools.accumulate(1 / (rank + 2) ** 1.07 for rank in range(len(WORDS))))
TEAMS = ("platform", "payments", "search", "identity", "mobile", "data", "infra", "growth", "support", "security")
FOLDERS = (
    "guides",
    "guides/ops",
    "runbooks",
    "decisions",
    "reference",
    "reference/api",
    "onboarding",
    "postmortems",
    "design",
    "notes/2024",
)
LANGUAGES = ("python", "sh", "yaml", "sql", "json")


class Markdown:
    """Markdown pieces (headings, paragraphs, lists, tables, code) from one seeded generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def word(self) -> str:
        return self.rng.choices(WORDS, cum_weights=WORD_WEIGHTS)[0]

    def words(self, low: int, high: int) -> str:
        return " ".join(self.rng.choices(WORDS, cum_weights=WORD_WEIGHTS, k=self.rng.randint(low, high)))

    def title(self) -> str:
        return self.words(2, 5).title()

    def sentence(self) -> str:
        words = self.words(6, 16).split()
        roll = self.rng.random()
        if roll < 0.15:
            words[self.rng.randrange(len(words))] = f"`{self.word()}_{self.rng.randint(1, 99)}`"
        elif roll < 0.25:
            words[self.rng.randrange(len(words))] = f"**{self.word()}**"
        text = " ".join(words)
        return text[0].upper() + text[1:] + "."

    def paragraph(self) -> str:
        return " ".join(self.sentence() for _ in range(self.rng.randint(2, 6))) + "\n\n"

    def heading(self) -> str:
        return f"{'#' * self.rng.choice((2, 2, 3, 3, 4))} {self.title()}\n\n"

    def bullets(self) -> str:
        lines = []
        for _ in range(self.rng.randint(3, 7)):
            lines.append(f"- {self.words(3, 10)}")
            if self.rng.random() < 0.2:
                lines.append(f"  - {self.words(2, 8)}")
        return "\n".join(lines) + "\n\n"

    def ordered(self) -> str:
        return "\n".join(f"{n}. {self.sentence()}" for n in range(1, self.rng.randint(3, 8))) + "\n\n"

    def tasks(self) -> str:
        return (
            "\n".join(f"- [{self.rng.choice(' x')}] {self.words(3, 9)}" for _ in range(self.rng.randint(2, 6))) + "\n\n"
        )

    def table(self) -> str:
        columns = [self.word() for _ in range(self.rng.randint(3, 5))]
        rows = [f"| {' | '.join(columns)} |", f"|{'---|' * len(columns)}"]
        for _ in range(self.rng.randint(3, 10)):
            cells = [self.rng.choice((self.word(), str(self.rng.randint(0, 9999)))) for _ in columns]
            rows.append(f"| {' | '.join(cells)} |")
        return "\n".join(rows) + "\n\n"

    def code(self) -> str:
        language = self.rng.choice(LANGUAGES)
        lines = []
        for _ in range(self.rng.randint(3, 16)):
            a, b, n = self.word(), self.word(), self.rng.randint(0, 999)
            lines.append(
                {
                    "python": f"{a}_{n} = {b}.get({a!r}, {n})",
                    "sh": f"kb {a} --{b} {n}",
                    "yaml": f"{a}_{b}: {n}",
                    "sql": f"SELECT {a}, {b} FROM {a}_{b} WHERE id = {n};",
                    "json": f'  "{a}_{b}": {n},',
                }[language]
            )
        return f"```{language}\n" + "\n".join(lines) + "\n```\n\n"

    def quote(self) -> str:
        return f"> {self.sentence()}\n> {self.sentence()}\n\n"

    def block(self) -> str:
        """One body block, weighted towards paragraphs."""
        makers = (self.paragraph, self.bullets, self.ordered, self.tasks, self.table, self.code, self.quote)
        return self.rng.choices(makers, weights=(45, 12, 6, 4, 10, 15, 8))[0]()


def fit(text: str, size: int) -> str:
    """Cut or pad `text` to exactly `size` UTF-8 bytes, ending with a newline."""
    cut = text.encode("utf-8")[: size - 1].decode("utf-8", errors="ignore")
    return cut + " " * (size - 1 - len(cut.encode("utf-8"))) + "\n"


# --- corpus -------------------------------------------------------------------------------


@dataclass(frozen=True)
class DocSpec:
    """One planned document; its content is rendered when it is loaded."""

    index: int
    namespace: int
    path: str
    title: str
    size: int
    visibility: str
    status: str
    frontmatter: bool


def document_sizes(scale: Scale, rng: random.Random) -> list[int]:
    """Log-normal sizes around the median, scaled so that the corpus totals `scale.total_bytes`."""
    regular = scale.documents - len(scale.giants)
    budget = scale.total_bytes - sum(scale.giants)
    sigma = math.sqrt(2 * math.log(budget / regular / scale.median_bytes))  # mean = median * e^(σ²/2)
    mu = math.log(scale.median_bytes)
    raw = [min(max(rng.lognormvariate(mu, sigma), 400.0), float(MIB)) for _ in range(regular)]
    factor = budget / sum(raw)
    sizes = [int(value * factor) for value in raw]
    for i in range(budget - sum(sizes)):
        sizes[i % regular] += 1
    for size in scale.giants:
        sizes.insert(rng.randrange(len(sizes) + 1), size)
    return sizes


class Corpus:
    """The deterministic plan: namespaces, document paths and sizes, and a pool of body blocks."""

    def __init__(self, scale: Scale) -> None:
        self.scale = scale
        rng = random.Random(f"{SEED}:plan:{scale.name}")
        namer = Markdown(rng)
        self.namespace_slugs = [f"{TEAMS[k % len(TEAMS)]}-{k // len(TEAMS) + 1}" for k in range(scale.namespaces)]
        self.specs: list[DocSpec] = []
        for index, size in enumerate(document_sizes(scale, rng)):
            title = namer.title()
            slug = "-".join(word for word in title.lower().split() if word.isascii() and word.isalpha())
            self.specs.append(
                DocSpec(
                    index=index,
                    namespace=index % scale.namespaces,
                    path=f"{rng.choice(FOLDERS)}/{slug or 'doc'}-{index:05d}.md",
                    title=title,
                    size=size,
                    visibility="private" if rng.random() < 0.1 else "public",
                    status="draft" if rng.random() < 0.05 else "published",
                    frontmatter=rng.random() < 0.3,
                )
            )
        self.by_namespace: dict[int, list[DocSpec]] = {}
        for spec in self.specs:
            self.by_namespace.setdefault(spec.namespace, []).append(spec)
        blocks = Markdown(random.Random(f"{SEED}:pool"))
        self.pool = [blocks.block() for _ in range(3_000)]
        self.pool_bytes = [len(block.encode("utf-8")) for block in self.pool]
        self.links = {"agor": 0, "relative": 0}

    def compose(self, rng: random.Random, size: int, head: str, link: Callable[[], str] | None = None) -> str:
        """`head` followed by headings, body blocks and (with `link`) link paragraphs, to `size` bytes."""
        md = Markdown(rng)
        parts, total = [head], len(head.encode("utf-8"))
        while total < size:
            roll = rng.random()
            if roll < 0.12:
                piece = md.heading()
            elif link is not None and roll < 0.20:
                piece = link()
            else:
                k = rng.randrange(len(self.pool))
                parts.append(self.pool[k])
                total += self.pool_bytes[k]
                continue
            parts.append(piece)
            total += len(piece.encode("utf-8"))
        return fit("".join(parts), size)

    def render(self, spec: DocSpec, created_ids: Sequence[str]) -> str:
        """A document's content; `agor://` links point at documents loaded before it."""
        rng = random.Random(f"{SEED}:doc:{spec.index}")
        md = Markdown(rng)
        head = ""
        if spec.frontmatter:
            tags = f"[{rng.choice(HEAD_WORDS)}, {rng.choice(TEAMS)}]"
            head = f"---\ntags: {tags}\nreviewed: 2024-05-{rng.randint(1, 28):02d}\n---\n\n"
        head += f"# {spec.title}\n\n{md.paragraph()}"
        siblings = self.by_namespace[spec.namespace]
        directory = posixpath.dirname(spec.path)

        def link() -> str:
            if created_ids and rng.random() < 0.5:
                self.links["agor"] += 1
                target = created_ids[rng.randrange(len(created_ids))]
                return f"See [{md.title()}](agor://kb/document/{target}) for the {md.words(2, 4)}.\n\n"
            self.links["relative"] += 1
            other = rng.choice(siblings)
            return f"Related: [{other.title}]({posixpath.relpath(other.path, directory)}).\n\n"

        return self.compose(rng, spec.size, head, link)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..1) of sorted values."""
    if not values:
        return float("nan")
    position = (len(values) - 1) * q
    low, high = math.floor(position), math.ceil(position)
    return values[low] + (values[high] - values[low]) * (position - low)


def size_stats(sizes: Iterable[int]) -> dict[str, float]:
    ordered = sorted(sizes)
    return {
        "count": len(ordered),
        "total_bytes": sum(ordered),
        "median_bytes": round(statistics.median(ordered)),
        "p90_bytes": round(percentile(ordered, 0.9)),
        "p99_bytes": round(percentile(ordered, 0.99)),
        "max_bytes": ordered[-1],
        "min_bytes": ordered[0],
    }


# --- build --------------------------------------------------------------------------------


class LogTally(logging.Handler):
    """Counts what the application logs at WARNING and above, keeping the first ERROR message."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: dict[str, int] = {}
        self.first_error: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.counts[record.levelname] = self.counts.get(record.levelname, 0) + 1
        if record.levelno >= logging.ERROR and self.first_error is None:
            exc = f" [{record.exc_info[0].__name__}: {record.exc_info[1]}]" if record.exc_info else ""
            self.first_error = f"{record.name}: {record.getMessage()}{exc}"[:500]


def build(scale: Scale, backend: str, state_path: Path, migrate_seconds: float) -> None:
    """Load the corpus through the service layer and write the state file `measure` needs."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection, transaction
    from django.db.models import Sum

    from knowledge import services as kb
    from knowledge.models import Document, DocumentVersion
    from workspaces import services as ws
    from workspaces.access import actor_for
    from workspaces.models import Role

    if settings.DEBUG:
        sys.exit("build: DEBUG must be off (Django would keep every query in memory).")
    # Application log records are counted and summarised instead of flooding the terminal.
    tally = LogTally()
    logging.getLogger().handlers = [tally]
    if connection.vendor != BACKEND_VENDORS[backend]:
        sys.exit(f"build: DATABASE_URL is {connection.vendor}, expected {backend}.")

    started = time.perf_counter()
    corpus = Corpus(scale)
    workspace = ws.workspace_ensure(slug="bench", name="Benchmark")
    users = {}
    for name, role in (("admin", Role.ADMIN), ("reader10", Role.MEMBER), ("reader2", Role.MEMBER)):
        users[name] = ws.user_ensure(username=f"bench-{name}")
        ws.membership_set(workspace=workspace, user=users[name], role=role)
    actor = actor_for(users["admin"], workspace)

    with transaction.atomic():
        namespaces = [
            ws.namespace_create(actor=actor, slug=slug, display_name=slug.replace("-", " ").title(), others_can="none")
            for slug in corpus.namespace_slugs
        ]
        ws.namespace_create(actor=actor, slug=WRITES_NAMESPACE, display_name="Benchmark writes")
        rng = random.Random(f"{SEED}:grants")
        granted = {
            "reader10": sorted(rng.sample(range(scale.namespaces), max(1, round(scale.namespaces * 0.10)))),
            "reader2": sorted(rng.sample(range(scale.namespaces), max(1, round(scale.namespaces * 0.02)))),
        }
        for k in sorted({k for ks in granted.values() for k in ks}):
            entries = [{"subject_type": "user", "subject": users["admin"].username, "permission": "own"}]
            entries += [
                {"subject_type": "user", "subject": users[name].username, "permission": "read"}
                for name, ks in granted.items()
                if k in ks
            ]
            ws.namespace_acl_replace(actor=actor, namespace=namespaces[k], entries=entries)

    ids: list[str] = []
    generate_seconds = 0.0
    batch_bytes, batch_limit = 0, 8 * MIB
    pending: list[DocSpec] = []

    def flush() -> None:
        nonlocal generate_seconds
        with transaction.atomic():
            for spec in pending:
                t0 = time.perf_counter()
                content = corpus.render(spec, ids)
                generate_seconds += time.perf_counter() - t0
                document = kb.document_create(
                    actor=actor,
                    namespace=namespaces[spec.namespace],
                    path=spec.path,
                    content=content,
                    visibility=spec.visibility,
                    status=spec.status,
                )
                ids.append(str(document.id))
        pending.clear()

    for spec in corpus.specs:
        pending.append(spec)
        batch_bytes += spec.size
        if len(pending) >= 200 or batch_bytes >= batch_limit:
            flush()
            batch_bytes = 0
    flush()
    load_seconds = time.perf_counter() - started

    # Reserved documents: small, public and published, each used by one operation only.
    rng = random.Random(f"{SEED}:reserve")
    small = [
        s.index for s in corpus.specs if s.size <= 16 * KIB and s.visibility == "public" and s.status == "published"
    ]
    rng.shuffle(small)
    history = small[: scale.history_documents]
    revise = small[scale.history_documents : scale.history_documents + 3 * max(CLIENT_COUNTS)]
    reserved = set(history) | set(revise) | {i for i, s in enumerate(corpus.specs) if s.size >= MIB}
    readable = [i for i in range(len(ids)) if i not in reserved]
    get_sample = rng.sample(readable, min(scale.get_sample, len(readable)))

    t0 = time.perf_counter()
    for batch_start in range(0, len(history), 20):
        with transaction.atomic():
            for index in history[batch_start : batch_start + 20]:
                content = DocumentVersion.objects.get(document_id=ids[index], number=1).content
                md = Markdown(random.Random(f"{SEED}:history:{index}"))
                for number in range(1, scale.history_versions):
                    content += f"\nRevision {number}: {md.sentence()}\n"
                    kb.document_revise(actor=actor, document_id=ids[index], content=content, expected_version=number)
    history_seconds = time.perf_counter() - t0

    tokens = {name: ws.token_issue(user=user, workspace=workspace, name="bench")[1] for name, user in users.items()}
    build_seconds = time.perf_counter() - started

    t0 = time.perf_counter()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("VACUUM ANALYZE")  # what autovacuum would do shortly after a bulk load
            cursor.execute("SELECT pg_database_size(current_database()), version()")
            db_size, db_version = cursor.fetchone()
        else:
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            cursor.execute("SELECT sqlite_version()")
            db_version = "SQLite " + cursor.fetchone()[0]
            db_path = Path(settings.DATABASES["default"]["NAME"])
            db_size = sum(p.stat().st_size for p in db_path.parent.glob(db_path.name + "*"))
    analyze_seconds = time.perf_counter() - t0

    all_versions = DocumentVersion.objects.aggregate(n=Sum("byte_length"))["n"] or 0
    corpus_stats = {
        "scale": scale.name,
        "seed": SEED,
        "documents": Document.objects.count(),
        "namespaces": scale.namespaces,
        "sizes": size_stats(s.size for s in corpus.specs),
        "giants": list(scale.giants),
        "private_documents": sum(s.visibility == "private" for s in corpus.specs),
        "draft_documents": sum(s.status == "draft" for s in corpus.specs),
        "frontmatter_documents": sum(s.frontmatter for s in corpus.specs),
        "links": dict(corpus.links),
        "versions": DocumentVersion.objects.count(),
        "version_bytes": all_versions,
        "history_documents": len(history),
        "history_versions_each": scale.history_versions,
        "granted_namespaces": {name: [corpus.namespace_slugs[k] for k in ks] for name, ks in granted.items()},
        "migrate_seconds": migrate_seconds,
        "build_seconds": round(build_seconds, 2),
        "load_seconds": round(load_seconds, 2),
        "generate_seconds": round(generate_seconds, 2),
        "history_seconds": round(history_seconds, 2),
        "analyze_seconds": round(analyze_seconds, 2),
        "database_bytes": db_size,
        "build_log": {"counts": tally.counts, "first_error": tally.first_error},
    }
    environment = {
        "database": db_version,
        "django": django.get_version(),
        "djangorestframework": metadata.version("djangorestframework"),
        "settings": os.environ["DJANGO_SETTINGS_MODULE"],
    }
    state = {
        "backend": backend,
        "scale": scale.name,
        "tokens": tokens,
        "get_ids": [ids[i] for i in get_sample],
        "history_ids": [ids[i] for i in history],
        "revise_ids": [ids[i] for i in revise],
        "corpus": corpus_stats,
        "environment": environment,
    }
    state_path.touch(mode=0o600)
    state_path.write_text(json.dumps(state))
    print(
        f"  corpus: {corpus_stats['documents']:,} documents, {corpus_stats['sizes']['total_bytes'] / MIB:.1f} MiB, "
        f"{corpus_stats['versions']:,} versions; built in {build_seconds:.1f} s; database {db_size / MIB:.0f} MiB",
        file=sys.stderr,
    )
    if tally.counts:
        print(f"  build: the application logged {tally.counts}; first error: {tally.first_error}", file=sys.stderr)


# --- measure ------------------------------------------------------------------------------


@dataclass
class Call:
    """One prepared request; building it is not part of the measured time."""

    method: str
    url: str
    token: str
    body: bytes | None = None
    expect: int = 200


@dataclass
class Operation:
    """A named request stream; `call(client)` prepares the next request for that client thread."""

    key: str
    label: str
    call: Callable[[int], Call]
    target_ms: float | None = None
    warmup: int = 3
    after: Callable[[int, Any], None] | None = None
    on_conflict: Callable[[int, dict[str, Any]], None] | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class PhaseResult:
    key: str
    label: str
    clients: int
    n: int
    errors: int
    wall_seconds: float
    latencies_ms: list[float]
    target_p95_ms: float | None
    target_applies: bool
    first_error: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        ordered = sorted(self.latencies_ms)
        p95 = percentile(ordered, 0.95)
        met = None
        if self.target_applies and self.target_p95_ms is not None and ordered:
            met = p95 <= self.target_p95_ms
        return {
            "operation": self.key,
            "label": self.label,
            "clients": self.clients,
            "n": self.n,
            "errors": self.errors,
            "p50_ms": round(percentile(ordered, 0.50), 2),
            "p95_ms": round(p95, 2),
            "p99_ms": round(percentile(ordered, 0.99), 2),
            "mean_ms": round(statistics.fmean(ordered), 2) if ordered else None,
            "min_ms": round(ordered[0], 2) if ordered else None,
            "max_ms": round(ordered[-1], 2) if ordered else None,
            "req_per_s": round(self.n / self.wall_seconds, 2) if self.wall_seconds > 0 else None,
            "wall_seconds": round(self.wall_seconds, 3),
            "target_p95_ms": self.target_p95_ms,
            "target_applies": self.target_applies,
            "met": met,
            "first_error": self.first_error,
            **self.meta,
            "latencies_ms": [round(v, 3) for v in self.latencies_ms],
        }


def _escape(text: str) -> bytes:
    """JSON string body (without quotes), UTF-8."""
    return json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8")


class Bench:
    """Runs operations against one server with 1 and 4 concurrent clients (`bench.load_client`)."""

    def __init__(self, base_url: str, state: dict[str, Any], scale: Scale, broker_url: str | None = None) -> None:
        self.base_url = base_url
        self.state = state
        self.scale = scale
        self.corpus = Corpus(scale)
        self.applies = state["backend"] == "postgres"
        self.versions: dict[str, int] = {}
        self.broker_url = broker_url

    def wait_healthy(self, server_pid: int | None, timeout: float = 60.0) -> dict[str, Any]:
        """Poll /health until it answers ok; give up early if the server process has exited."""
        import httpx

        deadline = time.monotonic() + timeout
        while True:
            if server_pid is not None and not _alive(server_pid):
                sys.exit(f"measure: the server (pid {server_pid}) exited before {self.base_url}/health answered")
            try:
                response = httpx.get(f"{self.base_url}/health", timeout=5)
                if response.status_code == 200 and response.json().get("status") == "ok":
                    return response.json()
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                sys.exit(f"measure: {self.base_url}/health did not answer ok within {timeout:.0f} s")
            time.sleep(0.2)

    # operations ---------------------------------------------------------------------------

    def _cycle(self, ids: Sequence[str], url: str, token: str) -> Callable[[int], Call]:
        lock, position = threading.Lock(), [0]

        def call(client: int) -> Call:
            with lock:
                document_id = ids[position[0] % len(ids)]
                position[0] += 1
            return Call("GET", url.format(id=document_id), token)

        return call

    def _list(self, key: str, label: str, user: str) -> Operation:
        op = Operation(key, label, lambda c: Call("GET", "/kb/documents?limit=50", self.state["tokens"][user]), 50)

        def after(client: int, response: Any) -> None:
            if "visible_documents" not in op.meta:
                op.meta["visible_documents"] = response.json()["total"]

        op.after = after
        return op

    def _create(self) -> Operation:
        counters = [0] * max(CLIENT_COUNTS)
        rng = random.Random(f"{SEED}:create")
        body = self.corpus.compose(rng, 2 * KIB, "")
        admin = self.state["tokens"]["admin"]

        def call(client: int) -> Call:
            counters[client] += 1
            content = f"# Created {client}-{counters[client]}\n\n{body}"
            payload = {"namespace": WRITES_NAMESPACE, "path": f"bench/client{client}/doc-{counters[client]:06d}.md"}
            return Call("POST", "/kb/documents", admin, json.dumps({**payload, "content": content}).encode(), 201)

        return Operation("create", "create (2 KiB)", call, 50)

    def _revise(
        self,
        key: str,
        label: str,
        size: int,
        documents: list[str],
        target: float,
        warmup: int,
        *,
        rewrite: bool = False,
    ) -> Operation:
        """Each client revises its own document, passing the version it last saw.

        A revise changes the first line of the same body each time (an edit); with `rewrite`,
        each save swaps in the other of two unrelated bodies, so every chunk is new.
        """
        header_width = len(self._revise_header(0, 0))
        bodies = [
            _escape(self.corpus.compose(random.Random(f"{SEED}:{variant}:{size}"), size - header_width, ""))
            for variant in (("revise", "rewrite") if rewrite else ("revise",))
        ]
        counters = [0] * len(documents)
        admin = self.state["tokens"]["admin"]
        for document_id in documents:
            self.versions.setdefault(document_id, 1)

        def call(client: int) -> Call:
            counters[client] += 1
            document_id = documents[client]
            head = b'{"expected_version": %d, "change_summary": "bench", "content": "' % self.versions[document_id]
            tail = bodies[counters[client] % len(bodies)]
            body = head + _escape(self._revise_header(client, counters[client])) + tail + b'"}'
            return Call("POST", f"/kb/documents/{document_id}/revise", admin, body)

        def after(client: int, response: Any) -> None:
            self.versions[documents[client]] = response.json()["current_version"]["number"]

        def on_conflict(client: int, body: dict[str, Any]) -> None:
            current = body.get("current_version") or {}
            if current.get("number"):
                self.versions[documents[client]] = current["number"]

        return Operation(key, label, call, target, warmup, after, on_conflict, {"content_bytes": size})

    def _large_document_reads(self, document_id: str) -> list[Operation]:
        """Outline, a section and a 64 KiB line range of a 10 MiB document (one `revise_10m` wrote).

        The section (the one nearest 64 KiB) and the range (lines in the middle adding up to
        64 KiB) are picked on first use from the document itself; picking is not timed.
        """
        url = f"/kb/documents/{document_id}"
        admin = self.state["tokens"]["admin"]
        outline = Operation("outline_10m", "outline of 10 MiB", lambda c: Call("GET", f"{url}/outline", admin), 20)
        section = Operation("section_10m", "section of 10 MiB", lambda c: Call("GET", picked["section"], admin), 30)
        lines = Operation("range_64k", "64 KiB of lines of 10 MiB", lambda c: Call("GET", picked["range"], admin), 30)
        picked: dict[str, str] = {}
        lock = threading.Lock()

        def pick() -> None:
            import httpx

            with lock, httpx.Client(base_url=self.base_url, headers={"Authorization": f"Bearer {admin}"}) as client:
                if picked:
                    return
                body = client.get(f"{url}/outline", timeout=300).raise_for_status().json()
                nearest = min(body["headings"], key=lambda heading: abs(heading["chars"] - 64 * KIB))
                picked["section"] = f"{url}/range?section_ref={nearest['section_ref']}"
                section.label = f"section ({nearest['chars'] / KIB:.0f} KiB) of 10 MiB"
                section.meta.update(section_ref=nearest["section_ref"], section_chars=nearest["chars"])
                start, count = body["line_count"] // 2, 1000
                for _ in range(4):  # scale the line count until the range holds ~64 KiB
                    query = f"start_line={start}&end_line={start + count - 1}&context_lines=0"
                    ranged = client.get(f"{url}/range?{query}", timeout=300).raise_for_status().json()
                    size = len(ranged["range"]["content"].encode())
                    count = max(1, round(count * 64 * KIB / max(size, 1)))
                picked["range"] = f"{url}/range?{query}"
                lines.meta.update(range_lines=ranged["range"]["end_line"] - start + 1, range_bytes=size)
                outline.meta.update(document_lines=body["line_count"], headings=len(body["headings"]))

        for op in (outline, section, lines):

            def call(client: int, prepare: Callable[[int], Call] = op.call) -> Call:
                if not picked:
                    pick()
                return prepare(client)

            op.call = call
        return [outline, section, lines]

    @staticmethod
    def _revise_header(client: int, number: int) -> str:
        return f"# Revision {number:07d} by client {client}\n\n"

    def operations(self) -> list[Operation]:
        tokens, revise_ids = self.state["tokens"], self.state["revise_ids"]
        clients = max(CLIENT_COUNTS)
        largest = revise_ids[2 * clients :]
        return [
            Operation("get", "get", self._cycle(self.state["get_ids"], "/kb/documents/{id}", tokens["admin"]), 25, 5),
            self._list("list_admin", "list 50 (admin, all)", "admin"),
            self._list("list_reader10", "list 50 (10% user)", "reader10"),
            self._list("list_reader2", "list 50 (2% user)", "reader2"),
            Operation(
                "history",
                "history page",
                self._cycle(self.state["history_ids"], "/kb/documents/{id}/versions", tokens["admin"]),
                None,
                5,
            ),
            self._create(),
            self._revise("revise_64k", "revise 64 KiB", 64 * KIB, revise_ids[0:clients], 50, 3),
            self._revise("revise_1m", "revise 1 MiB", MIB, revise_ids[clients : 2 * clients], 1_000, 1),
            self._revise("rewrite_10m", "rewrite 10 MiB", LARGEST_CONTENT_BYTES, largest, 3_000, 0, rewrite=True),
            self._revise("revise_10m", "revise 10 MiB", LARGEST_CONTENT_BYTES, largest, 3_000, 1),
            *self._large_document_reads(revise_ids[2 * clients]),
            self._list("list_admin_after_writes", "list 50 (admin) after saves", "admin"),
        ]

    # running ------------------------------------------------------------------------------

    def run_phase(self, op: Operation, clients: int, n: int) -> PhaseResult:
        """n requests split over `clients` threads, each with its own connection (`LoadClient`)."""
        from http.client import HTTPException

        from bench.load_client import LoadClient

        counts = [n // clients + (1 if c < n % clients else 0) for c in range(clients)]
        latencies: list[list[float]] = [[] for _ in range(clients)]
        errors: list[str] = []
        starts, ends = [0.0] * clients, [0.0] * clients
        barrier = threading.Barrier(clients)

        def send(client: LoadClient, index: int, record: bool) -> None:
            call = op.call(index)
            headers = {"Authorization": f"Bearer {call.token}", "Content-Type": "application/json"}
            t0 = time.perf_counter()
            try:
                response = client.request(call.method, call.url, call.body, headers)
            except (OSError, HTTPException) as exc:
                errors.append(f"{call.method} {call.url}: {exc!r}")
                return
            elapsed_ms = (time.perf_counter() - t0) * 1000
            if response.status_code != call.expect:
                errors.append(f"{call.method} {call.url}: {response.status_code} {response.text[:300]}")
                if response.status_code == 409 and op.on_conflict is not None:
                    op.on_conflict(index, response.json())
                return
            if op.after is not None:
                op.after(index, response)
            if record:
                latencies[index].append(elapsed_ms)

        def worker(index: int) -> None:
            try:
                with LoadClient(self.base_url) as client:
                    for _ in range(op.warmup):
                        send(client, index, record=False)
                    barrier.wait(timeout=600)
                    starts[index] = time.perf_counter()
                    for _ in range(counts[index]):
                        send(client, index, record=True)
                    ends[index] = time.perf_counter()
            except Exception as exc:
                barrier.abort()
                errors.append(f"client {index}: {exc!r}")

        load_before = os.getloadavg()[0]
        threads = [threading.Thread(target=worker, args=(c,), daemon=True) for c in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        flat = [v for per_client in latencies for v in per_client]
        wall = max(ends) - min(starts) if all(ends) else 0.0
        return PhaseResult(
            key=op.key,
            label=op.label,
            clients=clients,
            n=len(flat),
            errors=len(errors),
            wall_seconds=wall,
            latencies_ms=flat,
            target_p95_ms=op.target_ms,
            target_applies=self.applies,
            first_error=errors[0] if errors else None,
            meta={**op.meta, "load_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)]},
        )

    def run(self) -> list[dict[str, Any]]:
        results = []
        for op in self.operations():
            for clients, n in zip(CLIENT_COUNTS, self.scale.iterations[op.key], strict=True):
                if n <= 0:
                    continue
                op.meta.pop("upkeep_before", None)
                if self.broker_url:
                    # Each phase starts with an idle worker: the upkeep the previous phase's saves
                    # queued (seconds of it after the 10 MiB ones) would otherwise run during this one.
                    drained = upkeep_backlog(self.broker_url)
                    if drained["queued_when_clients_stopped"] or drained["drained_seconds"] >= 0.5:
                        op.meta["upkeep_before"] = drained
                summary = self.run_phase(op, clients, n).summary()
                results.append(summary)
                errors = f"  ERRORS {summary['errors']}: {summary['first_error']}" if summary["errors"] else ""
                print(
                    f"  {op.label:<30} {clients} client{'s' if clients > 1 else ' '} n={summary['n']:<5} "
                    f"p50 {summary['p50_ms']:>9.1f} ms  p95 {summary['p95_ms']:>9.1f} ms  "
                    f"{summary['req_per_s'] or 0:>7.1f} req/s{errors}",
                    file=sys.stderr,
                    flush=True,
                )
        return results


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit)\b.*")


def server_log_summary(path: Path | None) -> dict[str, Any]:
    """Tracebacks in the server log (gunicorn's error log, with the application's output)."""
    if path is None or not path.exists():
        return {}
    text = path.read_text(errors="replace")
    first = None
    for line in text.splitlines():
        if EXCEPTION_LINE.match(line):
            first = line[:500]
            break
    return {"tracebacks": text.count("Traceback (most recent call last)"), "first_exception": first}


def upkeep_backlog(broker_url: str, timeout: float = 900.0) -> dict[str, Any]:
    """How much after-commit work (graph links, chunks) the saves left queued, and how long the
    worker took to finish it once the clients stopped. Saves return before this work is done.

    Finished means nothing queued and nothing running: with late acknowledgement the message the
    worker is executing stays in kombu's `unacked` hash until its task returns."""
    import redis

    queue = redis.Redis.from_url(broker_url)
    waiting = queue.llen("celery")
    started = time.perf_counter()
    while (queue.llen("celery") or queue.hlen("unacked")) and time.perf_counter() - started < timeout:
        time.sleep(0.2)
    return {"queued_when_clients_stopped": waiting, "drained_seconds": round(time.perf_counter() - started, 1)}


def _git_commit() -> str:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def cpu_calibration_ms() -> float:
    """Best of five runs of a fixed pure-Python loop: the machine's single-core speed at the time,
    so results from different machines (or one machine on a slow day) can be told apart."""
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        total = 0
        for i in range(2_000_000):
            total += i
        best = min(best, time.perf_counter() - started)
    return round(best * 1000, 1)


def measure(
    scale: Scale,
    state_path: Path,
    base_url: str,
    out: Path,
    *,
    server: str,
    server_pid: int | None = None,
    server_log: Path | None = None,
    broker_url: str | None = None,
) -> int:
    """Measure every operation and write the JSON; returns the number of failed requests."""
    state = json.loads(state_path.read_text())
    bench = Bench(base_url, state, scale, broker_url)
    health = bench.wait_healthy(server_pid)
    vendor = health["database"]["vendor"]
    if vendor != BACKEND_VENDORS[state["backend"]]:
        sys.exit(f"measure: the server uses {vendor}, expected {state['backend']}")
    started = time.perf_counter()
    results = bench.run()
    backlog = upkeep_backlog(broker_url) if broker_url else None
    environment = {
        **state["environment"],
        "knowledge": health.get("version"),
        "git_commit": _git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "cpu_calibration_ms": cpu_calibration_ms(),
        "load_client": "http.client, one thread and connection per client",
        "gunicorn": metadata.version("gunicorn"),
        "server": server,
        "base_url": base_url,
    }
    document = {
        "backend": state["backend"],
        "scale": scale.name,
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "measure_seconds": round(time.perf_counter() - started, 1),
        "environment": environment,
        "corpus": state["corpus"],
        "server_log": server_log_summary(server_log),
        "upkeep_backlog": backlog,
        "results": results,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=1) + "\n")
    return sum(r["errors"] for r in results)


# --- report -------------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "–"
    return f"{value:.1f}" if value < 100 else f"{value:,.0f}"


def _target(value: float | None) -> str:
    if value is None:
        return "–"
    return f"≤ {value / 1000:g} s" if value >= 1000 else f"≤ {value:g} ms"


def report(document: dict[str, Any]) -> str:
    """One backend's results as markdown: corpus and environment lines, then the table."""
    corpus, env = document["corpus"], document["environment"]
    sizes = corpus["sizes"]
    applies = document["backend"] == "postgres"
    visible = {r["operation"]: r.get("visible_documents") for r in document["results"] if r["clients"] == 1}
    loads = [load for r in document["results"] for load in r.get("load_1m", [])]
    lines = [
        f"### {env['database'].split(' on ')[0]} ({corpus['scale']} corpus)",
        "",
        f"- Corpus: {corpus['documents']:,} documents in {corpus['namespaces']} namespaces, "
        f"{sizes['total_bytes'] / MIB:.1f} MiB of markdown (median {sizes['median_bytes'] / 1000:.1f} KB, "
        f"p90 {sizes['p90_bytes'] / 1000:.1f} KB, max {sizes['max_bytes'] / MIB:.2f} MiB), "
        f"{corpus['versions']:,} versions ({corpus['version_bytes'] / MIB:.1f} MiB), "
        f"links {corpus['links']['agor']:,} agor:// + {corpus['links']['relative']:,} relative.",
        f"- Build: {corpus['build_seconds']:.1f} s through the service layer (content generation "
        f"{corpus['generate_seconds']:.1f} s, history {corpus['history_seconds']:.1f} s), migrate "
        f"{corpus['migrate_seconds']:.1f} s, {'VACUUM ANALYZE' if applies else 'checkpoint'} "
        f"{corpus['analyze_seconds']:.1f} s; database {corpus['database_bytes'] / MIB:.0f} MiB.",
        f"- Visible to the list users: admin {visible.get('list_admin')}, 10% user {visible.get('list_reader10')}, "
        f"2% user {visible.get('list_reader2')} documents.",
        f"- {env['server']}; Python {env['python']}, Django {env['django']}, {env['cpus']} CPUs "
        f"(a fixed 2-million-step Python loop: {env.get('cpu_calibration_ms', '?')} ms; lower is faster); "
        f"measured in {document['measure_seconds']:.0f} s, 1-minute load average "
        f"{min(loads, default=0):.1f}–{max(loads, default=0):.1f} (clients and server share the machine).",
    ]
    build_log = corpus.get("build_log") or {}
    if build_log.get("counts"):
        lines.append(f"- **Warning**: the build logged {build_log['counts']}; first: {build_log['first_error']}")
    backlog = document.get("upkeep_backlog")
    if backlog:
        lines.append(
            f"- After-commit upkeep (graph links, chunks) ran on the Celery worker: "
            f"{backlog['queued_when_clients_stopped']} tasks were still queued when the clients stopped, "
            f"drained {backlog['drained_seconds']:.1f} s later."
        )
    server_log = document.get("server_log") or {}
    if server_log.get("tracebacks"):
        lines.append(
            f"- **Warning**: the server logged {server_log['tracebacks']} tracebacks; "
            f"first: {server_log['first_exception']}"
        )
    if not applies:
        lines.append("- Targets are defined for PostgreSQL only.")
    lines += [
        "",
        "| operation | clients | n | p50 ms | p95 ms | req/s | target p95 | met |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | :---: |",
    ]
    for r in document["results"]:
        target = _target(r["target_p95_ms"]) if applies else "–"
        met = "–" if r["met"] is None else ("yes" if r["met"] else "**no**")
        errors = f" ({r['errors']} errors)" if r["errors"] else ""
        lines.append(
            f"| {r['label']}{errors} | {r['clients']} | {r['n']} | {_ms(r['p50_ms'])} | {_ms(r['p95_ms'])} | "
            f"{r['req_per_s'] or 0:.1f} | {target} | {met} |"
        )
    return "\n".join(lines) + "\n"


# --- command line -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("build", "measure"):
        sub = commands.add_parser(name)
        sub.add_argument("--backend", choices=sorted(BACKEND_VENDORS), required=(name == "build"))
        sub.add_argument("--scale", choices=sorted(SCALES), default="full")
        sub.add_argument("--state", type=Path, required=True)
    commands.choices["build"].add_argument("--migrate-seconds", type=float, default=0.0)
    commands.choices["measure"].add_argument("--base-url", required=True)
    commands.choices["measure"].add_argument("--out", type=Path, required=True)
    commands.choices["measure"].add_argument("--server", default="gunicorn", help="description for the report")
    commands.choices["measure"].add_argument("--server-pid", type=int, help="fail fast if this process exits")
    commands.choices["measure"].add_argument("--server-log", type=Path, help="count the tracebacks in this log")
    commands.choices["measure"].add_argument(
        "--broker-url", help="the Celery broker of the server's worker: wait for its queue to drain before each phase"
    )
    commands.add_parser("report").add_argument("files", type=Path, nargs="+")
    commands.add_parser("free-port")
    args = parser.parse_args(argv)

    if args.command == "build":
        build(SCALES[args.scale], args.backend, args.state, args.migrate_seconds)
    elif args.command == "measure":
        failed = measure(
            SCALES[args.scale],
            args.state,
            args.base_url,
            args.out,
            server=args.server,
            server_pid=args.server_pid,
            server_log=args.server_log,
            broker_url=args.broker_url,
        )
        if failed:
            print(f"measure: {failed} requests failed (see first_error in {args.out})", file=sys.stderr)
            return 1
    elif args.command == "report":
        print("\n".join(report(json.loads(path.read_text())) for path in args.files if path.exists()))
    else:
        print(free_port())
    return 0


if __name__ == "__main__":
    sys.exit(main())
