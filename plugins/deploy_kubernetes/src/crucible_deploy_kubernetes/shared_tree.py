"""A candidate workspace on a shared volume: git objects written here, the exact tree rebuilt in the Job's pod.

When the deploy profile names a ReadWriteMany claim (`[tasks].claim`), a task's workspace does
not travel in a ConfigMap. This process writes the workspace's plain files (the set the pack
would ship) as git loose objects into the run's object store on the claim and names the
resulting tree to the Job; the pod checks that tree out with git and re-hashes what it laid
out, so it runs only on exactly that tree. Objects already in the store are never written
again, so an attempt writes its new blobs and the trees on their paths: bytes in proportion to
the change, not to the repository. The objects are written here, in Python, with no git
process: the format is git's (`blob`/`tree` loose objects, zlib over "kind size\\0body").

A proposal's workspace comes back the same way: the pod hashes its workdir into the attempt's
own object directory (everything it already had stays in the shared store) and prints the new
tree id. That tree and every object read for it is hostile input: each object's id is checked
against its content, sizes and counts are bounded, a link or submodule entry, a name that climbs
out or hides `.git`, refuses it whole before anything is written. Only the subtrees that differ
from the shipped tree are read, and only the changed files are laid over the fork.

Layout on the claim, under `crucible/<run>/`: `objects/` (the run's store, kept for the run's
later attempts) and `attempts/<job>/` (the attempt's prompt and the objects its pod wrote back;
removed when the attempt ends, and all of them when the run is cancelled or resumed).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import threading
import time
import zlib
from collections.abc import Iterable
from pathlib import Path

import attrs

from crucible_core.api import AgentFileRefused, read_regular
from crucible_deploy_kubernetes.render import PACK_SKIP
from crucible_deploy_kubernetes.workspace_return import (
    MAX_MEMBERS,
    MAX_UNPACKED_BYTES,
    ReturnedFile,
    ReturnedWorkspace,
    ReturnRefused,
    replace_workspace,
)

# What a workspace shipped through the claim may hold (the volume is large; these keep a
# runaway workspace, a build directory of millions of files, from filling it).
MAX_SHIPPED_FILES = 500_000
MAX_SHIPPED_BYTES = 32 << 30
MAX_TREE_BYTES = 16 << 20  # one tree object read back (a directory of ~300,000 entries)
MAX_TREES_READ = 100_000  # tree objects read back for one returned workspace
MAX_CACHED_WORKDIRS = 16  # workdirs whose files' hashes are remembered (the main one, a round's forks)
RACY_NS = 2_000_000_000  # a file changed this recently is hashed again next time (its stat may not tell)
TREE_MODE, FILE_MODE, EXEC_MODE = b"40000", b"100644", b"100755"


def object_id(kind: bytes, body: bytes) -> str:
    return hashlib.sha1(b"%s %d\0" % (kind, len(body)) + body).hexdigest()


@attrs.frozen
class Shipped:
    """A workspace written to the store: its tree, how many files, and the bytes this wrote."""

    tree: str
    files: int
    written: int


@attrs.frozen
class _Entry:
    mode: bytes
    oid: str


def _plain_files(workdir: Path) -> list[tuple[str, str, os.stat_result]]:
    """(relative posix path, path, lstat) of every plain file the pack would ship from `workdir`:
    no link is followed or taken, no fifo or device, nothing under PACK_SKIP, no `.git` file
    (a worktree's pointer to its repository). One lstat per entry: a large tree walks fast."""
    found: list[tuple[str, str, os.stat_result]] = []
    pending = [(str(workdir), "")]
    while pending:
        directory, prefix = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                st = entry.stat(follow_symlinks=False)
                rel = prefix + entry.name
                if stat.S_ISDIR(st.st_mode):
                    if entry.name not in PACK_SKIP:
                        pending.append((entry.path, rel + "/"))
                elif stat.S_ISREG(st.st_mode) and entry.name != ".git":
                    found.append((rel, entry.path, st))
    return found


def _tree_body(entries: dict[str, _Entry]) -> bytes:
    """Git's tree encoding: entries ordered by name, a directory's name compared with a trailing '/'."""

    def order(name: str) -> bytes:
        raw = os.fsencode(name)
        return raw + b"/" if entries[name].mode == TREE_MODE else raw

    return b"".join(
        b"%s %s\0" % (entries[name].mode, os.fsencode(name)) + bytes.fromhex(entries[name].oid)
        for name in sorted(entries, key=order)
    )


class ObjectStore:
    """The run's git object store on the claim (`<claim mount>/crucible/<run>`)."""

    def __init__(self, mount: Path, run: str) -> None:
        self.sub_path = f"crucible/{run}"  # the run's directory inside the claim
        self.root = Path(mount) / self.sub_path
        self.objects = self.root / "objects"
        self.attempts = self.root / "attempts"
        self._lock = threading.Lock()
        self._present: set[str] = set()  # ids known to be in the store
        # workdir -> {relative path -> (its stat, its blob id)}: the most recently shipped last
        self._hashed: dict[str, dict[str, tuple[tuple[int, ...], str]]] = {}

    # -- writing ---------------------------------------------------------------------------------

    def _put(self, kind: bytes, body: bytes, oid: str | None = None) -> tuple[str, int]:
        """Store one object unless it is there already: (its id, bytes written)."""
        oid = oid or object_id(kind, body)
        with self._lock:
            if oid in self._present:
                return oid, 0
        path = self.objects / oid[:2] / oid[2:]
        written = 0
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            packed = zlib.compress(b"%s %d\0" % (kind, len(body)) + body, 1)
            tmp = path.parent / f".tmp-{oid}-{os.getpid()}-{threading.get_ident()}"
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o444)
                with os.fdopen(fd, "wb") as out:
                    out.write(packed)
                os.replace(tmp, path)  # atomic: a pod reading the store never sees half an object
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            written = len(packed)
        with self._lock:
            self._present.add(oid)
        return oid, written

    def _blob(
        self, path: str, st: os.stat_result, cached: tuple[tuple[int, ...], str] | None
    ) -> tuple[str, bytes, int, tuple[tuple[int, ...], str] | None]:
        """(blob id, mode, bytes written, what to remember of it) of one plain file, hashed
        again only when its stat changed since it was stored."""
        mode = EXEC_MODE if st.st_mode & stat.S_IXUSR else FILE_MODE
        key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)
        if cached is not None and cached[0] == key:
            return cached[1], mode, 0, cached
        try:
            data = read_regular(path, st.st_size)  # a link or fifo swapped in, or a file that grew: refused
        except (AgentFileRefused, FileNotFoundError) as exc:
            raise ValueError(f"the workspace changed while it was being shipped ({exc})") from None
        oid, written = self._put(b"blob", data)
        racy = time.time_ns() - st.st_mtime_ns <= RACY_NS  # it may change again within its stat's grain
        return oid, mode, written, None if racy else (key, oid)

    def ship(self, workdir: Path) -> Shipped:
        """Write `workdir`'s plain files (the pack's set) and their trees; ValueError when it is too big.

        Links, fifos and devices are left out as the pack leaves them out; the sizes are added up
        before anything is read.
        """
        chosen = _plain_files(workdir)
        if len(chosen) > MAX_SHIPPED_FILES:
            raise ValueError(
                f"the task's workspace holds {len(chosen)} files, more than the shared volume takes "
                f"({MAX_SHIPPED_FILES})"
            )
        total = sum(st.st_size for _, _, st in chosen)
        if total > MAX_SHIPPED_BYTES:
            raise ValueError(
                f"the task's workspace holds {total} bytes, more than the shared volume takes ({MAX_SHIPPED_BYTES})"
            )
        written = 0
        with self._lock:
            before = self._hashed.pop(str(workdir), {})
        after: dict[str, tuple[tuple[int, ...], str]] = {}
        dirs: dict[str, dict[str, _Entry]] = {"": {}}
        for rel, path, st in chosen:
            oid, mode, count, remembered = self._blob(path, st, before.get(rel))
            written += count
            if remembered is not None:
                after[rel] = remembered
            parent, _, name = rel.rpartition("/")
            up = parent
            while up not in dirs:  # every ancestor gets a tree ("" is always there)
                dirs[up] = {}
                up = up.rpartition("/")[0]
            dirs[parent][name] = _Entry(mode, oid)
        # The deepest directories first, so each tree's subtrees exist before it is written.
        for directory in sorted(dirs, key=lambda d: d.count("/") + bool(d), reverse=True):
            oid, count = self._put(b"tree", _tree_body(dirs[directory]))
            written += count
            if directory:
                parent, _, name = directory.rpartition("/")
                dirs[parent][name] = _Entry(TREE_MODE, oid)
        root, count = self._put(b"tree", _tree_body(dirs[""]))
        with self._lock:
            self._hashed[str(workdir)] = after
            while len(self._hashed) > MAX_CACHED_WORKDIRS:
                del self._hashed[next(iter(self._hashed))]  # the least recently shipped
        return Shipped(root, len(chosen), written + count)

    # -- attempts ---------------------------------------------------------------------------------

    def attempt_dir(self, job: str) -> Path:
        path = self.attempts / job
        path.mkdir(parents=True, exist_ok=True)
        # The Job's pod writes its returned objects here and may run as another user than this
        # process; only that Job mounts this directory.
        path.chmod(0o777)
        return path

    def drop_attempt(self, job: str) -> None:
        shutil.rmtree(self.attempts / job, ignore_errors=True)  # never follows a link the pod left

    def drop_attempts(self) -> None:
        shutil.rmtree(self.attempts, ignore_errors=True)

    # -- reading back -----------------------------------------------------------------------------

    def read(self, oid: str, extra: Path, limit: int) -> tuple[bytes, bytes]:
        """(kind, body) of the object `oid`, from the attempt's objects or the store, checked against its id."""
        for directory in (extra, self.objects):
            path = directory / oid[:2] / oid[2:]
            if directory == extra:  # the pod wrote this part: never read through a link it left
                for part in (extra, extra / oid[:2]):
                    if part.is_symlink():
                        raise ReturnRefused(
                            f"the attempt's objects hold a link ({part.name}); nothing is read through it"
                        )
            try:
                packed = read_regular(path, limit + limit // 100 + 1024)
            except FileNotFoundError:
                continue
            except AgentFileRefused as exc:
                raise ReturnRefused(f"object {oid} is not a plain file of its size ({exc})") from None
            inflate = zlib.decompressobj()
            try:
                raw = inflate.decompress(packed, limit + 64)
            except zlib.error:
                raise ReturnRefused(f"object {oid} is not a zlib stream") from None
            header, _, body = raw.partition(b"\0")
            kind, _, size = header.partition(b" ")
            if inflate.unconsumed_tail or not size.isdigit() or int(size) > limit:
                raise ReturnRefused(f"object {oid} is over {limit} bytes")
            if int(size) != len(body) or object_id(kind, body) != oid:
                raise ReturnRefused(f"object {oid} does not hold what its id says")
            return kind, body
        raise ReturnRefused(f"object {oid} is not in the attempt's objects nor the run's store")

    def _tree(self, oid: str, extra: Path, where: str) -> dict[str, _Entry]:
        kind, body = self.read(oid, extra, MAX_TREE_BYTES)
        if kind != b"tree":
            raise ReturnRefused(
                f"{where or 'the workspace'} is a {kind.decode(errors='replace')}, not a tree"
            )
        entries: dict[str, _Entry] = {}
        at = 0
        while at < len(body):
            space, nul = body.find(b" ", at), body.find(b"\0", at)
            if space < 0 or nul < space or nul + 21 > len(body):
                raise ReturnRefused(f"the tree of {where or 'the workspace'} is malformed")
            mode, raw = body[at:space], body[space + 1 : nul]
            oid_here = body[nul + 1 : nul + 21].hex()
            at = nul + 21
            name = os.fsdecode(raw)
            rel = f"{where}/{name}" if where else name
            if not raw or b"/" in raw or raw in (b".", b"..") or name.lower() == ".git":
                raise ReturnRefused(f"the returned tree names {rel!r}, which is not a plain name")
            if mode == b"120000":
                raise ReturnRefused(f"the returned tree holds {rel!r}, a link: only plain files come back")
            if mode == b"160000":
                raise ReturnRefused(
                    f"the returned tree holds {rel!r}, a submodule: only plain files come back"
                )
            if mode not in (TREE_MODE, FILE_MODE, EXEC_MODE):
                raise ReturnRefused(f"the returned tree holds {rel!r} with mode {mode!r}")
            if name in entries:
                raise ReturnRefused(f"the returned tree names {rel!r} twice")
            entries[name] = _Entry(mode, oid_here)
        return entries

    def changes(
        self, shipped: str, returned: str, extra: Path
    ) -> tuple[list[tuple[str, str, bool]], list[str]]:
        """What differs between the shipped tree and the returned one: (files to write as
        (path, blob id, executable), shipped paths gone). Only differing subtrees are read."""
        files: list[tuple[str, str, bool]] = []
        gone: list[str] = []
        trees = 0

        def all_files(oid: str, where: str) -> Iterable[str]:
            for name, entry in self._tree(oid, self.objects, where).items():
                rel = f"{where}/{name}"
                if entry.mode == TREE_MODE:
                    yield from all_files(entry.oid, rel)
                else:
                    yield rel

        def walk(old: str | None, new: str, where: str) -> None:
            nonlocal trees
            if old == new:
                return
            trees += 1
            if trees > MAX_TREES_READ:
                raise ReturnRefused(f"the returned workspace holds over {MAX_TREES_READ} changed directories")
            before = self._tree(old, extra, where) if old is not None else {}
            after = self._tree(new, extra, where)
            for name in sorted(before.keys() | after.keys()):
                if name in PACK_SKIP:
                    continue  # never shipped, never written back (.git, state, ...)
                rel = f"{where}/{name}" if where else name
                was, now = before.get(name), after.get(name)
                if now is None:
                    assert was is not None
                    gone.extend(all_files(was.oid, rel) if was.mode == TREE_MODE else [rel])
                elif now.mode == TREE_MODE:
                    walk(was.oid if was is not None and was.mode == TREE_MODE else None, now.oid, rel)
                elif was is None or was != now:
                    files.append((rel, now.oid, now.mode == EXEC_MODE))
                    if len(files) > MAX_MEMBERS:
                        raise ReturnRefused(f"the returned workspace changes over {MAX_MEMBERS} files")

        walk(shipped, returned, "")
        return files, gone

    def bring_back(self, root: Path, shipped: str, returned: str, extra: Path) -> tuple[int, int]:
        """Lay the returned tree's changes over `root`: (files written, files deleted).

        Refused whole (ReturnRefused, nothing written) for every reason `changes` refuses, when the
        changed files add up to more than the archive route's unpacked bound, or when a path would
        be written through a link of `root`.
        """
        files, gone = self.changes(shipped, returned, extra)
        total = 0
        read: list[ReturnedFile] = []
        for rel, oid, executable in files:
            kind, body = self.read(oid, extra, MAX_UNPACKED_BYTES)
            if kind != b"blob":
                raise ReturnRefused(f"{rel!r} in the returned tree is not a file")
            total += len(body)
            if total > MAX_UNPACKED_BYTES:
                raise ReturnRefused(f"the returned workspace changes over {MAX_UNPACKED_BYTES} bytes")
            read.append(ReturnedFile(rel, body, executable))
        try:
            return replace_workspace(root, ReturnedWorkspace(tuple(read), ()), gone)
        except OSError as exc:
            raise ReturnRefused(f"the workspace could not be laid over the fork: {exc}") from None
