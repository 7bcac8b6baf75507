"""Every unsafe or invalid repository is refused before any write, by validate and by import --apply."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from knowledge.models import Document
from tests.transfer.helpers import agor, cli_env
from transfer import format as fmt
from transfer.localfs import Repo, refuse_windows
from transfer.models import ImportReceipt
from transfer.repository import build_plan, read_repository, rewritten_body
from workspaces.models import Namespace

SECRET = "TOPSECRET-4711"


def make_repo(root: Path, bodies: dict[str, str] | None = None) -> Path:
    """A valid version-2 repository written with the format module (no server needed)."""
    bodies = bodies or {"a.md": "# A\n\n[b](agor://kb/src/b.md)\n", "b.md": "# B\n"}
    root.mkdir(mode=0o700, parents=True)
    mapping = fmt.map_files(bodies)
    for path, body in bodies.items():
        header = fmt.Header(str(uuid.uuid5(uuid.NAMESPACE_URL, path)), path, path, None, "doc", "published", None, {})
        file = root / mapping[path]
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(fmt.render_document(header, body), encoding="utf-8")
    manifest = fmt.Manifest(fmt.NamespaceInfo("src", "Source", None, {}), sorted(mapping.values()), [])
    (root / "manifest.yaml").write_text(fmt.render_manifest(manifest), encoding="utf-8")
    return root


def offline_env() -> dict[str, str]:
    return cli_env(config_dir=Path("/nonexistent-agor-config"))


def snapshot(root: Path) -> dict[str, tuple[int, bytes | None]]:
    found = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        found[str(path.relative_to(root))] = (
            info.st_mode,
            path.read_bytes() if path.is_file() and not path.is_symlink() else None,
        )
    return found


def _symlink(root: Path) -> None:
    (root / "docs/a.md").unlink()
    (root / "docs/a.md").symlink_to("/etc/hostname")


def _symlink_dir(root: Path) -> None:
    (root / "docs/sub").symlink_to("/etc")


def _hardlink(root: Path) -> None:
    os.link(root / "docs/b.md", root / "b-copy.md")


def _fifo(root: Path) -> None:
    os.mkfifo(root / "docs/pipe.md")


def _invalid_utf8(root: Path) -> None:
    path = root / "docs/b.md"
    path.write_bytes(path.read_bytes() + b"\xff\xfe" + SECRET.encode())


def _git_component(root: Path) -> None:
    (root / "docs/.git").mkdir()
    (root / "docs/.git/config.md").write_text("x")


def _header_yaml(extra: str) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        path = root / "docs/b.md"
        text = path.read_text()
        path.write_text(
            text.replace("format: agor-knowledge-document\n", f"format: agor-knowledge-document\n{extra}", 1)
        )

    return mutate


def _v1(root: Path) -> None:
    (root / "manifest.json").write_text('{"version": 1}')


def _missing(root: Path) -> None:
    (root / "docs/b.md").unlink()


def _huge(root: Path) -> None:
    path = root / "docs/b.md"
    path.write_text(path.read_text() + "x" * (fmt.MAX_DOCUMENT_BYTES + 1))


def _quote_expanded(root: Path) -> None:
    # 6 MiB of quotes is within the body limit but doubles to 12 MiB once JSON-escaped.
    path = root / "docs/b.md"
    path.write_text(path.read_text() + '"' * (6 * fmt.MIB))


def _pending(root: Path) -> None:
    (root / ".agor").mkdir(mode=0o700)
    (root / ".agor/pending.json").write_text('{"writes": []}')


def _locked(root: Path) -> None:
    (root / ".agor-lock").mkdir(mode=0o700)


def _unsafe_manifest(root: Path) -> None:
    path = root / "manifest.yaml"
    path.write_text(path.read_text().replace("- docs/b.md", "- docs/../b.md"))


def _duplicate_id(root: Path) -> None:
    a, b = root / "docs/a.md", root / "docs/b.md"
    a_id = fmt.parse_header(fmt.split_document(a.read_text())[0]).id
    b_id = fmt.parse_header(fmt.split_document(b.read_text())[0]).id
    b.write_text(b.read_text().replace(b_id, a_id))


REJECTIONS = {
    "symlink": (_symlink, "Symbolic links"),
    "symlinked-folder": (_symlink_dir, "Symbolic links"),
    "hardlink": (_hardlink, "Hard-linked"),
    "fifo": (_fifo, "Only regular files"),
    "invalid-utf8": (_invalid_utf8, "not valid UTF-8"),
    "git-component": (_git_component, ".git"),
    "duplicate-key": (_header_yaml(f"format: {SECRET}\n"), fmt.YAML_ERROR),
    "alias": (_header_yaml(f"x: &a {SECRET}\ny: *a\n"), fmt.YAML_ERROR),
    "tag": (_header_yaml(f"x: !!str {SECRET}\n"), fmt.YAML_ERROR),
    "python-tag": (_header_yaml(f"x: !!python/object:os.system {SECRET}\n"), fmt.YAML_ERROR),
    "merge-key": (_header_yaml(f"<<: {{k: {SECRET}}}\n"), fmt.YAML_ERROR),
    "nesting": (_header_yaml("x: " + "[" * 60 + "]" * 60 + "\n"), fmt.YAML_ERROR),
    "version-1": (_v1, "version 1"),
    "missing-file": (_missing, "missing"),
    "body-limit": (_huge, "exceeds 10 MiB"),
    "request-limit": (_quote_expanded, "9 MiB"),
    "interrupted-publication": (_pending, "interrupted"),
    "locked": (_locked, "export is running"),
    "unsafe-manifest": (_unsafe_manifest, "Unsafe document file name"),
    "duplicate-id": (_duplicate_id, "agor.id"),
}


def test_the_fixture_repository_is_valid(tmp_path):
    root = make_repo(tmp_path / "repo")
    (root / "docs/notes.txt").write_text("not listed")
    run = agor("kb", "validate", str(root), env=offline_env())
    assert run.code == 0, run.stderr
    assert run.json["valid"] is True and run.json["documents"] == 2 and run.json["unlisted"] == ["docs/notes.txt"]
    assert run.json["unresolved"] == 0 and len(run.json["bundle"]) == 64


@pytest.mark.parametrize("case", sorted(REJECTIONS))
def test_validate_rejects_without_echoing_or_writing(case, tmp_path):
    mutate, message = REJECTIONS[case]
    root = make_repo(tmp_path / "repo")
    mutate(root)
    before = snapshot(root)
    run = agor("kb", "validate", str(root), env=offline_env())
    assert run.code == 1, (case, run.stdout, run.stderr)
    assert run.json["valid"] is False and message.lower() in (run.stdout + run.stderr).lower(), (case, run.stderr)
    assert SECRET not in run.stdout + run.stderr
    assert snapshot(root) == before


def test_symlinked_ancestor_is_refused(tmp_path):
    real = make_repo(tmp_path / "real")
    (tmp_path / "link").symlink_to(real)
    run = agor("kb", "validate", str(tmp_path / "link"), env=offline_env())
    assert run.code == 1 and "symbolic link" in run.stderr


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", ["symlink", "hardlink", "invalid-utf8", "duplicate-key", "version-1", "request-limit",
                                  "interrupted-publication", "missing-file"])  # fmt: skip
def test_import_apply_rejects_before_any_server_write(case, live_server, alice, tmp_path):
    mutate, message = REJECTIONS[case]
    root = make_repo(tmp_path / "repo")
    mutate(root)
    before = snapshot(root)
    env = cli_env(live_server.url, alice.token, tmp_path / "cfg")
    run = agor("kb", "import", str(root), "--namespace", "dest", "--apply", env=env)
    assert run.code == 1, (case, run.stderr)
    assert message.lower() in run.stderr.lower() and SECRET not in run.stdout + run.stderr
    assert not Namespace.objects.filter(slug="dest").exists()
    assert Document.objects.count() == 0 and ImportReceipt.objects.count() == 0
    assert snapshot(root) == before


def test_files_changed_after_planning_are_refused(tmp_path):
    root = make_repo(tmp_path / "repo")
    with Repo(root) as repo:
        snap = read_repository(repo)
        build_plan(repo, snap, "dest")
        (root / "docs/a.md").write_text((root / "docs/a.md").read_text() + "edit\n")
        with pytest.raises(fmt.FormatError) as info:
            rewritten_body(repo, snap, snap.documents[0], "dest")
    assert info.value.code == "changed_after_planning"


def test_windows_is_refused_with_a_pointer_to_wsl(monkeypatch):
    monkeypatch.setattr("sys.platform", "win32")
    with pytest.raises(fmt.FormatError) as info:
        refuse_windows()
    assert "use WSL" in info.value.message


def test_editing_bodies_and_yaml_layout_in_git(tmp_path):
    """Reformatting YAML keeps the bundle; editing a body changes it (a new import)."""
    root = make_repo(tmp_path / "repo")
    with Repo(root) as repo:
        original = build_plan(repo, read_repository(repo), "dest").bundle
    path = root / "docs/b.md"
    header, body = fmt.split_document(path.read_text())
    data = fmt.load_yaml(header)
    reordered = "# edited in git\n" + yaml.safe_dump(
        dict(reversed(list(data.items()))), sort_keys=False, default_flow_style=True, width=40, indent=4
    )
    path.write_text("---\n" + reordered + "---\n" + body)
    with Repo(root) as repo:
        assert build_plan(repo, read_repository(repo), "dest").bundle == original
    path.write_text("---\n" + reordered + "---\n" + body + "new line\n")
    with Repo(root) as repo:
        assert build_plan(repo, read_repository(repo), "dest").bundle != original
