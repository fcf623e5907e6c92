"""Bringing a Job's workspace back: the archive the pod printed, checked as hostile input, laid over the fork.

A wide round's proposal runs its agent command in a pod on a copy of its fork (the pack). When
the command succeeds, the pod prints its working directory as a gzipped tar, base64, after a
delimiter of its own; here that archive replaces the files the pack shipped: files it holds are
written, shipped files it lacks are deleted. The fork's own capture (a diff against the kept
commit) then takes the candidate, exactly as for a proposal made on this machine.

Everything in the archive is the agent's doing, so it is refused whole, before anything is
written, when it is too large (compressed or unpacked), holds too many members, names a path
that is absolute or climbs out (`..`), or holds anything but plain files and directories
(links, devices, fifos). Members under the pack's skip list (`.git`, `state`, `.venv`,
`__pycache__`) are ignored, never written; nothing is ever written through a symbolic link,
and a path whose parent in the fork is a link refuses the archive.

A task that declares files (`emits_files`) gets only those back, in an archive of their own
after another delimiter, whatever its command's exit code: the same checks apply, and besides
every member must be one of the declared paths and a plain file. They are written into the
task's workdir on this machine, where the executor captures them as it captures a local
task's; a declared path the pod did not have is removed here too, so it is missing for the
capture exactly as it was in the pod.
"""

from __future__ import annotations

import base64
import io
import os
import stat
import tarfile
import zlib
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

import attrs

WORKSPACE_DELIMITER = "=== CRUCIBLE TASK WORKSPACE ==="
FILES_DELIMITER = "=== CRUCIBLE TASK FILES ==="
MAX_ARCHIVE_BYTES = 16 << 20  # the gzipped archive, decoded
MAX_UNPACKED_BYTES = 64 << 20  # the tar stream once unzipped (file contents and headers)
MAX_MEMBERS = 20_000
# The log text the runner keeps per attempt must hold the archive in base64, plus the rest.
MAX_ENCODED_CHARS = (MAX_ARCHIVE_BYTES * 4) // 3 + (MAX_ARCHIVE_BYTES // 76) + 4096


class ReturnRefused(Exception):
    """The archive cannot be laid over the fork; the message says why (nothing was written)."""


@attrs.frozen
class ReturnedFile:
    path: str  # relative, POSIX, checked
    data: bytes
    executable: bool


@attrs.frozen
class ReturnedWorkspace:
    files: tuple[ReturnedFile, ...]
    directories: tuple[str, ...]


def split_workspace(
    text: str, stdout_delimiter: str, delimiter: str = WORKSPACE_DELIMITER
) -> tuple[str, str | None]:
    """(the log before the section `delimiter` opens, its base64 text, or None when there is none).

    The section counts only when it follows the script's stdout section: anything the command
    printed comes before that, so a delimiter it faked is never taken for the pod's own. The
    script prints its sections in a fixed order; split the last one off first.
    """
    at = text.rfind("\n" + delimiter)
    stdout_at = text.rfind("\n" + stdout_delimiter)
    if at < 0 or stdout_at < 0 or stdout_at > at:
        return text, None
    head, _, encoded = text[at + 1 :].partition("\n")
    if head.strip() != delimiter:
        return text, None
    return text[:at], encoded


def decode_archive(encoded: str) -> bytes:
    """The section's bytes; ReturnRefused when it is too long or not base64 (cut short, tampered)."""
    compact = "".join(encoded.split())
    if len(compact) > MAX_ENCODED_CHARS:
        raise ReturnRefused(f"the workspace it left is over {MAX_ARCHIVE_BYTES} bytes compressed")
    try:
        return base64.b64decode(compact, validate=True)
    except ValueError:
        raise ReturnRefused("the workspace it left did not arrive whole (not base64)") from None


def _gunzip(raw: bytes) -> bytes:
    if len(raw) > MAX_ARCHIVE_BYTES:
        raise ReturnRefused(f"the workspace it left is over {MAX_ARCHIVE_BYTES} bytes compressed")
    inflate = zlib.decompressobj(wbits=31)  # gzip framing only
    try:
        plain = inflate.decompress(raw, MAX_UNPACKED_BYTES + 1)
    except zlib.error as exc:
        raise ReturnRefused(f"the workspace it left is not a gzip stream ({exc})") from None
    if len(plain) > MAX_UNPACKED_BYTES or inflate.unconsumed_tail:
        raise ReturnRefused(f"the workspace it left unpacks to over {MAX_UNPACKED_BYTES} bytes")
    return plain


def _relative(name: str) -> str | None:
    """The member's path relative to the workspace; None for the root itself; refused when unsafe."""
    if "\0" in name or "\\" in name:
        raise ReturnRefused(f"the archive names {name!r}, which is not a plain relative path")
    if name.startswith("/"):
        raise ReturnRefused(f"the archive names the absolute path {name!r}")
    parts = [part for part in PurePosixPath(name).parts if part != "."]
    if any(part == ".." for part in parts):
        raise ReturnRefused(f"the archive names {name!r}, which climbs out of the workspace")
    return "/".join(parts) or None


def read_archive(raw: bytes, skip: frozenset[str]) -> ReturnedWorkspace:
    """Check every member and read the files; ReturnRefused on the first that is not acceptable."""
    plain = _gunzip(raw)
    files: list[ReturnedFile] = []
    directories: list[str] = []
    try:
        with tarfile.open(fileobj=io.BytesIO(plain), mode="r:") as archive:
            members = archive.getmembers()
            if len(members) > MAX_MEMBERS:
                raise ReturnRefused(f"the workspace it left holds over {MAX_MEMBERS} entries")
            for member in members:
                rel = _relative(member.name)
                if not (member.isreg() or member.isdir()):
                    what = "link" if member.issym() or member.islnk() else "special file"
                    raise ReturnRefused(
                        f"the archive holds {member.name!r}, a {what}: only plain files come back"
                    )
                if rel is None or any(part in skip for part in rel.split("/")):
                    continue  # the workspace root, or what the pack never ships (.git, state, ...)
                if member.isdir():
                    directories.append(rel)
                    continue
                source = archive.extractfile(member)
                data = source.read() if source is not None else b""
                files.append(ReturnedFile(rel, data, bool(member.mode & 0o111)))
    except tarfile.TarError as exc:
        raise ReturnRefused(f"the workspace it left is not a whole tar archive ({exc})") from None
    return ReturnedWorkspace(tuple(files), tuple(directories))


def _real_directory(root: Path, rel: str) -> Path:
    """`root/rel` as a directory made of real directories (made as needed); never through a link."""
    current = root
    for part in rel.split("/") if rel else []:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            os.mkdir(current, 0o755)
            continue
        if stat.S_ISLNK(mode):
            raise ReturnRefused(f"{rel!r} would be written through the link {current.relative_to(root)!s}")
        if not stat.S_ISDIR(mode):
            current.unlink()  # the command replaced a file with a directory
            os.mkdir(current, 0o755)
    return current


def _refuse_links_on_the_way(root: Path, rel: str) -> None:
    current = root
    for part in rel.split("/")[:-1]:
        current = current / part
        if current.is_symlink():
            raise ReturnRefused(f"{rel!r} would be written through the link {current.relative_to(root)!s}")
        if not current.exists():
            return


def replace_workspace(root: Path, returned: ReturnedWorkspace, shipped: Iterable[str]) -> tuple[int, int]:
    """Lay the returned files over `root`; delete the shipped files it no longer holds.

    (files written, files deleted). Checks every path against the fork before writing any.
    """
    kept = {item.path for item in returned.files}
    gone = [rel for rel in shipped if rel not in kept]
    for item in returned.files:
        _refuse_links_on_the_way(root, item.path)
        target = root / item.path
        if target.is_dir() and not target.is_symlink():
            raise ReturnRefused(f"{item.path!r} replaces a directory of the workspace with a file")
    for rel in returned.directories:
        _refuse_links_on_the_way(root, rel + "/x")  # the directory itself must not be a link
    for rel in gone:
        _refuse_links_on_the_way(root, rel)
    for rel in returned.directories:
        _real_directory(root, rel)
    for item in returned.files:
        parent, _, name = item.path.rpartition("/")
        directory = _real_directory(root, parent)
        target = directory / name
        if target.is_symlink():
            target.unlink()  # the pod had a plain file here: the link itself goes, never its target
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as out:
            out.write(item.data)
        os.chmod(target, 0o755 if item.executable else 0o644)
    deleted = 0
    for rel in gone:
        target = root / rel
        if target.is_file() and not target.is_symlink():
            target.unlink()
            deleted += 1
    return len(returned.files), deleted


def bring_back(root: Path, encoded: str, shipped: Iterable[str], skip: frozenset[str]) -> tuple[int, int]:
    """Decode and read the archive (refused whole when unacceptable), then lay it over `root`.

    (files written, files deleted); ReturnRefused says why nothing was written.
    """
    returned = read_archive(decode_archive(encoded), skip)
    try:
        return replace_workspace(root, returned, shipped)
    except OSError as exc:  # a path the file system refuses (too long, a name it cannot hold)
        raise ReturnRefused(f"the workspace could not be laid over the fork: {exc}") from None


def _refuse_what_is_not_a_directory(root: Path, rel: str) -> None:
    """Every existing parent of `rel` in `root` must be a real directory: never a link, never a file.

    A declared file is written where the task's own command would have written it; it never
    replaces a file of this machine's workdir with a directory, nor passes through a link.
    """
    current = root
    for part in rel.split("/")[:-1]:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISLNK(mode):
            raise ReturnRefused(f"{rel!r} would be written through the link {current.relative_to(root)!s}")
        if not stat.S_ISDIR(mode):
            raise ReturnRefused(
                f"{rel!r} cannot be written: {current.relative_to(root)!s} is not a directory here"
            )
    target = root / rel
    if target.is_dir() and not target.is_symlink():
        raise ReturnRefused(f"{rel!r} is a directory here, not a declared file")


def check_declared(returned: ReturnedWorkspace, declared: Iterable[str]) -> None:
    """Only the declared paths, each a plain file, may come back; ReturnRefused names the first other."""
    wanted = set(declared)
    for rel in returned.directories:
        what = "a declared path" if rel in wanted else "not declared"
        raise ReturnRefused(
            f"the archive holds the directory {rel!r} ({what}): only declared files come back"
        )
    seen: set[str] = set()
    for item in returned.files:
        if item.path not in wanted:
            raise ReturnRefused(f"the archive holds {item.path!r}, which the task did not declare")
        if item.path in seen:
            raise ReturnRefused(f"the archive holds {item.path!r} twice")
        seen.add(item.path)


def bring_back_files(root: Path, encoded: str, declared: tuple[str, ...]) -> tuple[int, int]:
    """Lay a task's declared files over `root`: (files written, declared files removed as absent).

    `encoded` is the files section the pod printed (empty when it had none of them). The archive
    is refused whole, before anything is written, for every reason `bring_back` refuses one and
    when it holds anything but the declared paths as plain files; nothing is written through a
    link or over a directory of `root`, and an absent path's local file (or link, never its
    target) is removed so the capture finds it missing.
    """
    if encoded.strip():
        returned = read_archive(decode_archive(encoded), frozenset())
    else:
        returned = ReturnedWorkspace((), ())
    check_declared(returned, declared)
    for rel in declared:
        _refuse_what_is_not_a_directory(root, rel)
    kept = {item.path for item in returned.files}
    try:
        written, deleted = replace_workspace(root, returned, declared)
        for rel in declared:
            target = root / rel
            if rel not in kept and target.is_symlink():
                target.unlink()  # the link itself: a missing declared file, as in the pod
                deleted += 1
    except OSError as exc:
        raise ReturnRefused(f"the declared files could not be written: {exc}") from None
    return written, deleted
