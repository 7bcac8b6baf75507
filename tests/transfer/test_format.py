"""The pure repository-format module: YAML safety, headers, filename mapping, links, fingerprints."""

from __future__ import annotations

import itertools
import random
import unicodedata

import pytest

from transfer import format as fmt

SECRET = "s3cr3t-Value"


# --- YAML ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        f"title: a\ntitle: {SECRET}\n",
        f"agor:\n  id: x\n  id: {SECRET}\n",
        f"base: &b {{k: {SECRET}}}\nother: *b\n",
        f"<<: {{a: {SECRET}}}\n",
        f"x: !!str {SECRET}\n",
        f"x: !!js/function {SECRET}\n",
        f"x: !custom {SECRET}\n",
        f"a: 1\n---\nb: {SECRET}\n",
        f"a: {SECRET}\n...\n",
        f"? [a, b]\n: {SECRET}\n",
        "x: " + "[" * 60 + "]" * 60 + "\n",
        "x: 123456789012345678901234567890\n",
        f"x: '{SECRET}\n",
    ],
)
def test_yaml_rejections_never_echo_input(text):
    with pytest.raises(fmt.FormatError) as info:
        fmt.load_yaml(text)
    assert SECRET not in str(info.value) and "123456789012" not in str(info.value)
    assert info.value.code == "invalid_yaml"


def test_yaml_nesting_limit_is_exact():
    def nested(depth: int) -> str:
        return "x: " + "[" * depth + "]" * depth + "\n"

    fmt.load_yaml(nested(fmt.MAX_YAML_DEPTH - 1))  # the top mapping is one level
    with pytest.raises(fmt.FormatError):
        fmt.load_yaml(nested(fmt.MAX_YAML_DEPTH))


def test_yaml_uses_the_json_schema():
    data = fmt.load_yaml(
        "a: no\nb: on\nc: 012\nd: 1.10\ne: 1:30\nf: 2024-01-01\ng: ~\nh:\ni: true\nj: 12\nk: -1.5e3\nl: '7'\n'<<': m\n"
    )
    assert data == {
        "a": "no",
        "b": "on",
        "c": "012",
        "d": 1.1,
        "e": "1:30",
        "f": "2024-01-01",
        "g": None,
        "h": None,
        "i": True,
        "j": 12,
        "k": -1500.0,
        "l": "7",
        "<<": "m",
    }


def test_yaml_size_limit():
    with pytest.raises(fmt.FormatError) as info:
        fmt.load_yaml("a: " + "x" * 100, max_bytes=50)
    assert info.value.code == "yaml_too_large"


@pytest.mark.parametrize(
    "value",
    [
        {"t": "no", "n": "012", "d": "2024-01-01", "s": "1:30", "e": "", "tilde": "~", "null": "null"},
        {"multi": "line one\n---\n...\nline 3", "cr": "a\r\nb", "sep": "a\u2028b", "ctl": "\x1b[2J\x07"},
        {"nested": {"list": [1, 2.5, None, True, "x: y", "# not a comment", "- item"]}, "empty": {}, "none": []},
        {"unicode": "café ☕ \u202e", "quotes": 'it\'s "quoted"', "colon": "a: b", "lead": "  spaced  "},
    ],
)
def test_dump_then_load_round_trips_exactly(value):
    text = fmt.dump_yaml(value)
    assert fmt.load_yaml(text) == value
    assert "\n---\n" not in "\n" + text and "\n...\n" not in "\n" + text
    assert text == fmt.dump_yaml(fmt.load_yaml(text))


def test_dump_is_sorted_and_stable():
    assert fmt.dump_yaml({"b": 1, "a": {"d": 2, "c": 3}}) == "a:\n  c: 3\n  d: 2\nb: 1\n"


# --- headers and manifest ------------------------------------------------------------------

HEADER = fmt.Header(
    id="0b9f3c8e-4f41-4b7e-9c1a-2d3e4f5a6b7c",
    path="guides/setup.md",
    title="Set up",
    icon="🚀",
    kind="guide",
    status="draft",
    frontmatter={"tags": ["a"]},
    provenance={"created_at": "2026-01-01T00:00:00Z"},
)


@pytest.mark.parametrize(
    "body",
    [
        "# Setup\n",
        "",
        "\ufeffBOM body\r\nCRLF\r\n",
        "---\ntitle: body frontmatter\n---\n# Body\n",
        "Date · Reporter\n\n---\n\nafter a rule\n",
        "no trailing newline",
    ],
)
def test_document_round_trip_keeps_the_body_exactly(body):
    text = fmt.render_document(HEADER, body)
    header_text, parsed_body = fmt.split_document(text)
    assert parsed_body == body
    assert fmt.parse_header(header_text) == HEADER


def test_header_layout_is_deterministic_and_readable():
    text = fmt.render_document(HEADER, "x")
    assert text.startswith("---\nagor:\n  icon: 🚀\n  id: 0b9f3c8e-4f41-4b7e-9c1a-2d3e4f5a6b7c\n")
    assert "\nformat: agor-knowledge-document\n" in text and "\nversion: 2\n---\nx" in text


def test_header_ignores_yaml_layout_and_comments():
    edited = (
        "---\n# a comment\nversion: 2\nformat: agor-knowledge-document\n"
        "provenance: {created_at: '2026-01-01T00:00:00Z'}\n"
        "agor: {status: draft, kind: guide, path: guides/setup.md,\n   title: Set up, icon: 🚀,\n"
        "   id: 0B9F3C8E-4F41-4B7E-9C1A-2D3E4F5A6B7C}\nfrontmatter:\n    tags:\n    - a\n---\nbody"
    )
    header_text, body = fmt.split_document(edited)
    assert fmt.parse_header(header_text) == HEADER and body == "body"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("no header\n", "missing_header"),
        ("\n---\nagor: {}\n---\n", "missing_header"),
        ("---\nformat: agor-knowledge-document\n", "missing_header"),
    ],
)
def test_split_rejects_missing_or_misplaced_headers(text, code):
    with pytest.raises(fmt.FormatError) as info:
        fmt.split_document(text)
    assert info.value.code == code


@pytest.mark.parametrize(
    "mutate",
    [
        lambda h: h.update(version=1),
        lambda h: h.update(version=3),
        lambda h: h.update(format="other"),
        lambda h: h.update(extra=1),
        lambda h: h["agor"].update(id="not-a-uuid"),
        lambda h: h["agor"].update(path="../escape.md"),
        lambda h: h["agor"].update(path="/abs.md"),
        lambda h: h["agor"].update(path="a//b.md"),
        lambda h: h["agor"].update(kind="weird"),
        lambda h: h["agor"].update(status="gone"),
        lambda h: h["agor"].update(title="x" * 501),
        lambda h: h.update(frontmatter=[1]),
        lambda h: h.update(provenance="x"),
    ],
)
def test_header_schema_errors(mutate):
    data = HEADER.as_dict()
    mutate(data)
    with pytest.raises(fmt.FormatError):
        fmt.parse_header(fmt.dump_yaml(data))


def _manifest(documents: list[str], **namespace) -> str:
    ns = {"slug": "team-docs", "display_name": "Team", "description": None, "provenance": {}, **namespace}
    return fmt.dump_yaml({"format": fmt.NAMESPACE_FORMAT, "version": 2, "namespace": ns, "documents": documents})


def test_manifest_parses_and_renders_sorted():
    manifest = fmt.parse_manifest(_manifest(["docs/b.md", "docs/a.md"]))
    assert manifest.namespace.slug == "team-docs" and manifest.documents == ["docs/b.md", "docs/a.md"]
    rendered = fmt.render_manifest(manifest)
    assert rendered.index("docs/a.md") < rendered.index("docs/b.md")
    assert fmt.parse_manifest(rendered).namespace == manifest.namespace


@pytest.mark.parametrize(
    "files",
    [
        ["docs/../x.md"],
        ["docs/./a.md"],
        ["docs//a.md"],
        ["/docs/a.md"],
        ["docs\\a.md"],
        ["docs/a.txt"],
        ["other/a.md"],
        ["docs/.git/config.md"],
        ["docs/.Git/x.md"],
        ["docs/\u200c.git/x.md"],
        ["docs/.hidden.md"],
        ["docs/a\x00.md"],
        ["docs/" + unicodedata.normalize("NFD", "café") + ".md"],
        ["docs/a.md", "docs/a.md"],
        ["docs/A.md", "docs/a.md"],
        ["docs/Straße.md", "docs/STRASSE.md"],
        ["docs/x.md", "docs/x.md/y.md"],
        ["docs/" + "é" * 150 + ".md"],
    ],
)
def test_manifest_rejects_unsafe_or_colliding_files(files):
    with pytest.raises(fmt.FormatError):
        fmt.parse_manifest(_manifest(files))


def test_manifest_rejects_version_one_and_bad_slugs():
    with pytest.raises(fmt.FormatError) as info:
        fmt.parse_manifest(fmt.dump_yaml({"format": fmt.NAMESPACE_FORMAT, "version": 1, "namespace": {}}))
    assert info.value.code == "unsupported_version"
    with pytest.raises(fmt.FormatError):
        fmt.parse_manifest(_manifest([], slug="Bad Slug"))


# --- filename mapping ----------------------------------------------------------------------


def test_plain_paths_map_to_themselves():
    mapping = fmt.map_files(["guides/getting-started.md", "incidents/parent-session-not-notified.md", "index"])
    assert mapping == {
        "guides/getting-started.md": "docs/guides/getting-started.md",
        "incidents/parent-session-not-notified.md": "docs/incidents/parent-session-not-notified.md",
        "index": "docs/index.md",
    }


def test_collisions_get_deterministic_suffixes_in_any_order():
    paths = ["guide", "guide.md", "Guide.md", "café.md", unicodedata.normalize("NFD", "café.md"), "A/x.md", "a/y.md"]
    results = {tuple(sorted(fmt.map_files(order).items())) for order in itertools.permutations(paths, len(paths))}
    assert len(results) == 1
    mapping = fmt.map_files(paths)
    files = list(mapping.values())
    assert len({fmt.fold(f) for f in files}) == len(files)
    # guide.md and Guide.md are both exact spellings: neither may claim the name.
    assert mapping["guide"].startswith("docs/guide--") and mapping["Guide.md"].startswith("docs/Guide--")
    assert mapping["guide.md"].startswith("docs/guide--")
    # With only one exact spelling in the group, it keeps its name.
    assert fmt.map_files(["guide", "guide.md"])["guide.md"] == "docs/guide.md"
    assert all(fmt.file_problem(f) is None for f in files)
    fmt.check_file_list(files)
    assert mapping["A/x.md"].split("/")[1] != mapping["a/y.md"].split("/")[1]


def test_file_folder_conflict_hidden_and_long_names():
    long = "é" * 150
    mapping = fmt.map_files(["notes.md", "notes.md/child.md", ".hidden/x.md", "_hidden/y.md", long + ".md", ".git/c"])
    assert mapping["notes.md"] != "docs/notes.md" and not mapping["notes.md/child.md"].startswith("docs/notes.md/")
    assert mapping[".hidden/x.md"].startswith("docs/_hidden--")
    assert mapping["_hidden/y.md"] == "docs/_hidden/y.md"
    assert len(mapping[long + ".md"].split("/")[1].encode()) <= fmt.MAX_COMPONENT_BYTES
    assert ".git" not in mapping[".git/c"]
    fmt.check_file_list(list(mapping.values()))


def test_established_names_are_kept_on_refresh():
    first = fmt.map_files(["Guide.md"])
    assert first == {"Guide.md": "docs/Guide.md"}
    second = fmt.map_files(["Guide.md", "guide.md"], previous=first)
    assert second["Guide.md"] == "docs/Guide.md"
    assert second["guide.md"].startswith("docs/guide--")
    # Without the previous mapping both would have been suffixed.
    assert fmt.map_files(["Guide.md", "guide.md"])["Guide.md"] != "docs/Guide.md"


def test_random_path_sets_always_map_to_unique_valid_files():
    rng = random.Random(7)
    alphabet = ["a", "A", "é", unicodedata.normalize("NFD", "é"), ".", "-", "ß", "SS", "x"]
    for _ in range(50):
        paths = set()
        for _ in range(rng.randint(1, 12)):
            parts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(1, 3))]
            path = "/".join(parts)
            if fmt.path_problem(path) is None:
                paths.add(path)
        mapping = fmt.map_files(paths)
        fmt.check_file_list(list(mapping.values()))


# --- links ---------------------------------------------------------------------------------

DOC_A = "11111111-1111-4111-8111-111111111111"
DOC_B = "22222222-2222-4222-8222-222222222222"
PATHS = {"guides/a.md": "docs/guides/a.md", "ref/b (draft).md": "docs/ref/b (draft).md", "café.md": "docs/café.md"}
IDS = {DOC_A: "guides/a.md", DOC_B: "ref/b (draft).md"}

BODY = """# Links

See [A](agor://kb/team/guides/a.md#setup) and ![img](agor://kb/document/22222222-2222-4222-8222-222222222222).
Reference [b][ref], a [route](/ui/kb/team/caf%C3%A9.md?x=1), <agor://kb/team/guides/a.md> and [other](agor://kb/else/x.md).
An [external](https://example.com/a_(b)) link and a [missing](agor://kb/team/missing.md).

`[code](agor://kb/team/guides/a.md)` stays.

```md
[fenced](agor://kb/team/guides/a.md)
```

    [indented](agor://kb/team/guides/a.md)

[ref]: <agor://kb/team/ref/b%20%28draft%29.md> "Title"
"""


def test_export_rewrites_known_links_to_relative_paths_and_leaves_code():
    result = fmt.export_links(BODY, slug="team", file="docs/guides/a.md", path_to_file=PATHS, id_to_path=IDS)
    out = result.body
    assert "[A](a.md#setup)" in out
    assert "![img](../ref/b%20%28draft%29.md)" in out
    assert "[route](../caf%C3%A9.md?x=1)" in out
    assert "[agor://kb/team/guides/a.md](a.md)" in out
    assert '[ref]: <../ref/b%20%28draft%29.md> "Title"' in out
    assert "[other](agor://kb/else/x.md)" in out and "[missing](agor://kb/team/missing.md)" in out
    assert "`[code](agor://kb/team/guides/a.md)`" in out
    assert "[fenced](agor://kb/team/guides/a.md)" in out and "    [indented](agor://kb/team/guides/a.md)" in out
    assert "https://example.com/a_(b)" in out
    assert result.unresolved == 2 and result.resolved == 5


def test_import_resolves_relative_links_back_and_round_trips():
    exported = fmt.export_links(BODY, slug="team", file="docs/guides/a.md", path_to_file=PATHS, id_to_path=IDS).body
    files = {v: k for k, v in PATHS.items()}
    imported = fmt.import_links(
        exported, source_slug="team", target_slug="moved", file="docs/guides/a.md", file_to_path=files, id_to_path=IDS
    )
    out = imported.body
    assert "[A](agor://kb/moved/guides/a.md#setup)" in out
    assert "![img](agor://kb/moved/ref/b%20%28draft%29.md)" in out
    assert '[ref]: <agor://kb/moved/ref/b%20%28draft%29.md> "Title"' in out
    assert "[route](agor://kb/moved/caf%C3%A9.md?x=1)" in out
    assert "`[code](agor://kb/team/guides/a.md)`" in out
    assert imported.unresolved == 2  # the foreign namespace and the missing document, as in the source
    again = fmt.export_links(out, slug="moved", file="docs/guides/a.md", path_to_file=PATHS, id_to_path={}).body
    assert again == exported


@pytest.mark.parametrize(
    "destination",
    ["../../../secret.md", "..\\x.md", "../outside.md", "nope.md", "a%00.md", "%ff.md"],
)
def test_import_counts_unknown_or_escaping_relative_links(destination):
    body = f"[x]({destination})\n"
    result = fmt.import_links(
        body, source_slug="s", target_slug="t", file="docs/a.md", file_to_path={"docs/a.md": "a.md"}, id_to_path={}
    )
    assert result.body == body and result.unresolved == 1


def test_parenthesised_destinations_round_trip():
    paths = {"a)": "docs/a).md", "a(": "docs/a(.md", "x.md": "docs/x.md"}
    body = "[1](agor://kb/s/a%29) [2](agor://kb/s/a%28)\n"
    out = fmt.export_links(body, slug="s", file="docs/x.md", path_to_file=paths, id_to_path={}).body
    assert out == "[1](a%29.md) [2](a%28.md)\n"
    back = fmt.import_links(
        out,
        source_slug="s",
        target_slug="s",
        file="docs/x.md",
        file_to_path={v: k for k, v in paths.items()},
        id_to_path={},
    ).body
    assert back == body


def test_body_front_matter_is_not_rewritten():
    body = "---\nlink: '[x](agor://kb/s/a.md)'\n---\n[y](agor://kb/s/a.md)\n"
    out = fmt.export_links(body, slug="s", file="docs/b.md", path_to_file={"a.md": "docs/a.md"}, id_to_path={}).body
    assert out == "---\nlink: '[x](agor://kb/s/a.md)'\n---\n[y](a.md)\n"


def test_link_targets_for_reconciliation():
    body = "[a](agor://kb/s/x.md) [b](agor://kb/s/y%20z.md#f) [c](agor://kb/t/x.md) `[d](agor://kb/s/q.md)`"
    assert fmt.link_targets(body, "s") == ["x.md", "y z.md"]


# --- fingerprint ---------------------------------------------------------------------------


def test_bundle_fingerprint_depends_on_content_and_target_only():
    ns = fmt.NamespaceInfo("team", "Team", None, {})
    entries = [{"key": "d000001", "sha256": "a" * 64}]
    one = fmt.bundle_fingerprint(ns, "dest", entries)
    assert one == fmt.bundle_fingerprint(ns, "dest", [dict(reversed(list(entries[0].items())))])
    assert one != fmt.bundle_fingerprint(ns, "other", entries)
    assert one != fmt.bundle_fingerprint(ns, "dest", [{"key": "d000001", "sha256": "b" * 64}])


def _random_value(rng: random.Random, depth: int = 0):
    alphabet = list("aZ0 -:#'\"\\\n\r\t\x00\x1b\x7f\x85\u2028\ufeffé☕🚀\u202e~!&*[]{}%@`")
    kind = rng.randrange(8 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.randint(-(2**40), 2**40)
    if kind == 3:
        return rng.choice([0.5, -1e-7, 1e21, 3.14159, 0.0])
    if kind in (4, 5):
        words = ["no", "yes", "on", "null", "~", "012", "1e5", "1:30", "2024-01-01", "0x1F", ".inf", "- x", "a: b"]
        if rng.random() < 0.3:
            return rng.choice(words)
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
    if kind == 6:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {_random_value(rng, 99) if False else str(_random_value(rng, 4)): _random_value(rng, depth + 1)
            for _ in range(rng.randint(0, 3))}  # fmt: skip


def test_emitter_round_trips_random_json_values_through_both_yaml_readers():
    import yaml

    rng = random.Random(20261202)
    for _ in range(400):
        value = {"root": _random_value(rng), "k": _random_value(rng)}
        text = fmt.dump_yaml(value)
        assert fmt.load_yaml(text) == value, text
        assert yaml.safe_load(text) == value, text
        assert all(line not in ("---", "...") for line in text.splitlines())
