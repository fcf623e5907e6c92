"""Moving the workspace into a sandbox and its edits back: bounded tar archives, hostile on the way back.

Up: every file of the workspace except `.git/` and the engine's own paths inside it, symlinks
kept as links (never followed). Down: the sandbox's tree is untrusted output. It is unpacked
with tarfile's `data` filter (no absolute paths, no links leaving the tree, no devices) into a
private temporary directory, then synced into the workspace file by file without following a
link in the workspace: new and changed files are written, files that were uploaded and are
gone in the sandbox are deleted, and nothing outside the workspace or under an excluded path
is touched.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path

import attrs

ALWAYS_EXCLUDED = (".git/",)


class TransferError(Exception):
    """The workspace or the sandbox's tree could not be moved (too large, unreadable, malformed)."""


@attrs.frozen
class Packed:
    data: bytes
    paths: frozenset[str]  # workspace-relative posix paths of every file and link in the archive


def _excluded(rel: str, excluded: Iterable[str]) -> bool:
    for prefix in excluded:
        if prefix.endswith("/"):
            if rel == prefix[:-1] or rel.startswith(prefix):
                return True
        elif rel == prefix:
            return True
    return False


def pack_workspace(workspace: Path, excluded: Iterable[str], limit: int) -> Packed:
    excluded = (*ALWAYS_EXCLUDED, *excluded)
    buffer = io.BytesIO()
    paths: set[str] = set()
    total = 0
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for root, dirs, files in os.walk(workspace, followlinks=False):
            base = Path(root)
            rel_root = base.relative_to(workspace).as_posix()
            for name in sorted(dirs):
                rel = name if rel_root == "." else f"{rel_root}/{name}"
                if _excluded(rel, excluded) or _excluded(rel + "/", excluded):
                    dirs.remove(name)
                elif (base / name).is_symlink():
                    dirs.remove(name)  # a link to a directory travels as a link, never followed
                    archive.add(base / name, arcname=rel, recursive=False)
                    paths.add(rel)
            for name in sorted(files):
                rel = name if rel_root == "." else f"{rel_root}/{name}"
                if _excluded(rel, excluded):
                    continue
                path = base / name
                mode = path.lstat().st_mode
                if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                    continue  # sockets, fifos, devices stay home
                total += path.lstat().st_size
                if total > limit:
                    raise TransferError(f"the workspace is larger than max_transfer_bytes ({limit} bytes)")
                archive.add(path, arcname=rel, recursive=False)
                paths.add(rel)
    return Packed(buffer.getvalue(), frozenset(paths))


def pack_files(files: dict[str, tuple[bytes, int]]) -> bytes:
    """An archive of named files (relative paths) with the given modes: private configs, session stores."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for rel, (data, mode) in sorted(files.items()):
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            info.mode = mode
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def sync_back(
    data: bytes, workspace: Path, uploaded: frozenset[str], excluded: Iterable[str], limit: int
) -> list[str]:
    """Make the workspace match the sandbox's tree; returns the workspace-relative paths changed."""
    if len(data) > limit:
        raise TransferError(f"the sandbox's tree is larger than max_transfer_bytes ({limit} bytes)")
    excluded = (*ALWAYS_EXCLUDED, *excluded)
    scratch = Path(tempfile.mkdtemp(prefix="crucible-openshell-"))
    try:
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
                archive.extractall(scratch, filter="data")
        except (tarfile.TarError, OSError) as exc:
            raise TransferError(f"the sandbox's tree could not be unpacked: {exc}") from exc
        returned: dict[str, Path] = {}
        for root, dirs, files in os.walk(scratch, followlinks=False):
            base = Path(root)
            for name in [*dirs, *files]:
                path = base / name
                rel = path.relative_to(scratch).as_posix()
                if _excluded(rel, excluded) or _excluded(rel + "/", excluded):
                    if name in dirs:
                        dirs.remove(name)
                    continue
                if path.is_symlink() or path.is_file():
                    returned[rel] = path
        changed: list[str] = []
        for rel, source in sorted(returned.items()):
            if _write_into(workspace, rel, source):
                changed.append(rel)
        for rel in sorted(uploaded - returned.keys()):
            if _remove_from(workspace, rel):
                changed.append(rel)
        return changed
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _safe_parent(workspace: Path, rel: str) -> Path | None:
    """The directory a workspace path lives in, created if needed, or None if reaching it crosses a link."""
    current = workspace
    for part in rel.split("/")[:-1]:
        current = current / part
        if current.is_symlink():
            return None
        if not current.exists():
            current.mkdir()
        elif not current.is_dir():
            return None
    return current


def _same(target: Path, source: Path) -> bool:
    if source.is_symlink() or target.is_symlink():
        return source.is_symlink() and target.is_symlink() and os.readlink(source) == os.readlink(target)
    if not target.is_file():
        return False
    if (target.stat().st_mode & 0o111) != (source.stat().st_mode & 0o111):
        return False
    return target.stat().st_size == source.stat().st_size and target.read_bytes() == source.read_bytes()


def _write_into(workspace: Path, rel: str, source: Path) -> bool:
    parent = _safe_parent(workspace, rel)
    if parent is None:
        return False
    target = parent / rel.rsplit("/", 1)[-1]
    if target.exists() or target.is_symlink():
        if _same(target, source):
            return False
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink()
    if source.is_symlink():
        os.symlink(os.readlink(source), target)
        return True
    mode = 0o755 if source.stat().st_mode & 0o111 else 0o644
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "wb") as out, source.open("rb") as src:
        shutil.copyfileobj(src, out)
    return True


def _remove_from(workspace: Path, rel: str) -> bool:
    parent = _safe_parent_existing(workspace, rel)
    if parent is None:
        return False
    target = parent / rel.rsplit("/", 1)[-1]
    if target.is_symlink() or target.is_file():
        target.unlink()
        return True
    return False


def _safe_parent_existing(workspace: Path, rel: str) -> Path | None:
    current = workspace
    for part in rel.split("/")[:-1]:
        current = current / part
        if current.is_symlink() or not current.is_dir():
            return None
    return current
