"""The world's own record of kept history, outside the workspace, and rebuilding a wrecked repository from it.

The agent can do anything to the workspace, `.git` included: delete it, write garbage into
HEAD, a ref or an object. So every kept commit is also copied (with everything it reaches)
into an object store under the run's private state directory, together with the few things a
rebuild needs (which branch HEAD named, the pristine base, the repository's config and
exclude file). When the workspace repository turns out damaged, it is moved aside (or, where
it cannot be moved, removed) and a fresh one is made from the record.

Layout of the record directory:
  objects/   a git object directory: the workspace's objects at setup, then every kept one
             (each keep's new objects as one pack, pack-crucible-*, see small_pack.py)
  kept       the latest kept commit id        base   the pristine base commit id
  head       the ref HEAD named at setup ("" when detached)
  config, exclude   copies of the workspace repository's files at setup
  index      the checksum of the last index file the engine wrote (hex)
  sound      when the workspace's object store was last found sound before a keep (ns)
  damaged-N  damaged repositories moved aside by a rebuild
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path

from crucible_core.api import RunFailed
from crucible_world_git.head_ref import read_ref_file
from crucible_world_git.ignores import read_rules_file
from crucible_world_git.index_file import MODE_GITLINK, MODE_TREE
from crucible_world_git.loose_objects import ObjectDatabase, parse_tree

_SEEDED = "seeded"


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _write_value(path: Path, text: str) -> None:
    """_write_text for a value rewritten at every keep (a commit id, a checksum): when the file
    already holds a value of the same length, the new one goes over it in one small write.

    Creating and renaming a file costs a few hundred microseconds of kernel time here, against
    a few for the write; and one write of a few bytes is never torn by a kill, so a reader
    after a crash finds the old value or the new one, as with the rename.
    """
    data = text.encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        fd = -1
    if fd >= 0:
        try:
            st = os.fstat(fd)
            same_length = stat.S_ISREG(st.st_mode) and st.st_size == len(data)
            if same_length and os.pwrite(fd, data, 0) == len(data):
                return
        finally:
            os.close(fd)
    _write_text(path, text)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (FileNotFoundError, NotADirectoryError):
        return None


def _commit_links(body: bytes) -> tuple[bytes, list[bytes]]:
    """(root tree, parents) of a commit body, as raw ids."""
    tree = b""
    parents = []
    for line in body.split(b"\n"):
        if not line:
            break
        if line.startswith(b"tree "):
            tree = bytes.fromhex(line[5:45].decode("ascii"))
        elif line.startswith(b"parent "):
            parents.append(bytes.fromhex(line[7:47].decode("ascii")))
    return tree, parents


class KeptRecord:
    """A private object store holding every kept commit and what it reaches."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.objects = directory / "objects"
        self._seeded = os.fsencode(directory / _SEEDED)
        self._db: ObjectDatabase | None = None

    # ---------------------------------------------------------------------------- the store

    def exists(self) -> bool:
        # Asked afresh each time (an agent that reaches the state directory can delete it), by
        # a path joined once: a world operation asks several times.
        try:
            return stat.S_ISREG(os.stat(self._seeded).st_mode)
        except (OSError, ValueError):
            return False

    @property
    def db(self) -> ObjectDatabase:
        if self._db is None:
            from dulwich.object_store import DiskObjectStore

            self._db = ObjectDatabase(DiskObjectStore(str(self.objects)))
            # Each keep's objects (and the blobs teed to it since the last keep) are written
            # as one small pack at the end of record(): two files, no fan-out directories.
            self._db.hold()
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.store.close()
            self._db = None

    def kept(self) -> str | None:
        return _read_text(self.directory / "kept") or None

    def base(self) -> str | None:
        return _read_text(self.directory / "base") or None

    def config(self) -> bytes | None:
        """The workspace repository's `.git/config` as it was at setup (None when it had none)."""
        try:
            return (self.directory / "config").read_bytes()
        except FileNotFoundError:
            return None

    def same_dotgit_file(self, dotgit: Path) -> bool:
        """Whether a `.git` file is the one the workspace had at setup (a linked worktree)."""
        try:
            return dotgit.read_bytes() == (self.directory / "dotgit-file").read_bytes()
        except OSError:
            return False

    def exclude_rules(self) -> bytes:
        """info/exclude as it was at setup: the run's exclude rules."""
        return read_rules_file(self.directory / "exclude") or b""

    def own_index(self) -> bytes | None:
        """The checksum of the index file the engine wrote last, or None."""
        text = _read_text(self.directory / "index")
        try:
            return bytes.fromhex(text) if text else None
        except ValueError:
            return None

    def set_own_index(self, checksum: bytes) -> None:
        _write_value(self.directory / "index", checksum.hex())

    def kept_since_ns(self) -> int | None:
        """Since when the workspace's objects are unverified: when the object store was last
        found sound before the latest keep, or when that keep was recorded (the kept file's
        mtime); None without one."""
        try:
            since = os.stat(self.directory / "kept").st_mtime_ns
        except OSError:
            return None
        # The moment the store was last found sound, written before the kept commit (`record`):
        # the earlier of the two is right whichever system call a kill landed on.
        sound = _read_text(self.directory / "sound")
        if sound is not None and sound.isdigit():
            since = min(since, int(sound))
        return since

    def has_commit(self, commit: str) -> bool:
        try:
            raw = bytes.fromhex(commit)
        except ValueError:
            return False
        return len(raw) == 20 and self.exists() and self.db.has(raw)

    def forget(self) -> None:
        self.close()
        if self.directory.exists():
            shutil.rmtree(self.directory)

    def seed(self, objects_dir: Path, controldir: Path, commondir: Path, dotgit: Path) -> None:
        """Start the record afresh from a healthy workspace repository (all of its objects)."""
        self.forget()
        self.directory.mkdir(parents=True, mode=0o700)
        if dotgit.is_file() and not dotgit.is_symlink():  # a linked worktree's "gitdir:" file
            shutil.copyfile(dotgit, self.directory / "dotgit-file")
        _copy_objects(objects_dir, self.objects)
        for name in ("config", "info/exclude"):
            source = commondir / name
            if source.is_file():
                shutil.copyfile(source, self.directory / os.path.basename(name))
        head = (read_ref_file(controldir / "HEAD") or b"").strip()
        symref = head[5:].strip().decode("utf-8", "surrogateescape") if head.startswith(b"ref: ") else ""
        _write_text(self.directory / "head", symref)
        (self.directory / _SEEDED).write_text("")

    def record(
        self,
        source: ObjectDatabase,
        commit: str,
        base: str | None = None,
        *,
        sound_since_ns: int | None = None,
    ) -> None:
        """Copy `commit` and whatever it reaches that the record lacks, then mark it as kept.

        Children are gathered before their parents and all of them written as one pack (its
        index last, so a reader sees all of it or none), so an object present in the record
        always has everything below it (an interrupted copy leaves nothing half-recorded).
        `sound_since_ns`: since when the workspace's object store was last found sound; it
        becomes kept_since_ns() (otherwise the moment of this keep).
        """
        db = self.db
        pending = [bytes.fromhex(commit)]
        while pending:
            sha = pending[-1]
            if db.has(sha):
                pending.pop()
                continue
            kind, body = source.read(sha)
            if kind != b"commit":
                raise RunFailed(
                    f"{sha.hex()} is a {kind.decode()}, not a commit", hint="the repository is damaged"
                )
            tree, parents = _commit_links(body)
            missing = [parent for parent in parents if not db.has(parent)]
            if missing:
                pending.extend(missing)  # older commits first (the agent's own, say)
                continue
            self._copy_tree(source, tree)
            self._store(sha, kind, body)
            pending.pop()
        # Everything the commit reaches is on disk, in one pack, before the kept file names it.
        db.flush_held()
        if sound_since_ns is not None:
            # Written before the kept commit, as a value of its own, not as the kept file's
            # mtime set after it: a kill between that write and a utime left the mtime at the
            # keep, and a resume trusted whatever changed in the store since the check (the
            # measure ran in that gap).
            _write_value(self.directory / "sound", f"{max(sound_since_ns, 0):020d}")
        _write_value(self.directory / "kept", commit)
        if base is not None:
            _write_text(self.directory / "base", base)

    def _copy_tree(self, source: ObjectDatabase, tree: bytes) -> None:
        db = self.db
        if db.has(tree):
            return
        _, body = source.read(tree)
        for _, mode, sha in parse_tree(body):
            if mode == MODE_TREE:
                self._copy_tree(source, sha)
            elif mode != MODE_GITLINK and not db.has(sha):
                # Not whole in memory when it is big: the agent's own `git add` of a sparse
                # file writes a blob of GiBs that the engine's stage then finds already there.
                self._verify(sha, source.copy_into(db, sha))
        self._store(tree, b"tree", body)

    def _store(self, sha: bytes, kind: bytes, body: bytes) -> None:
        self._verify(sha, self.db.write(kind, body))

    @staticmethod
    def _verify(sha: bytes, written: bytes) -> None:
        if written != sha:
            raise RunFailed(
                f"object {sha.hex()} in the workspace repository does not match its id",
                hint="the repository is damaged; the object was not recorded",
            )

    # ----------------------------------------------------------------------------- rebuild

    def rebuild(self, workspace: Path, commit: str) -> str:
        """Replace the workspace's repository by one made from the record, HEAD at `commit`.

        Returns where the damaged repository went (or that it was removed).
        """
        from crucible_world_git.engine_repo import init_repo

        self.close()
        dotgit = workspace / ".git"
        replaced = _unlink_stand_in(workspace)
        aside = self._move_aside(dotgit)
        if replaced is not None:
            aside = replaced
        if not workspace.is_dir():
            workspace.mkdir(parents=True)
            aside = replaced or "the whole workspace was gone; its files come back from the record"
        init_repo(workspace).close()
        _copy_objects(self.objects, dotgit / "objects")
        for name, target in (("config", dotgit / "config"), ("exclude", dotgit / "info" / "exclude")):
            saved = self.directory / name
            if saved.is_file():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(saved, target)
        symref = _read_text(self.directory / "head") or ""
        if symref.startswith("refs/") and ".." not in symref:
            (dotgit / "HEAD").write_text(f"ref: {symref}\n")
            ref = dotgit / symref
        else:
            ref = dotgit / "HEAD"
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(commit + "\n")
        base = self.base()
        if base:
            (dotgit / "refs" / "crucible").mkdir(parents=True, exist_ok=True)
            (dotgit / "refs" / "crucible" / "base").write_text(base + "\n")
        return aside

    def _move_aside(self, dotgit: Path) -> str:
        try:
            st = os.lstat(dotgit)
        except FileNotFoundError:
            return "it was gone"
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(dotgit)  # a link or a file in its place: never followed
            return "the entry standing in its place was removed"
        target = self.directory / f"damaged-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        n = 0
        while target.exists():
            n += 1
            target = target.with_name(f"{target.name.rsplit('.', 1)[0]}.{n}")
        try:
            os.rename(dotgit, target)
        except OSError:
            shutil.rmtree(dotgit)  # another file system: the record holds everything kept
            return "the damaged one was removed"
        return f"the damaged one is at {target}"


def _copy_objects(source: Path, target: Path) -> None:
    """Copy an object directory's loose objects and packs (not its info/alternates)."""
    target.mkdir(parents=True, exist_ok=True)
    if not source.is_dir():
        return
    for entry in os.scandir(source):
        if not entry.is_dir(follow_symlinks=False) or entry.name == "info":
            continue
        if entry.name != "pack" and (len(entry.name) != 2 or not _is_hex(entry.name)):
            continue
        destination = target / entry.name
        destination.mkdir(exist_ok=True)
        for item in os.scandir(entry.path):
            if item.is_file(follow_symlinks=False) and not item.name.startswith("tmp"):
                shutil.copyfile(item.path, destination / item.name)


def _is_hex(text: str) -> bool:
    return all(ch in "0123456789abcdef" for ch in text)


def _unlink_stand_in(workspace: Path) -> str | None:
    """Remove a link or file standing where the workspace directory belongs, never following it.

    Everything after this runs on paths under `workspace`; through a link those would be some
    other directory's files (another repository, the user's home), so the entry itself goes.
    """
    try:
        st = os.lstat(workspace)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return None
    os.unlink(workspace)
    what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "a file"
    return f"{what} stood in place of the workspace directory and was removed (its target untouched)"
