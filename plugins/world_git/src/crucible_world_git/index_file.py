"""The git index file (.git/index): read versions 2 to 4, write version 2, and its stat cache rules."""

from __future__ import annotations

import hashlib
import os
import stat
import struct
from typing import Any, NamedTuple

import attrs

from crucible_core.api import AgentFileRefused, RunFailed, read_regular

NS_PER_S = 1_000_000_000
# An index far beyond any real repository's (a million paths take about 100 MB).
MAX_INDEX_BYTES = 2 << 30
U32 = 0xFFFFFFFF

MODE_FILE = 0o100644
MODE_EXEC = 0o100755
MODE_LINK = 0o120000
MODE_GITLINK = 0o160000
MODE_TREE = 0o040000

_HEADER = struct.Struct(">4sLL")
_STAT_FIELDS = struct.Struct(">10L")  # ctime s/ns, mtime s/ns, dev, ino, mode, uid, gid, size
_ENTRY_HEAD = struct.Struct(">10L20sH")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">L")

_FLAG_EXTENDED = 0x4000
_FLAG_STAGE = 0x3000
_NAME_MASK = 0x0FFF
_EXT_SKIP_WORKTREE = 0x4000
_EXT_INTENT_TO_ADD = 0x2000

QuickKey = tuple[int, int, int, int, int]


class IndexEntry(NamedTuple):
    """One stage-0 index entry.

    `packed` is the entry exactly as a version-2 index file holds it (path and padding
    included), so writing the index is a join. `quick` is the lstat signature the file had
    when the entry was made (or a guess at it, for entries read from disk): when lstat still
    gives exactly this, the file is unchanged without asking git's longer rule.
    """

    mode: int
    sha: bytes  # raw 20-byte object id
    packed: bytes
    quick: QuickKey


def quick_key(st: os.stat_result) -> QuickKey:
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode)


def git_mode(st_mode: int) -> int | None:
    """The index mode git records for a file of this type, or None for what git never tracks."""
    if stat.S_ISREG(st_mode):
        return MODE_EXEC if st_mode & stat.S_IXUSR else MODE_FILE
    if stat.S_ISLNK(st_mode):
        return MODE_LINK
    if stat.S_ISDIR(st_mode):
        return MODE_GITLINK
    return None


def pack_entry(path: bytes, mode: int, sha: bytes, st: os.stat_result) -> bytes:
    ctime_s, ctime_ns = divmod(st.st_ctime_ns, NS_PER_S)
    mtime_s, mtime_ns = divmod(st.st_mtime_ns, NS_PER_S)
    head = _ENTRY_HEAD.pack(
        ctime_s & U32,
        ctime_ns,
        mtime_s & U32,
        mtime_ns,
        st.st_dev & U32,
        st.st_ino & U32,
        mode,
        st.st_uid & U32,
        st.st_gid & U32,
        st.st_size & U32,
        sha,
        min(len(path), _NAME_MASK),
    )
    # Version 2 pads every entry with 1 to 8 NULs to a multiple of eight bytes.
    return head + path + b"\0" * (8 - (62 + len(path)) % 8)


def make_entry(path: bytes, mode: int, sha: bytes, st: os.stat_result) -> IndexEntry:
    return IndexEntry(mode, sha, pack_entry(path, mode, sha, st), quick_key(st))


def unseen_entry(path: bytes, mode: int, sha: bytes) -> IndexEntry:
    """An entry for a file nobody has looked at yet: no stat data, so the next scan reads it."""
    head = _ENTRY_HEAD.pack(0, 0, 0, 0, 0, 0, mode, 0, 0, 0, sha, min(len(path), _NAME_MASK))
    return IndexEntry(mode, sha, head + path + b"\0" * (8 - (62 + len(path)) % 8), (0, 0, 0, 0, 0))


def stat_matches(entry: IndexEntry, st: os.stat_result) -> bool:
    """Git's own test (ce_match_stat_basic) of whether a file still looks like its entry.

    Used for entries read from disk, whose lstat signature this process has not seen yet.
    """
    ctime_s, ctime_ns, mtime_s, mtime_ns, _dev, ino, _mode, uid, gid, size = _STAT_FIELDS.unpack_from(
        entry.packed
    )
    return (
        mtime_s == (st.st_mtime_ns // NS_PER_S) & U32
        and mtime_ns == st.st_mtime_ns % NS_PER_S
        and ctime_s == (st.st_ctime_ns // NS_PER_S) & U32
        and ctime_ns == st.st_ctime_ns % NS_PER_S
        and ino == st.st_ino & U32
        and uid == st.st_uid & U32
        and gid == st.st_gid & U32
        and size == st.st_size & U32
        and entry.mode == git_mode(st.st_mode)
    )


@attrs.frozen
class ParsedIndex:
    """What a read index holds: stage-0 entries in index order, and paths caught mid-merge."""

    entries: list[tuple[bytes, IndexEntry]]
    conflicted: list[bytes]
    # The TREE extension's valid directories: path -> (entries below it, tree id).
    cache_tree: dict[bytes, tuple[int, bytes]] = attrs.field(factory=dict)
    checksum: bytes = b""  # the file's trailing SHA-1: which index this is, for the kept record


def _decode_varint(data: bytes, pos: int) -> tuple[int, int]:
    # The offset encoding of index version 4 (and of ofs-deltas): big-endian, +1 per continuation.
    byte = data[pos]
    pos += 1
    value = byte & 0x7F
    while byte & 0x80:
        byte = data[pos]
        pos += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, pos


def _repack(head: bytes, flags: int, path: bytes) -> bytes:
    # Entries read from a version 3 or 4 file are stored in the version 2 layout we write.
    flags = (flags & ~_FLAG_EXTENDED & ~_NAME_MASK) | min(len(path), _NAME_MASK)
    return head[:60] + _U16.pack(flags) + path + b"\0" * (8 - (62 + len(path)) % 8)


_GUESSED_ST_MODE = {MODE_FILE: 0o100644, MODE_EXEC: 0o100755, MODE_LINK: 0o120777}


def _odd_entry(data: bytes, pos: int, flags: int, version: int, previous: bytes) -> tuple[bytes, int, int]:
    """(path, next offset, extended flags) of an entry in version 3/4 form or with a long path."""
    name_start = pos + 62
    extended = 0
    if flags & _FLAG_EXTENDED and version >= 3:
        extended = _U16.unpack_from(data, name_start)[0]
        name_start += 2
    if version == 4:
        strip, name_start = _decode_varint(data, name_start)
        end = data.index(b"\0", name_start)
        return previous[: len(previous) - strip] + data[name_start:end], end + 1, extended
    length = flags & _NAME_MASK
    end = data.index(b"\0", name_start) if length == _NAME_MASK else name_start + length
    name = data[name_start:end]
    return name, pos + ((name_start - pos + len(name) + 8) & ~7), extended


def read_index(path: str | bytes) -> ParsedIndex:
    """Parse an index file; a missing file is an empty index.

    The agent can put anything at .git/index: it is read as a regular file only (a FIFO there
    never blocks the read, a link is never followed).
    """
    try:
        data = read_regular(path, MAX_INDEX_BYTES)
    except FileNotFoundError:
        return ParsedIndex([], [])
    except AgentFileRefused as exc:
        raise RunFailed(f"the git index {os.fsdecode(path)} is {exc}", hint=_REBUILD_HINT) from None
    if len(data) < 32:
        raise RunFailed(f"the git index {os.fsdecode(path)} is truncated", hint=_REBUILD_HINT)
    signature, version, count = _HEADER.unpack_from(data)
    if signature != b"DIRC" or version not in (2, 3, 4):
        raise RunFailed(
            f"the git index {os.fsdecode(path)} is not an index crucible can read (version {version})",
            hint=_REBUILD_HINT,
        )
    trailer = data[-20:]
    if trailer != b"\0" * 20 and hashlib.sha1(data[:-20]).digest() != trailer:
        raise RunFailed(f"the git index {os.fsdecode(path)} fails its checksum", hint=_REBUILD_HINT)

    entries: list[tuple[bytes, IndexEntry]] = []
    conflicted: list[bytes] = []
    append = entries.append
    unpack_head = _ENTRY_HEAD.unpack_from
    new_entry = tuple.__new__
    guess = _GUESSED_ST_MODE
    pos = 12
    previous = b""
    for _ in range(count):
        ctime_s, ctime_ns, mtime_s, mtime_ns, _dev, ino, mode, _uid, _gid, size, sha, flags = unpack_head(
            data, pos
        )
        if version != 4 and not flags & (_FLAG_EXTENDED | _FLAG_STAGE) and (flags & _NAME_MASK) != _NAME_MASK:
            # The common entry, in the layout we write: keep its bytes as they are.
            end = pos + 62 + (flags & _NAME_MASK)
            next_pos = pos + ((end - pos + 8) & ~7)
            name = data[pos + 62 : end]
            packed = data[pos:next_pos]
        else:
            name, next_pos, extended = _odd_entry(data, pos, flags, version, previous)
            if flags & _FLAG_STAGE:
                conflicted.append(name)
                previous = name
                pos = next_pos
                continue
            if extended & _EXT_SKIP_WORKTREE:
                raise RunFailed(
                    "the workspace is a sparse checkout (skip-worktree entries), which crucible does not support",
                    hint="run `git sparse-checkout disable` in the workspace",
                )
            if extended & _EXT_INTENT_TO_ADD:
                # An intent-to-add placeholder has no content yet: treating it as untracked
                # gives what `git add -A` and `git reset --hard` make of it.
                previous = name
                pos = next_pos
                continue
            packed = _repack(data[pos : pos + 62], flags, name)
        # The signature lstat would give if the file is untouched and has the usual permissions;
        # any other file simply fails the quick comparison and gets git's full one.
        quick = (mtime_s * NS_PER_S + mtime_ns, ctime_s * NS_PER_S + ctime_ns, size, ino, guess.get(mode, 0))
        append((name, new_entry(IndexEntry, (mode, sha, packed, quick))))
        previous = name
        pos = next_pos

    cache_tree = _read_extensions(data, pos, path)
    if conflicted:
        conflicted = sorted(set(conflicted))
    return ParsedIndex(entries, conflicted, cache_tree, trailer)


_REBUILD_HINT = "rebuild it with `rm .git/index && git reset` in the workspace"


def _read_extensions(data: bytes, pos: int, path: str | bytes) -> dict[bytes, tuple[int, bytes]]:
    """The cache-tree, if the index has one. Other optional extensions (capitalised: REUC,
    UNTR, ...) are caches we drop on write; a required one (lowercase: link, sdir) changes
    what the entries mean, so the index is refused."""
    end = len(data) - 20
    cache_tree: dict[bytes, tuple[int, bytes]] = {}
    while pos + 8 <= end:
        signature = data[pos : pos + 4]
        size = _U32.unpack_from(data, pos + 4)[0]
        if not 0x41 <= signature[0] <= 0x5A:
            raise RunFailed(
                f"the git index {os.fsdecode(path)} uses the {signature.decode('latin-1')!r} extension "
                "(split index or sparse index), which crucible does not support",
                hint="run `git update-index --no-split-index` and `git sparse-checkout disable`",
            )
        if signature == b"TREE":
            try:
                _parse_cache_tree(data[pos + 8 : pos + 8 + size], cache_tree)
            except (ValueError, IndexError):
                cache_tree.clear()  # only a cache: without it, trees are computed
        pos += 8 + size
    return cache_tree


def _parse_cache_tree(data: bytes, out: dict[bytes, tuple[int, bytes]]) -> None:
    # Depth first: "<name>\0<entries> <subtrees>\n", then the tree id when entries >= 0.
    stack: list[list[Any]] = []  # [directory path, subtrees still to read]
    pos = 0
    while pos < len(data):
        nul = data.index(b"\0", pos)
        newline = data.index(b"\n", nul)
        entries_text, subtrees_text = data[nul + 1 : newline].split(b" ")
        name = data[pos:nul]
        if stack:
            parent = stack[-1]
            parent[1] -= 1
            directory = parent[0] + b"/" + name if parent[0] else name
        elif pos == 0:
            directory = b""  # the root, whose name is empty
        else:
            raise ValueError("data after the root's last subtree")
        pos = newline + 1
        entries = int(entries_text)
        if entries >= 0:
            out[directory] = (entries, data[pos : pos + 20])
            pos += 20
        stack.append([directory, int(subtrees_text)])
        while stack and stack[-1][1] <= 0:
            stack.pop()


def tree_extension(cache_tree: list[tuple[bytes, int, int, bytes]]) -> bytes:
    """A TREE extension from (name, entries, subtrees, tree id) in depth-first order."""
    body = b"".join(b"%s\0%d %d\n%s" % item for item in cache_tree)
    return b"TREE" + _U32.pack(len(body)) + body


def write_index(
    path: bytes, body: bytes, count: int, extensions: bytes = b""
) -> tuple[os.stat_result, bytes]:
    """Write a version-2 index holding `count` packed entries; returns the new file's stat and checksum.

    Takes git's lock (index.lock, created exclusively) so a concurrent git command is refused
    rather than silently overwritten; a small index of the same size is written over in place
    instead (write_in_place).
    """
    header = _HEADER.pack(b"DIRC", 2, count)
    digest = hashlib.sha1(header)
    digest.update(body)
    digest.update(extensions)
    checksum = digest.digest()
    size = len(header) + len(body) + len(extensions) + len(checksum)
    if size <= IN_PLACE_BYTES:
        st = write_in_place(path, b"".join((header, body, extensions, checksum)), later=True)
        if st is not None:
            return st, checksum
    lock = path + b".lock"
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:
        raise RunFailed(
            f"{os.fsdecode(lock)} exists: another git command is running in the workspace, "
            "or one crashed and left its lock behind",
            hint="wait for it to finish, or delete the lock file if no git process is running",
        ) from None
    try:
        with os.fdopen(fd, "wb", closefd=False) as f:
            f.write(header)
            f.write(body)
            f.write(extensions)
            f.write(checksum)
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        os.unlink(lock)
        raise
    os.close(fd)
    os.replace(lock, path)
    return st, checksum


# A file this small is written over by one write of at most a page, which a kill cannot tear
# (the kernel stops a write for a fatal signal only between pages).
IN_PLACE_BYTES = 4096
_IN_PLACE = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def write_in_place(
    path: bytes, data: bytes, expected: bytes | None = None, *, later: bool = False
) -> os.stat_result | None:
    """Write `data` over the file at `path` when it is a regular file of exactly that size with no
    other name (so no file elsewhere is written through a hard link), no one holds git's lock on
    it (`path`.lock), and, with `expected`, it holds that now; return its status after the
    write, or None when any of that fails (the caller takes the lock and renames instead).

    `later`: the file's mtime must come out later than that of every file changed before the
    call (the index's, which git's racy rule compares with the worktree's). A multigrain clock
    (Linux 6.13) may stamp a write with the newest time it handed out, another file's, so
    the bytes are written a second time: that stamp is newer than the first's, since the first
    was read in between.

    Creating a file (the lock) costs this machine's kernel twenty times a write into one; a
    small file written over in place by one write is no less whole after a kill than one
    renamed over (docs/performance.md, the ninth round).
    """
    if len(data) > IN_PLACE_BYTES:
        return None
    try:
        os.lstat(path + b".lock")
    except FileNotFoundError:
        pass
    except OSError:
        return None
    else:
        return None  # git's lock is taken: the caller reports it
    try:
        fd = os.open(path, _IN_PLACE)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size != len(data):
            return None
        if expected is not None and os.pread(fd, len(data) + 1, 0) != expected:
            return None
        for _ in range(2 if later else 1):
            if os.pwrite(fd, data, 0) != len(data):
                return None  # cannot happen for a regular file's page; left for the caller to redo
            st = os.fstat(fd)
        return st
    except OSError:
        return None
    finally:
        os.close(fd)
