"""Declared artifacts ([[workspace.artifact]]): the newest matching file of each, read from the workspace as hostile input.

A declared artifact names a carried path (`codegen-out/runtime`) and, inside it, the file to
publish: `embed` (shown in the PR body, collapsed, and written to the run record) and/or
`upload` (the run record only). The agent writes that tree, so collecting it trusts nothing:

- the newest match wins (modification time, then the natural order of the path, so `V10`
  follows `V9`), which lets a versioned pipeline (V1 ... V7, a `summary.txt` in each) surface
  its last version; the walk is bounded in entries and depth;
- every directory is opened below the one above it without following a link, and the file
  itself is opened without following one and without blocking (a FIFO never hangs the run),
  then checked on the open descriptor: a regular file with a single hard link (a hard link
  could carry a file from outside the workspace), nothing else;
- an embed reads at most EMBED_MAX_BYTES (longer text is cut and marked), must be text, and is
  redacted like every file the run writes; an upload is copied up to UPLOAD_MAX_BYTES (a
  larger one is refused: a cut binary is useless) into a private, content-addressed staging
  directory, so what a record later uploads is the copy, not a path the agent can swap.

The two consumers: `embed_markdown` (the PR body's collapsed sections) and `record_files`
(what a run record's `artifacts/` folder takes). `to_wire` is the session log's account of it.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import suppress
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Protocol

import attrs

from crucible_core.contract import wire
from crucible_core.contract.plain_text import plain
from crucible_core.contract.records import value_methods

EMBED_MAX_BYTES = 16 * 1024  # of one embedded file: what a PR body shows of it
UPLOAD_MAX_BYTES = 32 * 1024 * 1024  # of one uploaded file: what a run record takes
MAX_WALK_ENTRIES = 10_000  # directory entries looked at under one declared path
MAX_WALK_DEPTH = 32
MAX_NOTES = 20  # entries passed over that one collection names (a tree of links must not flood the log)
# Characters of artifact sections one PR body takes (GitHub refuses a body over 65536): the
# sections past it are named, not shown.
MAX_EMBED_MARKDOWN = 48 * 1024

EMBED = "embed"
UPLOAD = "upload"
TAKEN = "taken"
MISSING = "missing"
REFUSED = "refused"

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1 << 20
_DIGITS = re.compile(r"(\d+)")


class Declared(Protocol):
    """One [[workspace.artifact]] entry (crucible_core.manifest.models.ArtifactEntry)."""

    @property
    def path(self) -> str: ...
    @property
    def embed(self) -> str | None: ...
    @property
    def upload(self) -> str | None: ...
    @property
    def heading(self) -> str: ...


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class CollectedArtifact:
    """What one declared embed or upload yielded: the file taken, or why none was."""

    source: str  # the declared path
    mode: str  # EMBED or UPLOAD
    pattern: str  # the declared file name (a glob), matched inside `source`
    title: str  # the PR body's heading
    status: str  # TAKEN, MISSING (nothing matches yet) or REFUSED (see note)
    name: str = ""  # the workspace-relative path of the newest match
    size: int = 0  # its length in bytes
    digest: str = ""  # sha256:<hex> of what the record keeps (an embed: its redacted text)
    truncated: bool = False  # an embed longer than EMBED_MAX_BYTES, cut there
    text: str = ""  # an embed's redacted text
    staged: Path | None = None  # the private copy a record takes (None without a staging directory)
    note: str = ""  # why nothing was taken, in a few words

    @property
    def taken(self) -> bool:
        return self.status == TAKEN


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Collected:
    items: tuple[CollectedArtifact, ...] = ()
    # entries the collection passed over (a link or a FIFO named like the wanted file, a walk
    # cut at its bound), each in a few words
    notes: tuple[str, ...] = ()

    @property
    def embeds(self) -> tuple[CollectedArtifact, ...]:
        return tuple(item for item in self.items if item.mode == EMBED)


class _Refused(Exception):
    """The newest match cannot be taken; the message says why in a few words."""


def collect_artifacts(
    workspace: Path,
    declared: Sequence[Declared],
    *,
    redact: Callable[[str], str] = lambda text: text,
    stage_dir: Path | None = None,
) -> Collected:
    """The newest match of every declared embed and upload in `workspace`, read as hostile input.

    `redact` masks secrets in an embed's text (and in every file name reported); with
    `stage_dir`, each file taken is copied there (mode 0600, named by its digest) for a record.
    """
    items: list[CollectedArtifact] = []
    notes: list[str] = []
    for entry in declared:
        wanted = [
            (mode, pattern) for mode, pattern in ((EMBED, entry.embed), (UPLOAD, entry.upload)) if pattern
        ]
        found, passed_over = _walk(workspace, entry.path, [pattern for _, pattern in wanted])
        notes += [redact(note) for note in passed_over]
        for (mode, pattern), matches in zip(wanted, found, strict=True):
            base = CollectedArtifact(
                source=entry.path, mode=mode, pattern=pattern, title=entry.heading, status=MISSING
            )
            if isinstance(matches, str):  # the declared path itself was refused
                items.append(attrs.evolve(base, status=REFUSED, note=matches))
                continue
            if not matches:
                items.append(attrs.evolve(base, note=f"no file matches {pattern!r}"))
                continue
            newest = max(matches, key=lambda match: (match[0], _natural(match[1])))[1]
            name = redact("/".join([entry.path.rstrip("/"), *newest]) if newest else entry.path.rstrip("/"))
            try:
                taken = _take(workspace, entry.path, newest, mode, redact, stage_dir)
            except _Refused as refused:
                items.append(attrs.evolve(base, status=REFUSED, name=name, note=str(refused)))
                continue
            items.append(
                attrs.evolve(taken, source=entry.path, pattern=pattern, title=entry.heading, name=name)
            )
    if len(notes) > MAX_NOTES:
        notes = [*notes[:MAX_NOTES], f"... and {len(notes) - MAX_NOTES} more passed over"]
    return Collected(tuple(items), tuple(notes))


# -- finding the newest match ------------------------------------------------------------------


def _parts(path: str) -> list[str]:
    return [part for part in path.split("/") if part]


def _natural(parts: Iterable[str]) -> list[tuple[int, int | str]]:
    """A sort key in which the numbers in names compare as numbers (V9 before V10)."""
    key: list[tuple[int, int | str]] = []
    for part in parts:
        for chunk in _DIGITS.split(part):
            if chunk:
                key.append((0, int(chunk)) if chunk.isdigit() else (1, chunk))
        key.append((2, ""))  # a component boundary sorts after any text within it
    return key


def _matches(pattern: list[str], relative: tuple[str, ...]) -> bool:
    """A pattern of k names matches the last k components of a path (each a glob)."""
    if len(relative) < len(pattern):
        return False
    return all(fnmatchcase(name, want) for name, want in zip(relative[-len(pattern) :], pattern, strict=True))


def _open_dirs(root: int, parts: Sequence[str]) -> int:
    """The descriptor of the directory `parts` below `root`, no link followed on the way."""
    fd = os.dup(root)
    try:
        for name in parts:
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except NotADirectoryError:  # what O_DIRECTORY reports for a link, too: tell them apart
                if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    raise OSError(errno.ELOOP, "a symbolic link") from None
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _walk(
    workspace: Path, declared: str, patterns: list[str]
) -> tuple[list[list[tuple[int, tuple[str, ...]]] | str], list[str]]:
    """Per pattern, every regular file matching it under `declared` as (mtime_ns, relative parts),
    or one refusal for the declared path itself; and the entries passed over."""
    wanted = [_parts(pattern) for pattern in patterns]
    found: list[list[tuple[int, tuple[str, ...]]]] = [[] for _ in patterns]
    passed_over: list[str] = []
    parts = _parts(declared)
    if not parts or any(part in (".", "..") for part in parts):  # the manifest refuses these already
        return [f"{declared!r} does not name a path inside the workspace"] * len(patterns), passed_over
    try:
        root = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return [f"the workspace {workspace} cannot be opened"] * len(patterns), passed_over
    try:
        try:
            parent = _open_dirs(root, parts[:-1])
        except OSError as exc:
            return [_missing_or_refused(exc, declared)] * len(patterns), passed_over
        try:
            info = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        except OSError as exc:
            os.close(parent)
            return [_missing_or_refused(exc, declared)] * len(patterns), passed_over
        if stat.S_ISREG(info.st_mode):  # the declared path is the file itself
            os.close(parent)
            for index, pattern in enumerate(wanted):
                if _matches(pattern, (parts[-1],)):
                    found[index].append((info.st_mtime_ns, ()))
            return list(found), passed_over
        if not stat.S_ISDIR(info.st_mode):
            os.close(parent)
            what = "a symbolic link (never followed)" if stat.S_ISLNK(info.st_mode) else "not a directory"
            return [f"{declared}: {what}"] * len(patterns), passed_over
        try:
            top = os.open(parts[-1], _DIR_FLAGS, dir_fd=parent)
        except OSError as exc:
            return [_missing_or_refused(exc, declared)] * len(patterns), passed_over
        finally:
            os.close(parent)
    finally:
        os.close(root)
    seen = 0
    stack: list[tuple[int, tuple[str, ...]]] = [(top, ())]
    try:
        while stack:
            fd, here = stack.pop()
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        seen += 1
                        if seen > MAX_WALK_ENTRIES:
                            passed_over.append(
                                f"{declared}: stopped looking after {MAX_WALK_ENTRIES} entries"
                            )
                            return list(found), passed_over
                        relative = (*here, entry.name)
                        if entry.is_dir(follow_symlinks=False):
                            if len(relative) >= MAX_WALK_DEPTH:
                                passed_over.append(
                                    f"{declared}: not looking deeper than {MAX_WALK_DEPTH} levels"
                                )
                                continue
                            with suppress(OSError):  # swapped for a link since the scan: passed over
                                stack.append((os.open(entry.name, _DIR_FLAGS, dir_fd=fd), relative))
                            continue
                        hits = [index for index, pattern in enumerate(wanted) if _matches(pattern, relative)]
                        if not hits:
                            continue
                        try:
                            info = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        if not stat.S_ISREG(info.st_mode):
                            what = (
                                "a symbolic link (never followed)"
                                if stat.S_ISLNK(info.st_mode)
                                else "not a regular file"
                            )
                            shown = plain("/".join([declared.rstrip("/"), *relative]))
                            passed_over.append(f"{shown}: {what}")
                            continue
                        for index in hits:
                            found[index].append((info.st_mtime_ns, relative))
            finally:
                os.close(fd)
    finally:
        for fd, _ in stack:
            os.close(fd)
    return list(found), passed_over


def _missing_or_refused(exc: OSError, declared: str) -> list[tuple[int, tuple[str, ...]]] | str:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return []  # not produced yet (or a file where a directory belongs): nothing matches
    if exc.errno == errno.ELOOP:
        return f"{declared}: a symbolic link on the way (never followed)"
    return f"{declared}: cannot be opened ({exc.strerror})"


# -- taking the newest match -------------------------------------------------------------------


def _open_file(workspace: Path, declared: str, relative: tuple[str, ...]) -> int:
    parts = [*_parts(declared), *relative]
    root = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        parent = _open_dirs(root, parts[:-1])
    except OSError as exc:
        raise _Refused(f"its directory cannot be opened without following a link ({exc.strerror})") from None
    finally:
        os.close(root)
    try:
        return os.open(parts[-1], _FILE_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _Refused("a symbolic link (never followed)") from None
        if exc.errno == errno.ENXIO:
            raise _Refused("not a regular file") from None
        raise _Refused(f"cannot be opened ({exc.strerror})") from None
    finally:
        os.close(parent)


def _take(
    workspace: Path,
    declared: str,
    relative: tuple[str, ...],
    mode: str,
    redact: Callable[[str], str],
    stage_dir: Path | None,
) -> CollectedArtifact:
    fd = _open_file(workspace, declared, relative)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _Refused("not a regular file")
        if info.st_nlink != 1:
            raise _Refused(f"has {info.st_nlink} hard links (it may be a file from outside the workspace)")
        if mode == EMBED:
            return _embed(fd, info.st_size, redact, stage_dir)
        return _upload(fd, stage_dir)
    except OSError as exc:
        raise _Refused(f"cannot be read ({exc.strerror})") from None
    finally:
        os.close(fd)


def _chunks(fd: int, limit: int) -> Iterator[bytes]:
    """The file's bytes in chunks, at most `limit + 1` of them (one more tells it is longer)."""
    total = 0
    while total <= limit:
        chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
        if not chunk:
            return
        total += len(chunk)
        yield chunk


def _embed(fd: int, size: int, redact: Callable[[str], str], stage_dir: Path | None) -> CollectedArtifact:
    data = b"".join(_chunks(fd, EMBED_MAX_BYTES))
    truncated = len(data) > EMBED_MAX_BYTES or size > EMBED_MAX_BYTES
    data = data[:EMBED_MAX_BYTES]
    if b"\0" in data:
        raise _Refused("binary content cannot be embedded (declare it as upload)")
    text = data.decode("utf-8", errors="replace")
    if truncated and text.endswith("\ufffd"):  # a character cut at the bound, not a bad byte
        text = text.rstrip("\ufffd")
    text = "\n".join(plain(line, tabs=True) for line in redact(text).splitlines())
    body = text.encode("utf-8")
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    staged = _stage_bytes(stage_dir, digest, body) if stage_dir is not None else None
    return CollectedArtifact(
        source="",
        mode=EMBED,
        pattern="",
        title="",
        status=TAKEN,
        size=size,
        digest=digest,
        truncated=truncated,
        text=text,
        staged=staged,
    )


def _upload(fd: int, stage_dir: Path | None) -> CollectedArtifact:
    hasher = hashlib.sha256()
    size = 0
    out: int | None = None
    tmp: Path | None = None
    if stage_dir is not None:
        stage_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = stage_dir / f".incoming-{os.getpid()}-{id(hasher)}"
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        for chunk in _chunks(fd, UPLOAD_MAX_BYTES):
            size += len(chunk)
            if size > UPLOAD_MAX_BYTES:
                raise _Refused(f"longer than {UPLOAD_MAX_BYTES} bytes (the upload bound)")
            hasher.update(chunk)
            if out is not None:
                os.write(out, chunk)
    except BaseException:
        if tmp is not None:
            with suppress(OSError):
                os.unlink(tmp)
        raise
    finally:
        if out is not None:
            os.close(out)
    digest = "sha256:" + hasher.hexdigest()
    staged = None
    if stage_dir is not None and tmp is not None:
        staged = stage_dir / digest.removeprefix("sha256:")
        os.replace(tmp, staged)
    return CollectedArtifact(
        source="", mode=UPLOAD, pattern="", title="", status=TAKEN, size=size, digest=digest, staged=staged
    )


def _stage_bytes(stage_dir: Path, digest: str, data: bytes) -> Path:
    stage_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = stage_dir / digest.removeprefix("sha256:")
    if not target.is_file():
        tmp = target.with_name(f".incoming-{os.getpid()}-{target.name}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    return target


# -- the consumers ------------------------------------------------------------------------------


def _fence(text: str) -> str:
    """A backtick fence longer than any run of backticks in `text`, so the text cannot close it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def embed_markdown(collected: Collected, *, max_chars: int = MAX_EMBED_MARKDOWN) -> str:
    """The PR body's artifact sections: one collapsed <details> block per embed taken, a line for
    each one refused; "" when nothing was declared for embedding. Headings and names are escaped,
    the text fenced so nothing in it renders as markup."""
    import html  # here, not at the top: html brings its 100 KB entity table into every run's start

    blocks: list[str] = []
    used = 0
    omitted: list[str] = []
    for item in collected.embeds:
        title = html.escape(plain(item.title))
        if item.status == REFUSED:
            block = f"- **{title}**: `{html.escape(plain(item.name or item.pattern))}` was not embedded ({html.escape(plain(item.note))})"
        elif item.status == MISSING:
            continue
        else:
            cut = f" (the first {EMBED_MAX_BYTES // 1024} KiB)" if item.truncated else ""
            fence = _fence(item.text)
            block = (
                f"<details>\n<summary>{title}: <code>{html.escape(plain(item.name))}</code>{cut}</summary>\n\n"
                f"{fence}text\n{item.text}\n{fence}\n\n</details>"
            )
        if used + len(block) > max_chars:
            omitted.append(title)
            continue
        used += len(block)
        blocks.append(block)
    if omitted:
        blocks.append(
            f"- not shown here (the body's room is spent; see the run record): {', '.join(omitted)}"
        )
    return "\n\n".join(blocks)


def record_files(collected: Collected) -> list[tuple[str, Path]]:
    """(workspace-relative name, staged copy) of every file taken, for a run record's artifacts/
    folder: embeds (their redacted text) and uploads, one per name (an upload's bytes win)."""
    chosen: dict[str, Path] = {}
    for item in sorted(collected.items, key=lambda item: item.mode == UPLOAD):
        if item.taken and item.staged is not None:
            chosen[item.name] = item.staged
    return sorted(chosen.items())


def to_wire(collected: Collected, iteration: int) -> wire.Artifacts:
    """The session log's account of a collection: what was taken (name, size, digest), never the content."""
    return wire.Artifacts(
        iter=iteration,
        items=[
            wire.ArtifactWire(
                path=item.source,
                mode=item.mode,
                status=item.status,
                name=item.name,
                bytes=item.size if item.taken else None,
                digest=item.digest,
                truncated=True if item.truncated else None,
                note=item.note,
            )
            for item in collected.items
        ],
        notes=list(collected.notes),
    )


__all__ = [
    "EMBED_MAX_BYTES",
    "MAX_EMBED_MARKDOWN",
    "UPLOAD_MAX_BYTES",
    "Collected",
    "CollectedArtifact",
    "Declared",
    "collect_artifacts",
    "embed_markdown",
    "record_files",
    "to_wire",
]
