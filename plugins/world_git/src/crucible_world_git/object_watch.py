"""Noticing what someone other than the engine did to a repository's objects, without hashing the store.

A check lstat-s every file under objects/ (one call per loose object or pack file, nothing
read: the cost of a `git status` over that many files) and compares each with what the engine
last saw there or wrote itself. Only what is new or changed is read: a loose object must
inflate to a well-formed object whose id is its name; a pack, a pack index and the other files
git seals with a trailing checksum must match it. A loose object that vanished matters when
kept history needs it and nothing else in the store holds it; a pack that vanished matters
unless a repack put a new pack in its place. A changed alternates file is refused: it would
let objects the workspace depends on live outside it.

The agent can rewrite an object in place but not set a file's ctime, which is part of the
signature: an object whose bytes changed always reads as changed.
"""

from __future__ import annotations

import hashlib
import os
import stat
import zlib
from collections.abc import Callable

# (file type and mode, inode, size, ctime): what a write, a rename or a chmod always changes.
Sig = tuple[int, int, int, int]

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1 << 16
_KINDS = (b"blob", b"tree", b"commit", b"tag")
# Files git ends with a SHA-1 of everything before it.
_SEALED_SUFFIXES = (b".pack", b".idx", b".rev", b".bitmap", b".mtimes", b".graph")
_SEALED_NAMES = (b"multi-pack-index", b"commit-graph")


def _sig(st: os.stat_result) -> Sig:
    return (st.st_mode, st.st_ino, st.st_size, st.st_ctime_ns)


class ObjectWatch:
    """What the engine knows of one object directory's files, between two checks."""

    def __init__(self, objects_dir: bytes) -> None:
        self.root = objects_dir
        self._known: dict[bytes, Sig] | None = None

    def forget(self) -> None:
        """Start over: the next check takes the store as it finds it (after a rebuild, say)."""
        self._known = None

    def baseline(self) -> None:
        """Take the store as it is now as known (the engine just rewrote it)."""
        self._known, _ = _listing(self.root)

    def loose(self) -> list[bytes]:
        """The raw ids of the loose objects seen at the last check."""
        return [sha for rel in self._known or () if (sha := _loose_id(rel)) is not None]

    def wrote(self, rel: bytes) -> None:
        """The engine itself just put this file (path relative to objects/) in place."""
        if self._known is not None:
            self._known[rel] = _sig(os.lstat(self.root + b"/" + rel))

    def check(
        self,
        trusted_before_ns: int | None,
        present: Callable[[bytes], bool],
        needed: Callable[[bytes], bool],
    ) -> tuple[str | None, bool]:
        """(why the store cannot be trusted or None, whether anything vanished).

        On the first check of this watch, files changed before `trusted_before_ns` are taken as
        they are (None: all of them). `present(raw id)` says whether the store still holds an
        object, `needed(raw id)` whether kept history does.
        """
        seen, odd = _listing(self.root)
        if odd is not None:
            return odd, False
        known = self._known
        if known is None:
            changed = [
                rel
                for rel, sig in seen.items()
                if trusted_before_ns is not None and sig[3] >= trusted_before_ns
            ]
            vanished: list[bytes] = []
        else:
            changed = [rel for rel, sig in seen.items() if known.get(rel) != sig]
            vanished = [rel for rel in known if rel not in seen]
        repacked = False
        for rel in changed:
            why = _verify(self.root, rel)
            if why is not None:
                return why, bool(vanished)
            repacked = repacked or rel.endswith(b".pack")
        for rel in vanished:
            why = _vanished(rel, repacked, present, needed)
            if why is not None:
                return why, True
        self._known = seen
        return None, bool(vanished)


def _listing(root: bytes) -> tuple[dict[bytes, Sig], str | None]:
    """Every file below `root` with its signature; or why something there is not a plain file."""
    seen: dict[bytes, Sig] = {}
    pending = [b""]
    lstat = os.lstat
    while pending:
        rel = pending.pop()
        path = root + b"/" + rel if rel else root
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            names = os.listdir(path)
            prefix = rel + b"/" if rel else b""
            for name in names:
                try:
                    st = lstat(name, dir_fd=fd)
                except FileNotFoundError:
                    continue  # a temporary file renamed away meanwhile
                if stat.S_ISDIR(st.st_mode):
                    pending.append(prefix + name)
                elif stat.S_ISREG(st.st_mode):
                    seen[prefix + name] = _sig(st)
                else:
                    return seen, f"objects/{os.fsdecode(prefix + name)} is not a regular file"
        finally:
            os.close(fd)
    return seen, None


def _loose_id(rel: bytes) -> bytes | None:
    """The raw object id a loose object's path names, or None for any other file."""
    directory, _, name = rel.partition(b"/")
    if len(directory) != 2 or len(name) != 38:
        return None
    try:
        return bytes.fromhex((directory + name).decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None


def _verify(root: bytes, rel: bytes) -> str | None:
    """Why a file someone else put under objects/ breaks the store, or None."""
    shown = f"objects/{os.fsdecode(rel)}"
    sha = _loose_id(rel)
    if sha is not None:
        return None if _loose_ok(root + b"/" + rel, sha) else f"{shown} is not the object it names"
    name = rel.rpartition(b"/")[2]
    if name.endswith(_SEALED_SUFFIXES) or name in _SEALED_NAMES:
        return None if _sealed_ok(root + b"/" + rel) else f"{shown} fails its checksum"
    if rel == b"info/alternates":
        return "objects/info/alternates changed (objects would live outside the workspace)"
    return None  # temporary files, info/packs, .keep markers: nothing reads them as objects


def _vanished(
    rel: bytes, repacked: bool, present: Callable[[bytes], bool], needed: Callable[[bytes], bool]
) -> str | None:
    sha = _loose_id(rel)
    if sha is not None:
        if needed(sha) and not present(sha):
            return f"object {sha.hex()} of kept history was deleted"
        return None
    if rel.endswith((b".pack", b".idx")) and not repacked:
        return f"objects/{os.fsdecode(rel)} was deleted"
    return None


def _open(path: bytes) -> int | None:
    try:
        fd = os.open(path, _READ)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def _loose_ok(path: bytes, sha: bytes) -> bool:
    """Whether the file inflates to one whole object whose id is `sha`."""
    fd = _open(path)
    if fd is None:
        return False
    inflate = zlib.decompressobj()
    digest = hashlib.sha1()
    head = b""
    total = 0
    try:
        while chunk := os.read(fd, _CHUNK):
            data = inflate.decompress(chunk)
            if len(head) < 32:
                head += data[:32]
            digest.update(data)
            total += len(data)
            if inflate.eof:
                break
        data = inflate.flush()
        digest.update(data)
        total += len(data)
        if not inflate.eof or inflate.unused_data or os.read(fd, 1):
            return False
    except (OSError, zlib.error):
        return False
    finally:
        os.close(fd)
    kind, space, rest = head.partition(b" ")
    size, nul, _ = rest.partition(b"\0")
    if kind not in _KINDS or not space or not nul or not size.isdigit():
        return False
    return total - len(kind) - len(size) - 2 == int(size) and digest.digest() == sha


def _sealed_ok(path: bytes) -> bool:
    """Whether the file's last 20 bytes are the SHA-1 of the rest."""
    fd = _open(path)
    if fd is None:
        return False
    try:
        left = os.fstat(fd).st_size - 20
        if left < 0:
            return False
        digest = hashlib.sha1()
        while left > 0:
            chunk = os.read(fd, min(_CHUNK, left))
            if not chunk:
                return False
            digest.update(chunk)
            left -= len(chunk)
        return os.read(fd, 21) == digest.digest()
    except OSError:
        return False
    finally:
        os.close(fd)
