"""Local repository access that fails closed: descriptor-anchored, no symlinks, no surprises.

Every path is opened component by component from a held directory descriptor with O_NOFOLLOW,
so a symlink (in the tree or planted between two runs) is refused instead of followed, and a
directory swapped after the check is never written through. Regular files only, one link each,
bounded sizes, strict UTF-8. Writes are atomic: a temp file (O_EXCL, 0600), fsync, rename,
then an fsync of the directory. Temp files never appear under docs/.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from transfer.format import DOCS_DIR, LOCK_DIR, FormatError, fold

LOCK_STALE_SECONDS = 30.0
LOCK_REFRESH_SECONDS = 10.0
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
PRIVATE_DIR_MESSAGE = "Export directories must be owned by you and private (mode 0700)."


class UnsafeLocalFile(FormatError):
    def __init__(self, message: str, *, file: str | None = None) -> None:
        super().__init__(message, code="unsafe_local_file", file=file)


def refuse_windows() -> None:
    if sys.platform.startswith(("win", "cygwin", "msys")):
        raise FormatError(
            "Knowledge export/import is not supported on Windows yet; use WSL.", code="unsupported_platform"
        )


def check_ancestors(path: Path) -> Path:
    """The absolute path, refusing a symlink anywhere along it (the repository and its parents)."""
    absolute = Path(os.path.abspath(path))
    current = Path(absolute.anchor)
    for part in absolute.parts[1:]:
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            break
        if stat.S_ISLNK(info.st_mode):
            raise UnsafeLocalFile("The repository path goes through a symbolic link.")
    return absolute


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _split(rel: str) -> list[str]:
    parts = rel.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise UnsafeLocalFile("An unsafe relative path was requested.")
    return parts


@dataclass
class Listing:
    """What is under docs/: regular files by relative path (with size), plus refused entries."""

    files: dict[str, int] = field(default_factory=dict)


class Repo:
    """A repository directory held open by descriptor; all reads and writes go through it."""

    def __init__(self, root: Path, *, create: bool = False, private: bool = False) -> None:
        refuse_windows()
        self.path = check_ancestors(root)
        if create and not self.path.exists():
            if not self.path.parent.is_dir():
                raise UnsafeLocalFile("The parent of the output directory does not exist.")
            os.mkdir(self.path, 0o700)
        try:
            self.fd = os.open(self.path, _DIR)
        except FileNotFoundError:
            raise FormatError("The repository directory does not exist.", code="not_found") from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UnsafeLocalFile("The repository path is not a plain directory.") from None
            raise
        info = os.fstat(self.fd)
        if private and (info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077):
            os.close(self.fd)
            raise UnsafeLocalFile(PRIVATE_DIR_MESSAGE)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Repo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- directories ---------------------------------------------------------------------

    @contextlib.contextmanager
    def dir_fd(self, rel: str, *, create: bool = False, private: bool = False) -> Iterator[int]:
        """A descriptor for a directory below the root ("" is the root itself)."""
        fds: list[int] = []
        current = self.fd
        try:
            for part in _split(rel) if rel else []:
                try:
                    fd = os.open(part, _DIR, dir_fd=current)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(part, 0o700, dir_fd=current)
                    fd = os.open(part, _DIR, dir_fd=current)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise UnsafeLocalFile(
                            "A path component is a symbolic link or not a directory.", file=rel
                        ) from None
                    raise
                fds.append(fd)
                if private:
                    info = os.fstat(fd)
                    if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
                        raise UnsafeLocalFile(PRIVATE_DIR_MESSAGE, file=rel)
                current = fd
            yield current
        finally:
            for fd in reversed(fds):
                os.close(fd)

    def lstat(self, rel: str) -> os.stat_result | None:
        parent, _, name = rel.rpartition("/")
        try:
            with self.dir_fd(parent) as dfd:
                return os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except UnsafeLocalFile:
            raise
        except NotADirectoryError:
            return None

    def exists(self, rel: str) -> bool:
        return self.lstat(rel) is not None

    # --- reading -------------------------------------------------------------------------

    def read_bytes(self, rel: str, *, max_bytes: int) -> bytes:
        """A regular, singly-linked file of bounded size, never through a symlink."""
        parent, _, name = rel.rpartition("/")
        try:
            with self.dir_fd(parent) as dfd:
                try:
                    fd = os.open(name, _READ, dir_fd=dfd)
                except OSError as exc:
                    if exc.errno == errno.ELOOP:
                        raise UnsafeLocalFile("Symbolic links are not accepted.", file=rel) from None
                    raise
                try:
                    info = os.fstat(fd)
                    if not stat.S_ISREG(info.st_mode):
                        raise UnsafeLocalFile("Only regular files are accepted.", file=rel)
                    if info.st_nlink != 1:
                        raise UnsafeLocalFile("Hard-linked files are not accepted.", file=rel)
                    if info.st_size > max_bytes:
                        raise FormatError("The file exceeds the size limit.", code="limit_exceeded", file=rel)
                    chunks = []
                    remaining = max_bytes + 1
                    while remaining > 0:
                        chunk = os.read(fd, min(remaining, 1 << 20))
                        if not chunk:
                            break
                        chunks.append(chunk)
                        remaining -= len(chunk)
                    data = b"".join(chunks)
                    if len(data) > max_bytes:
                        raise FormatError("The file exceeds the size limit.", code="limit_exceeded", file=rel)
                    return data
                finally:
                    os.close(fd)
        except FileNotFoundError:
            raise FormatError("A listed file is missing.", code="missing_file", file=rel) from None

    def read_text(self, rel: str, *, max_bytes: int) -> str:
        data = self.read_bytes(rel, max_bytes=max_bytes)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise UnsafeLocalFile("The file is not valid UTF-8.", file=rel) from None

    def hash_file(self, rel: str, *, max_bytes: int) -> str | None:
        """sha256 of a file's bytes, or None when it does not exist."""
        if self.lstat(rel) is None:
            return None
        return sha256_bytes(self.read_bytes(rel, max_bytes=max_bytes))

    def walk_docs(self) -> Listing:
        """Every regular file under docs/, refusing links, special files and `.git` components."""
        listing = Listing()
        if self.lstat(DOCS_DIR) is None:
            return listing

        def visit(rel: str) -> None:
            with self.dir_fd(rel) as dfd, os.scandir(dfd) as entries:
                for entry in entries:
                    name = entry.name
                    child = f"{rel}/{name}"
                    if any(0xDC80 <= ord(ch) <= 0xDCFF for ch in name):
                        raise UnsafeLocalFile("A file name is not valid UTF-8.", file=rel)
                    if fold(name).rstrip(". ") == ".git":
                        raise UnsafeLocalFile("A .git component is not allowed under docs/.", file=child)
                    info = entry.stat(follow_symlinks=False)
                    if stat.S_ISLNK(info.st_mode):
                        raise UnsafeLocalFile("Symbolic links are not accepted.", file=child)
                    if stat.S_ISDIR(info.st_mode):
                        visit(child)
                    elif stat.S_ISREG(info.st_mode):
                        if info.st_nlink != 1:
                            raise UnsafeLocalFile("Hard-linked files are not accepted.", file=child)
                        listing.files[child] = info.st_size
                    else:
                        raise UnsafeLocalFile("Only regular files and folders are accepted.", file=child)

        visit(DOCS_DIR)
        return listing

    # --- writing -------------------------------------------------------------------------

    def write_atomic(self, rel: str, data: bytes, *, durable: bool = True) -> None:
        """Temp file (0600, O_EXCL) -> fsync -> rename -> fsync of the directory.

        `durable=False` skips both fsyncs, for bulk writes that the caller makes durable at once
        with `sync()` before anything depends on them (the journal, the baseline).
        """
        parent, _, name = rel.rpartition("/")
        with self.dir_fd(parent, create=True) as dfd:
            temp_name = f".{name[:40]}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
            fd = os.open(
                temp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd
            )
            try:
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                if durable:
                    os.fsync(fd)
            except BaseException:
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(temp_name, dir_fd=dfd)
                raise
            os.close(fd)
            os.rename(temp_name, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            if durable:
                os.fsync(dfd)

    @staticmethod
    def sync() -> None:
        """Flush every pending write to disk once (instead of one fsync per bulk file)."""
        os.sync()

    def fsync_dir(self, rel: str) -> None:
        with self.dir_fd(rel) as dfd:
            os.fsync(dfd)

    def move(self, source: str, target: str, *, durable: bool = True) -> None:
        """Rename a staged file onto its place (parents created 0700), then fsync the directory."""
        source_parent, _, source_name = source.rpartition("/")
        target_parent, _, target_name = target.rpartition("/")
        with self.dir_fd(source_parent) as sfd, self.dir_fd(target_parent, create=True) as tfd:
            info = os.stat(target_name, dir_fd=tfd, follow_symlinks=False) if self._has(tfd, target_name) else None
            if info is not None and not stat.S_ISREG(info.st_mode):
                raise UnsafeLocalFile("A target is not a regular file.", file=target)
            os.rename(source_name, target_name, src_dir_fd=sfd, dst_dir_fd=tfd)
            if durable:
                os.fsync(tfd)

    @staticmethod
    def _has(dfd: int, name: str) -> bool:
        try:
            os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def remove(self, rel: str) -> None:
        parent, _, name = rel.rpartition("/")
        with contextlib.suppress(FileNotFoundError), self.dir_fd(parent) as dfd:
            os.unlink(name, dir_fd=dfd)

    def list_dir(self, rel: str) -> list[str]:
        try:
            with self.dir_fd(rel) as dfd:
                return sorted(os.listdir(dfd))
        except FileNotFoundError:
            return []


# --- the export lock -----------------------------------------------------------------------


def lock_is_held(repo: Repo) -> bool:
    """A lock directory refreshed within the last 30 seconds."""
    info = repo.lstat(LOCK_DIR)
    if info is None:
        return False
    return time.time() - info.st_mtime <= LOCK_STALE_SECONDS


class ExportLock:
    """`.agor-lock/`, created with mkdir (atomic), refreshed every 10 s, reclaimable 30 s after a hard exit."""

    def __init__(self, repo: Repo) -> None:
        self.repo = repo
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> None:
        for _ in range(2):
            try:
                os.mkdir(LOCK_DIR, 0o700, dir_fd=self.repo.fd)
                break
            except FileExistsError:
                info = os.stat(LOCK_DIR, dir_fd=self.repo.fd, follow_symlinks=False)
                if not stat.S_ISDIR(info.st_mode):
                    raise UnsafeLocalFile("The export lock is not a directory.") from None
                if time.time() - info.st_mtime <= LOCK_STALE_SECONDS:
                    raise FormatError(
                        "Another export is running in this directory (or exited less than 30 s ago).",
                        code="locked",
                    ) from None
                # Stale: move it aside first, so two reclaimers cannot both win.
                aside = f"{LOCK_DIR}.stale-{secrets.token_hex(4)}"
                with contextlib.suppress(FileNotFoundError):
                    os.rename(LOCK_DIR, aside, src_dir_fd=self.repo.fd, dst_dir_fd=self.repo.fd)
                    os.rmdir(aside, dir_fd=self.repo.fd)
        else:
            raise FormatError("Could not take the export lock.", code="locked")
        self._thread = threading.Thread(target=self._refresh, name="agor-export-lock", daemon=True)
        self._thread.start()

    def _refresh(self) -> None:
        while not self._stop.wait(LOCK_REFRESH_SECONDS):
            with contextlib.suppress(OSError):
                os.utime(LOCK_DIR, dir_fd=self.repo.fd, follow_symlinks=False)

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)
        with contextlib.suppress(OSError):
            os.rmdir(LOCK_DIR, dir_fd=self.repo.fd)

    def __enter__(self) -> ExportLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
