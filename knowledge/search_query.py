"""Parse what people type into a search box into clauses (pure, no database).

Syntax: words, "quoted phrases", `OR` between items, `-exclusion`, `prefix*`. Anything else
(stray quotes, lone operators, FTS punctuation) is treated as plain text, never an error.
A query of two or more plain words is *relaxed*: documents matching most words are returned,
those matching every word first. Phrases and explicit operators are never relaxed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

WORD = re.compile(r"\w+", re.UNICODE)
# A quoted phrase (a minus right before it excludes the phrase), or any run of non-space text.
TOKEN = re.compile(r'-?"[^"]*"?|\S+')
MAX_CLAUSES = 16

# Very common English words; dropped from relaxed queries so "how do I ..." questions rank by
# their meaningful words (PostgreSQL's english configuration drops these as well).
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves""".split()  # noqa: SIM905 - easier to read as text
)


@dataclass(frozen=True)
class Term:
    """One matchable item: a word, a prefix, or a phrase of words."""

    words: tuple[str, ...]
    prefix: bool = False
    token: str | None = None  # the original text of a punctuated token ("subprocess.run")

    @property
    def is_phrase(self) -> bool:
        return len(self.words) > 1


@dataclass(frozen=True)
class Clause:
    """A document must match at least one of the alternatives (an OR group of one or more terms)."""

    alternatives: tuple[Term, ...]


@dataclass
class ParsedQuery:
    clauses: list[Clause] = field(default_factory=list)
    excluded: list[Clause] = field(default_factory=list)
    relaxed: bool = False

    @property
    def is_empty(self) -> bool:
        return not self.clauses

    @property
    def words(self) -> list[str]:
        """Every positive word, for highlighting snippets."""
        return [w for c in self.clauses for t in c.alternatives for w in t.words]


CONTRACTION = re.compile(r"(\w)['’](s|t|d|ll|re|ve|m)\b", re.IGNORECASE)
TOKEN_EDGES = re.compile(r"^\W+|\W+$")


def _words(text: str) -> tuple[str, ...]:
    return tuple(w.lower() for w in WORD.findall(CONTRACTION.sub(r"\1", text)))


def parse_query(text: str) -> ParsedQuery:
    """Turn raw query text into clauses; never raises."""
    items: list[tuple[bool, Term | str]] = []  # (negated, term) or (False, "OR")
    explicit = False
    for raw in TOKEN.findall(text or ""):
        if raw == "OR":
            items.append((False, "OR"))
            continue
        negated = raw.startswith("-") and len(raw) > 1 and raw[1] != "-"
        body = raw[1:] if negated else raw
        if body.startswith('"') and body.endswith('"') and len(body) >= 2:
            words = _words(body[1:-1])
            if words:
                items.append((negated, Term(words)))
                explicit = True
            continue
        prefix = body.endswith("*") and bool(WORD.search(body))
        words = _words(body)
        if not words:
            continue
        if negated or prefix:
            explicit = True
        if len(words) > 1:
            # "read-only" or "subprocess.run": keep the pieces together as a phrase; the token
            # itself is kept too, since PostgreSQL indexes some such tokens whole.
            token = TOKEN_EDGES.sub("", CONTRACTION.sub(r"\1", body.rstrip("*"))).lower()
            items.append((negated, Term(words, prefix=prefix, token=token)))
        else:
            items.append((negated, Term(words, prefix=prefix)))

    # Group OR chains; a dangling OR is just ignored.
    clauses: list[Clause] = []
    excluded: list[Clause] = []
    pending: list[Term] = []
    joined = False
    for negated, item in items:
        if item == "OR":
            joined = bool(pending)
            continue
        assert isinstance(item, Term)
        if negated:
            excluded.append(Clause((item,)))
            joined = False
            continue
        if joined and pending:
            pending.append(item)
            explicit = True
        else:
            if pending:
                clauses.append(Clause(tuple(pending)))
            pending = [item]
        joined = False
    if pending:
        clauses.append(Clause(tuple(pending)))

    if not clauses and excluded:
        # Only exclusions ("-foo"): treat the text as words to find, not as a filter.
        clauses, excluded = excluded, []
    if not clauses:
        # Only operators ("OR", "AND"): they were meant as words.
        clauses = [Clause((Term((w,)),)) for w in _words(text or "")]
    relaxed = not explicit and not excluded and len(clauses) >= 2
    if relaxed:
        # Drop stop words (single-word clauses only) and repeats; keep punctuated phrases whole.
        meaningful: list[Clause] = []
        seen: set[tuple[str, ...]] = set()
        for clause in clauses:
            term = clause.alternatives[0]
            if (len(term.words) == 1 and term.words[0] in STOPWORDS) or term.words in seen:
                continue
            seen.add(term.words)
            meaningful.append(clause)
        if meaningful:
            clauses = meaningful
        relaxed = len(clauses) >= 2
    return ParsedQuery(clauses=clauses[:MAX_CLAUSES], excluded=excluded[:MAX_CLAUSES], relaxed=relaxed)
