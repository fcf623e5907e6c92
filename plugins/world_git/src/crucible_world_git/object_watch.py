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
signature: an object whose bytes changed always reads as changed, unless the rewrite lands in
the same tick of the file system's clock as the change the engine last saw (git's "racy"
case). A file whose ctime was within the *racy window* of the moment it was looked at is
therefore read again at the next check, and a directory listed that close to its last change
is listed again.

The window is the store's file system's own timestamp granularity, measured once per process
and device (`racy_window`): a probe file next to the objects is written and fstat-ed in a loop
for at most a few tens of milliseconds, and the window is a multiple of the largest step seen
between distinct ctimes and of how far a fresh ctime lagged the clock the checks read. Why that
is enough:

- A coarse clock (ext4 and XFS on older kernels, tmpfs: one jiffy, 1 to 10 ms) shows steps of
  a jiffy, and its ctimes lag the real time by up to one: a change after a look at time t gets
  a ctime above t minus one jiffy, hence above any ctime older than that.
- Linux 6.13's multigrain timestamps hand out a fine-grained ctime to the first change after
  someone read the old one (a check's lstat is such a read), so a change after a look is
  always distinct; the probe, which reads between its writes, sees microsecond steps.
- A clock that is not ours (a network file system's server), a ctime running backwards, an
  error, or fewer than three distinct ctimes within the bound (a file system with whole-second
  timestamps) leave the window at a second, as it was before the probe. (FAT's two-second
  times would need two; a workspace there was never covered.)

The window never falls below 20 ms: a write's ctime is set before its bytes land, so a read
racing a stalled write can see the old bytes under the new ctime; a window covers that only
for stalls shorter than itself (a second did not close it either, only made it rarer).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import time
import zlib
from collections.abc import Callable

from crucible_world_git.loose_objects import inflated, open_regular

# (file type and mode, inode, size, ctime): what a write, a rename or a chmod always changes.
Sig = tuple[int, int, int, int]
# A directory's (inode, mtime, ctime): an entry added, removed or renamed in it moves both
# times, and setting the mtime back (utime) moves the ctime.
DirSig = tuple[int, int, int]
# The racy window when the probe cannot establish a finer one (see the module docstring).
FALLBACK_WINDOW_NS = 1_000_000_000
# The least window ever used: covers a read racing a briefly stalled write.
MIN_WINDOW_NS = 20_000_000
# How long the probe may run, how many distinct ctime steps it needs to see, and the safety
# factor on what it saw.
_PROBE_BOUND_NS = 50_000_000
_PROBE_STEPS = 3
_PROBE_MARGIN = 4
# A ctime this far ahead of the clock read after it is not our clock's.
_CLOCK_AHEAD_NS = 1_000_000
_windows: dict[int, int] = {}  # st_dev -> racy window (ns), once per process
# (time.time_ns() before a write, the file's ctime after it, time.time_ns() after the fstat)
Sample = tuple[int, int, int]

_CHUNK = 1 << 16
_KINDS = (b"blob", b"tree", b"commit", b"tag")
# Files git ends with a SHA-1 of everything before it.
_SEALED_SUFFIXES = (b".pack", b".idx", b".rev", b".bitmap", b".mtimes", b".graph")
_SEALED_NAMES = (b"multi-pack-index", b"commit-graph")


def _sig(st: os.stat_result) -> Sig:
    return (st.st_mode, st.st_ino, st.st_size, st.st_ctime_ns)


def racy_window(directory: bytes) -> int:
    """The racy window (ns) for files in `directory`, probed once per process and file system."""
    try:
        device = os.stat(directory).st_dev  # the file system the probe file lands on
    except OSError:
        return FALLBACK_WINDOW_NS
    window = _windows.get(device)
    if window is None:
        window = _windows[device] = probe_window(directory)
    return window


def probe_window(directory: bytes, sample: Callable[[int], list[Sample]] | None = None) -> int:
    """Measure the racy window with a probe file in `directory` (FALLBACK_WINDOW_NS if it cannot).

    `sample(fd)` writes the probe and reads its ctime until it has seen enough or its time is up
    (`_sample_ctimes`; a test passes another).
    """
    name = directory + b"/tmp_clock_%d_%s" % (os.getpid(), os.urandom(6).hex().encode())
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return FALLBACK_WINDOW_NS
    try:
        first = os.fstat(fd).st_ctime_ns
        samples = (sample or _sample_ctimes)(fd)
    except OSError:
        return FALLBACK_WINDOW_NS
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name)
    return window_from(first, samples)


def _sample_ctimes(fd: int) -> list[Sample]:
    """Rewrite one byte and fstat, until _PROBE_STEPS ctime changes or _PROBE_BOUND_NS passed."""
    samples: list[Sample] = []
    deadline = time.monotonic_ns() + _PROBE_BOUND_NS
    last = os.fstat(fd).st_ctime_ns
    changes = 0
    while changes < _PROBE_STEPS and time.monotonic_ns() < deadline:
        before = time.time_ns()
        os.pwrite(fd, b"\0", 0)
        ctime = os.fstat(fd).st_ctime_ns
        samples.append((before, ctime, time.time_ns()))
        if ctime != last:
            changes += 1
            last = ctime
        else:
            time.sleep(0.0002)  # a coarse clock: wait for its next tick rather than spin
    return samples


def window_from(first_ctime: int, samples: list[Sample]) -> int:
    """The racy window a probe's samples justify (pure; see the module docstring)."""
    largest = 0
    changes = 0
    last = first_ctime
    for before, ctime, after in samples:
        if ctime > after + _CLOCK_AHEAD_NS or ctime < last:
            return FALLBACK_WINDOW_NS  # not our clock, or one that ran backwards
        if ctime != last:
            changes += 1
            # The step, and how far this fresh ctime lagged our clock when the write began.
            largest = max(largest, ctime - last, before - ctime)
            last = ctime
    if changes < _PROBE_STEPS:
        return FALLBACK_WINDOW_NS
    window = max(MIN_WINDOW_NS, largest * _PROBE_MARGIN)
    return window if window < FALLBACK_WINDOW_NS else FALLBACK_WINDOW_NS


class ObjectWatch:
    """What the engine knows of one object directory's files, between two checks."""

    def __init__(self, objects_dir: bytes, window_ns: int | None = None) -> None:
        self.root = objects_dir
        # How close to a look a change must be to be looked at again (racy_window when None).
        self.window_ns = racy_window(objects_dir) if window_ns is None else window_ns
        self._known: dict[bytes, Sig] | None = None
        self._loose_count = 0  # files named like loose objects at the last look
        self._racy: set[bytes] = set()  # files whose signature was taken racily: verified again
        # Each directory's signature and entries when it was last listed, and when that was; an
        # entry is (full path, path relative to objects/, whether it is named like a loose object).
        self._listed: dict[bytes, tuple[DirSig, list[tuple[bytes, bytes, bool]], int]] = {}

    def forget(self) -> None:
        """Start over: the next check takes the store as it finds it (after a rebuild, say)."""
        self._known = None
        self._racy.clear()
        self._listed.clear()

    def baseline(self, racy_since_ns: int | None = None) -> None:
        """Take the store as it is now as known (the engine just rewrote it). A file changed at
        `racy_since_ns` or later (default: within the racy window of now) is read again by the
        next check: the engine's rewrite took a while, and others may have written meanwhile."""
        racy_since = time.time_ns() - self.window_ns
        if racy_since_ns is not None:
            racy_since = min(racy_since, racy_since_ns)
        listing = self._listing(None, racy_since)
        self._known, self._loose_count, self._racy = listing.seen, listing.loose, listing.racy

    def loose_count(self) -> int:
        """How many files named like loose objects the last check saw (a bound on loose())."""
        return self._loose_count

    def loose(self) -> list[tuple[bytes, int]]:
        """(raw id, ctime) of each loose object seen at the last check."""
        return [
            (sha, sig[3]) for rel, sig in (self._known or {}).items() if (sha := _loose_id(rel)) is not None
        ]

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
        known = self._known
        listing = self._listing(known, time.time_ns() - self.window_ns)
        if listing.odd is not None:
            return listing.odd, False
        seen = listing.seen
        if known is None:
            changed = [
                rel
                for rel, sig in seen.items()
                if trusted_before_ns is not None and sig[3] >= trusted_before_ns
            ]
            vanished: list[bytes] = []
        else:
            # What differs from the known signatures, and what was seen racily last time and
            # looks the same (it may have changed within the same tick).
            changed = listing.differ
            changed += [
                rel for rel in self._racy if (sig := seen.get(rel)) is not None and known.get(rel) == sig
            ]
            # Every file seen is known or new: fewer known ones than that means some vanished.
            some_vanished = len(seen) - listing.new < len(known)
            vanished = [rel for rel in known if rel not in seen] if some_vanished else []
        repacked = False
        for rel in changed:
            why = _verify(self.root, rel)
            if why is not None:
                return why, bool(vanished)
            # Only a pack nobody knew stands for a repack: one the engine wrote itself (verified
            # again because it was racy) replaced nothing.
            repacked = repacked or (rel.endswith(b".pack") and (known is None or rel not in known))
        for rel in vanished:
            why = _vanished(rel, repacked, present, needed)
            if why is not None:
                return why, True
        self._known = seen
        self._loose_count = listing.loose
        self._racy = listing.racy
        return None, bool(vanished)

    def _listing(self, known: dict[bytes, Sig] | None, racy_since: int) -> Listing:
        """Every file below objects/ with its signature, compared with `known` as it goes.

        One lstat per directory and per file, by full path; a directory is listed again only
        when its signature moved or it was listed racily. A file whose ctime is `racy_since` or
        later is racy.
        """
        out = Listing()
        seen = out.seen
        differ = out.differ
        racy = out.racy
        known_get = (known or {}).get
        listed = self._listed
        lstat = os.lstat
        is_dir = stat.S_ISDIR
        is_reg = stat.S_ISREG
        window = self.window_ns
        try:
            top = lstat(self.root)
        except FileNotFoundError:
            return out
        if not is_dir(top.st_mode):
            out.odd = "objects/ is not a directory"
            return out
        # Each directory with the lstat its parent's listing took of it (not taken twice).
        pending = [(b"", top)]
        while pending:
            rel, st = pending.pop()
            dir_sig = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
            before = listed.get(rel)
            if before is not None and before[0] == dir_sig and st.st_ctime_ns < before[2] - window:
                entries = before[1]
            else:
                path = self.root + b"/" + rel if rel else self.root
                try:
                    names = os.listdir(path)
                except FileNotFoundError:
                    continue  # removed since its parent was listed
                except NotADirectoryError:
                    out.odd = f"objects/{os.fsdecode(rel)} is not a directory"
                    return out
                prefix = rel + b"/" if rel else b""
                fanout = len(rel) == 2
                # The paths are joined once per listing, not once per check.
                entries = [(path + b"/" + name, prefix + name, fanout and len(name) == 38) for name in names]
                listed[rel] = (dir_sig, entries, time.time_ns())
            for full, name, loose_name in entries:
                try:
                    child = lstat(full)
                except FileNotFoundError:
                    continue  # a temporary file renamed away meanwhile
                mode = child.st_mode
                if is_reg(mode):
                    ctime = child.st_ctime_ns
                    sig = (mode, child.st_ino, child.st_size, ctime)
                    seen[name] = sig
                    out.loose += loose_name
                    was = known_get(name)
                    if was != sig:
                        differ.append(name)
                        out.new += was is None
                    if ctime >= racy_since:
                        racy.add(name)
                elif is_dir(mode):
                    pending.append((name, child))
                else:
                    out.odd = f"objects/{os.fsdecode(name)} is not a regular file"
                    return out
        return out


class Listing:
    """One pass over the object directory: what a check compares and remembers."""

    __slots__ = ("differ", "loose", "new", "odd", "racy", "seen")

    def __init__(self) -> None:
        self.seen: dict[bytes, Sig] = {}  # every file, with its signature
        self.differ: list[bytes] = []  # files whose signature is not the known one
        self.new = 0  # how many of those were not known at all
        self.racy: set[bytes] = set()  # files changed within the racy window of the pass
        self.loose = 0  # files named like loose objects
        self.odd: str | None = None  # why something there is not a plain file or directory


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
    digest = hashlib.sha1()
    head = b""
    total = 0
    try:
        with open_regular(path) as f:
            for data in inflated(f):  # bounded pieces: a few KiB of zeros inflate to GiBs
                if len(head) < 32:
                    head += data[:32]
                digest.update(data)
                total += len(data)
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
