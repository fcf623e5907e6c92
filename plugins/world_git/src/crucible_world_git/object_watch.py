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
import time
import zlib
from collections.abc import Callable

from crucible_world_git.loose_objects import open_regular

# (file type and mode, inode, size, ctime): what a write, a rename or a chmod always changes.
Sig = tuple[int, int, int, int]
# A directory's (inode, mtime, ctime): an entry added, removed or renamed in it moves both
# times, and setting the mtime back (utime) moves the ctime.
DirSig = tuple[int, int, int]
# A file or directory changed this close to the moment it was looked at may change again within
# the same file-system clock tick without its times moving (git's "racy" case): it is read or
# listed again at the next check.
_RACY_NS = 1_000_000_000

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
        self._racy: set[bytes] = set()  # files whose signature was taken racily: verified again
        # Each directory's signature and entry names when it was last listed, and when that was.
        self._listed: dict[bytes, tuple[DirSig, list[bytes], int]] = {}

    def forget(self) -> None:
        """Start over: the next check takes the store as it finds it (after a rebuild, say)."""
        self._known = None
        self._racy.clear()
        self._listed.clear()

    def baseline(self) -> None:
        """Take the store as it is now as known (the engine just rewrote it)."""
        started = time.time_ns()
        self._known, _ = self._listing()
        self._remember_racy(self._known, started)

    def _remember_racy(self, seen: dict[bytes, Sig], started: int) -> None:
        self._racy = {rel for rel, sig in seen.items() if sig[3] >= started - _RACY_NS}

    def loose(self) -> list[bytes]:
        """The raw ids of the loose objects seen at the last check."""
        return [sha for rel in self._known or () if (sha := _loose_id(rel)) is not None]

    def wrote(self, rel: bytes) -> None:
        """The engine itself just put this file (path relative to objects/) in place."""
        if self._known is not None:
            self._known[rel] = _sig(os.lstat(self.root + b"/" + rel))
            self._racy.add(rel)

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
        started = time.time_ns()
        seen, odd = self._listing()
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
            racy = self._racy
            changed = [rel for rel, sig in seen.items() if known.get(rel) != sig or rel in racy]
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
        self._remember_racy(seen, started)
        return None, bool(vanished)

    def _listing(self) -> tuple[dict[bytes, Sig], str | None]:
        """Every file below objects/ with its signature; or why something there is not a plain file.

        One lstat per directory and per file, by full path; a directory is listed again only
        when its signature moved or it was listed racily.
        """
        seen: dict[bytes, Sig] = {}
        listed = self._listed
        lstat = os.lstat
        pending = [b""]
        while pending:
            rel = pending.pop()
            path = self.root + b"/" + rel if rel else self.root
            try:
                st = lstat(path)
            except FileNotFoundError:
                continue  # removed since its parent was listed
            if not stat.S_ISDIR(st.st_mode):
                return seen, f"objects/{os.fsdecode(rel)} is not a directory"
            dir_sig = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
            before = listed.get(rel)
            if before is not None and before[0] == dir_sig and st.st_ctime_ns < before[2] - _RACY_NS:
                names = before[1]
            else:
                names = os.listdir(path)
                listed[rel] = (dir_sig, names, time.time_ns())
            prefix = rel + b"/" if rel else b""
            for name in names:
                try:
                    child = lstat(path + b"/" + name)
                except FileNotFoundError:
                    continue  # a temporary file renamed away meanwhile
                if stat.S_ISDIR(child.st_mode):
                    pending.append(prefix + name)
                elif stat.S_ISREG(child.st_mode):
                    seen[prefix + name] = _sig(child)
                else:
                    return seen, f"objects/{os.fsdecode(prefix + name)} is not a regular file"
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


def _loose_ok(path: bytes, sha: bytes) -> bool:
    """Whether the file inflates to one whole object whose id is `sha`."""
    inflate = zlib.decompressobj()
    digest = hashlib.sha1()
    head = b""
    total = 0
    try:
        with open_regular(path) as f:
            while chunk := f.read(_CHUNK):
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
            if not inflate.eof or inflate.unused_data or f.read(1):
                return False
    except (OSError, zlib.error):
        return False
    kind, space, rest = head.partition(b" ")
    size, nul, _ = rest.partition(b"\0")
    if kind not in _KINDS or not space or not nul or not size.isdigit():
        return False
    return total - len(kind) - len(size) - 2 == int(size) and digest.digest() == sha


def _sealed_ok(path: bytes) -> bool:
    """Whether the file's last 20 bytes are the SHA-1 of the rest."""
    try:
        with open_regular(path) as f:
            left = os.fstat(f.fileno()).st_size - 20
            digest = hashlib.sha1()
            while left > 0:
                chunk = f.read(min(_CHUNK, left))
                if not chunk:
                    return False
                digest.update(chunk)
                left -= len(chunk)
            return left == 0 and f.read(21) == digest.digest()
    except OSError:
        return False
