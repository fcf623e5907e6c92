"""The git memory every world owns: snapshot = `git add -A && git commit`, restore = reset --hard + clean.

The index is read once and then kept in memory as a StagedTree; each later operation checks the
index file's identity and re-reads it only when something else (the agent, a human) wrote it.
Each operation lstat-s the tracked files once, hashes only what changed, re-hashes only the
directories above a change, and writes only the paths that differ.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from crucible_core.api import AgentFileRefused, RunFailed, WorkspaceError, read_regular
from crucible_world_git import checkout, excludes, head_ref, permissions
from crucible_world_git.dulwich_names import object_id, ref
from crucible_world_git.ignores import IgnoreRules, tree_loader
from crucible_world_git.index_file import (
    MODE_GITLINK,
    MODE_LINK,
    MODE_TREE,
    IndexEntry,
    git_mode,
    make_entry,
    quick_key,
    read_index,
    stat_matches,
    tree_extension,
    unseen_entry,
    write_index,
)
from crucible_world_git.kept_record import KeptRecord
from crucible_world_git.loose_objects import SETTLED_NS, ObjectDatabase, commit_tree_id, parse_tree
from crucible_world_git.object_watch import ObjectWatch
from crucible_world_git.staged_tree import StagedTree
from crucible_world_git.worktree_scan import Scan, scan_worktree

if TYPE_CHECKING:
    from dulwich.repo import Repo

IDENTITY = b"crucible <crucible@localhost>"
# More loose objects than this (verified a moment before) are moved into a pack: the walk each
# check takes over the store stays short (object_watch.py; tuned on the counter, see
# docs/performance.md).
LOOSE_LIMIT = 32
BASE_REF = b"refs/crucible/base"
BASELINE_LABEL = "crucible: baseline"
# Paths in .git the world writes into: a symlink at any of them would carry a write elsewhere.
_NO_LINKS = (
    "HEAD",
    "objects",
    "refs",
    "refs/heads",
    "refs/crucible",
    "logs",
    "logs/HEAD",
    "logs/refs",
    "logs/refs/heads",
    "info",
    "index",
)
# Files in .git the engine reads: each must be a regular file (a FIFO would block the read).
_REGULAR = ("HEAD", "index", "packed-refs", "info/exclude")
_NO_LINKS_RAW = tuple((name, b"/" + name.encode()) for name in _NO_LINKS)
_REGULAR_RAW = tuple((name, b"/" + name.encode()) for name in _REGULAR)
T = TypeVar("T")


class GitMemory:
    """The repository in a workspace, with its index cached between operations."""

    def __init__(
        self,
        workspace: Path,
        spared: tuple[str, ...] = (),
        record_dir: Path | None = None,
        note: Callable[[str], None] | None = None,
    ) -> None:
        self.workspace = Path(os.path.abspath(workspace))
        # The copy of kept history out of the agent's reach; None keeps no copy (a check probe).
        self.record = KeptRecord(record_dir) if record_dir is not None else None
        self.note = note or (lambda text: None)
        self.root = os.fsencode(self.workspace)
        self._dotgit = self.workspace / ".git"
        self._dotgit_config = self._dotgit / "config"
        self.spared = spared
        self._repo: Repo | None = None
        self._finalizer: weakref.finalize[[], GitMemory] | None = None
        self._db: ObjectDatabase | None = None
        self._index_path = b""
        self._dirs = (Path(), Path())  # the repository's control and common directories
        self._staged: StagedTree | None = None
        self._index_key: tuple[int, int, int] | None = None
        self._racy_ns = 0
        self._stale_index = False  # the on-disk index holds something we dropped (conflicts)
        self._commit_trees: dict[bytes, bytes] = {}
        self._recorded_config: bytes | None = None  # the record's copy of .git/config, read once
        self._run_excludes: bytes | None = None  # the record's exclude rules with the spared paths
        self._rules: tuple[bytes, IgnoreRules] | None = None  # the last tree's ignore rules
        self.kept: str | None = None  # the commit of the latest kept (or restored) state
        self._watch: ObjectWatch | None = None  # what the engine knows of the object store's files
        self._objects_trusted = False  # the store was just made or set up: nothing in it to verify
        # When the object store was last found sound, less the racy window (see _objects_damage).
        self._sound_since_ns: int | None = None
        # The last operation was a stage whose checks passed (see _keep); any check clears it.
        self._stage_checked = False
        # Loose objects too big to pack (loose_objects.STREAM_THRESHOLD): not counted as packable.
        self._big_loose: set[bytes] = set()

    # ---------------------------------------------------------------------------- repository

    @property
    def repo(self) -> Repo:
        if self._repo is None:
            from dulwich.errors import NotGitRepository

            from crucible_world_git.engine_repo import open_repo

            try:
                repo = open_repo(self.workspace)
            except NotGitRepository:
                raise WorkspaceError(
                    f"{self.workspace} is not a git repository",
                    hint="let crucible prepare the workspace, or run `git init` in it",
                ) from None
            self._attach(repo)
        assert self._repo is not None
        return self._repo

    def _attach(self, repo: Repo) -> None:
        from dulwich.object_store import DiskObjectStore

        if self.record is None or not self.record.exists():
            from crucible_world_git.engine_repo import config_problem

            # Once the record exists its copy of the config is put back; before, this one is the user's.
            problem = config_problem(Path(repo.commondir()) / "config")
            if problem is not None:
                repo.close()
                raise WorkspaceError(
                    f"{self.workspace} {problem}",
                    hint="use a sha1 repository with files refs for the workspace",
                )
        store = repo.object_store
        assert isinstance(store, DiskObjectStore)
        self.close()
        self._repo = repo
        # Close pack files before interpreter teardown, where dulwich's finalizers cannot run.
        self._finalizer = weakref.finalize(self, repo.close)
        self._db = ObjectDatabase(store)
        if self.record is not None and self.record.exists():
            self._db.tee = self.record.db
        if self._watch is not None and self._watch.root == self._db.root:
            self._db.watch = self._watch
        self._index_path = os.fsencode(repo.index_path())
        # As Paths once: every operation reads HEAD through them.
        self._dirs = (Path(repo.controldir()), Path(repo.commondir()))
        self._staged = None

    def close(self) -> None:
        """Release the repository's open files; the next operation reopens it."""
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self._repo = None
        self._db = None
        self._staged = None
        self._index_key = None
        if self.record is not None:
            self.record.close()

    @property
    def db(self) -> ObjectDatabase:
        self.repo  # noqa: B018 - opens the repository on first use
        assert self._db is not None
        return self._db

    def is_repository(self) -> bool:
        return os.path.lexists(self.workspace / ".git")

    def init(self) -> None:
        from crucible_world_git.engine_repo import init_repo

        self.workspace.mkdir(parents=True, exist_ok=True)
        self._attach(init_repo(self.workspace))

    def exclude_file(self) -> Path:
        return Path(self.repo.commondir()) / "info" / "exclude"

    def write_spared(self) -> None:
        excludes.write_spared(self.exclude_file(), self.spared)

    def in_run(self) -> bool:
        """Whether a kept record exists: from then on the record, not the workspace, is the truth."""
        return self.record is not None and self.record.exists()

    def ignore_rules(self, tree: bytes | None = None) -> IgnoreRules:
        """The rules that decide which untracked paths are ignored (see ignores.py).

        During a run: the `.gitignore` files of `tree` (the kept tree when None) and the exclude
        rules saved at setup, never what the candidate wrote. Before one: the working tree's.
        """
        if self.record is None or not self.in_run():
            return IgnoreRules.on_disk(str(self.workspace), str(self.exclude_file()))
        root = self._kept_tree() if tree is None else tree
        # The rules of one tree never change (its objects are named by their content), and the
        # exclude rules saved at setup are the record's: both are built once, not every stage.
        if self._rules is not None and self._rules[0] == root:
            return self._rules[1]
        if self._run_excludes is None:
            exclude = self.record.exclude_rules().decode("utf-8", "surrogateescape")
            self._run_excludes = excludes.render(exclude, self.spared).encode("utf-8", "surrogateescape")
        rules = IgnoreRules(str(self.workspace), tree_loader(self._kept_object, root), [self._run_excludes])
        self._rules = (root, rules)
        return rules

    def _kept_tree(self) -> bytes:
        """The root tree of the latest kept (or restored) commit."""
        commit = self.kept or (self.record.kept() if self.record is not None else None)
        head = commit.encode() if commit else self.head()
        if head is None:
            return self.db.write(b"tree", b"")
        return self.tree_of(head)

    def _kept_object(self, sha: bytes) -> tuple[bytes, bytes]:
        """An object of kept history, from the record where it has it (the agent cannot touch that copy)."""
        if self.record is not None and self.record.db.has(sha):
            return self.record.db.read(sha)
        return self.db.read(sha)

    def _put_back_config(self) -> None:
        """Make `.git/config` the file recorded at setup again if the agent changed it, and say so.

        The engine never reads it (engine_repo); this is for whoever runs git in the workspace
        next: the measure, the next turn, the user after the run. Only a workspace whose `.git`
        is its own directory: a linked worktree's config is its main repository's, not the run's.
        """
        from crucible_world_git.engine_repo import replace_file

        if self.record is None or not self.record.exists():
            return
        if self._recorded_config is None:
            self._recorded_config = self.record.config()
        wanted = self._recorded_config
        if wanted is None or self._dirs[1] != self._dotgit:
            return
        path = self._dotgit_config
        try:
            if read_regular(path, len(wanted)) == wanted:
                return
        except (FileNotFoundError, AgentFileRefused):
            pass  # gone, or a link, FIFO or oversized file in its place: replaced below
        replace_file(path, wanted)
        self.note(
            "the agent changed the workspace repository's .git/config; put back the one recorded at "
            "setup (the engine never reads it, and the measure and the user get git as it was)"
        )

    # --------------------------------------------------------------------------------- refs

    def head(self) -> bytes | None:
        """HEAD's commit id (hex), or None on an unborn branch.

        Read here rather than by dulwich, as regular files only: head_ref.Unreadable for a FIFO
        or a link where HEAD or its branch should be.
        """
        repo = self.repo
        try:
            return head_ref.read_head(*self._dirs)
        except head_ref.Unsupported:
            pass
        try:
            return repo.refs[ref(b"HEAD")]
        except KeyError:
            return None

    def resolve_commit(self, rev: str) -> bytes:
        """The commit id (hex) `rev` names: a full id, a ref, or an unambiguous abbreviation."""
        from dulwich.objectspec import parse_commit

        token = rev.strip()
        if len(token) == 40 and all(ch in "0123456789abcdef" for ch in token):
            return token.encode()  # the form snapshot() hands out; tree_of() checks it is a commit
        try:
            return parse_commit(self.repo, token.encode()).id
        except (KeyError, ValueError) as exc:
            raise RunFailed(
                f"{rev!r} does not name a commit in {self.workspace}",
                hint="pass a token snapshot() returned, or a branch, tag or commit id",
            ) from exc

    def tree_of(self, commit: bytes) -> bytes:
        tree = self._commit_trees.get(commit)
        if tree is None:
            sha = bytes.fromhex(commit.decode())
            if not self.db.has(sha):
                raise RunFailed(
                    f"{commit.decode()!r} does not name a commit in {self.workspace}",
                    hint="pass a token snapshot() returned by this workspace",
                )
            kind, body = self.db.read(sha)
            if kind != b"commit":
                raise RunFailed(
                    f"{commit.decode()} is a {kind.decode()}, not a commit", hint="pass a commit id"
                )
            tree = self._commit_trees[commit] = commit_tree_id(body)
        return tree

    def _move_head(self, old: bytes | None, new: bytes, message: str) -> None:
        repo = self.repo
        text = message.encode("utf-8", "surrogateescape")
        try:
            ok = head_ref.move_head(Path(repo.controldir()), Path(repo.commondir()), old, new, IDENTITY, text)
        except head_ref.Unsupported:
            ok = repo.refs.set_if_equals(
                ref(b"HEAD"),
                None if old is None else object_id(old),
                object_id(new),
                committer=IDENTITY,
                timestamp=int(time.time()),
                timezone=0,
                message=text,
            )
        if not ok:
            raise RunFailed(
                f"HEAD moved while crucible was updating it in {self.workspace}",
                hint="make sure nothing else commits in the workspace during a run",
            )

    def clear_stale_locks(self) -> list[str]:
        """Remove the lock files a SIGKILLed snapshot or restore can leave (index, HEAD, branch).

        Only for a workspace no other process uses: git itself treats these as "someone else
        is writing", which after a crash of our own is never true.
        """
        repo = self.repo
        candidates = [Path(repo.controldir()) / "index.lock", Path(repo.controldir()) / "HEAD.lock"]
        heads = Path(repo.commondir()) / "refs" / "heads"
        if heads.is_dir():
            candidates += sorted(heads.rglob("*.lock"))
        removed = []
        for lock in candidates:
            try:
                lock.unlink()
            except FileNotFoundError:
                continue
            removed.append(lock.name)
        return removed

    def base(self) -> bytes | None:
        try:
            return self.repo.refs[ref(BASE_REF)]
        except KeyError:
            return None

    def set_base(self, commit: bytes) -> None:
        self.repo.refs.add_if_new(
            ref(BASE_REF), object_id(commit), committer=IDENTITY, message=b"crucible: pristine base"
        )

    # -------------------------------------------------------------------------------- index

    def _sync(self) -> StagedTree:
        """The staged tree, re-read from disk only if the index file is not the one we wrote.

        During a run an index someone else wrote (the agent's `git add` or `git rm --cached`, a
        forged stat cache) is never adopted: what is tracked is what was kept, and what changed
        is what lstat says against the signatures the engine took itself; the file is rewritten.
        """
        self.db.refresh()
        self._put_back_config()
        try:
            st = os.lstat(self._index_path)
        except FileNotFoundError:
            key = None
        else:
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
        if self._staged is None:
            self._load_index(key)
        elif key != self._index_key:
            if self.in_run():
                self._stale_index = True
            else:
                self._load_index(key)
        assert self._staged is not None
        return self._staged

    def _load_index(self, key: tuple[int, int, int] | None) -> None:
        own = self.record.own_index() if self.record is not None and self.in_run() else None
        try:
            parsed = read_index(self._index_path)
        except RunFailed:
            if not self.in_run():
                raise
            parsed = None
        if self.in_run() and (parsed is None or parsed.checksum != own):
            # Not the index the engine wrote last: start from the kept tree, every file unseen
            # (each is read once, on the next scan).
            self._staged = StagedTree.from_entries(self._unseen_entries(self._kept_tree(), b""))
            self._stale_index = True
            self._racy_ns = 0
        else:
            assert parsed is not None
            self._staged = StagedTree.from_entries(parsed.entries, parsed.cache_tree)
            self._stale_index = bool(parsed.conflicted)
            self._racy_ns = 0 if key is None else key[0]
        self._index_key = key

    def _unseen_entries(self, tree: bytes, prefix: bytes) -> Iterator[tuple[bytes, IndexEntry]]:
        for name, mode, sha in parse_tree(self._kept_object(tree)[1]):
            if mode == MODE_TREE:
                yield from self._unseen_entries(sha, prefix + name + b"/")
            else:
                yield prefix + name, unseen_entry(prefix + name, mode, sha)

    def _write_index(self) -> None:
        assert self._staged is not None
        # With a cache-tree in the index, the next cold start (ours or git's commit) skips
        # hashing every directory again.
        extension = tree_extension(self._staged.cache_tree(self.db))
        st, checksum = write_index(self._index_path, self._staged.index_body(), self._staged.count, extension)
        self._index_key = (st.st_mtime_ns, st.st_size, st.st_ino)
        self._racy_ns = st.st_mtime_ns
        self._stale_index = False
        if self.record is not None and self.in_run():
            self.record.set_own_index(checksum)

    def _hash(self, path: bytes, st: os.stat_result, mode: int) -> bytes:
        full = self.root + b"/" + path
        if mode == MODE_LINK:
            return self.db.write(b"blob", os.readlink(full))
        # Byte for byte, as the measure read it: no .gitattributes conversion or filter applies.
        return self.db.write_blob_file(full, st.st_size)

    # ------------------------------------------------------------------------------ staging

    def stage_all(self) -> bool:
        """`git add -A`: bring the index up to date with the working tree; True if it changed."""
        staged = self._sync()
        scan = scan_worktree(self.root, staged, self._racy_ns)
        changed = self._stale_index
        for path in scan.missing:
            changed = staged.remove(path) is not None or changed
        for directory in scan.missing_dirs:
            changed = staged.remove_dir(directory) > 0 or changed
        changed = self._settle_suspects(staged, scan) or changed
        changed = self._update_gitlinks(staged, scan) or changed
        if scan.untracked:
            rules = self.ignore_rules()
            for path, is_dir in scan.untracked:
                changed = self._add_untracked(staged, rules, path, is_dir) or changed
        return changed

    def _settle_suspects(self, staged: StagedTree, scan: Scan) -> bool:
        changed = False
        racy_ns = self._racy_ns
        for node, name, path, st in scan.suspects:
            entry = node.files[name]
            racy = st.st_mtime_ns >= racy_ns
            if not racy and stat_matches(entry, st):
                # Untouched by git's own rule (say, permissions other than the usual): remember
                # this signature, nothing to hash.
                node.files[name] = entry._replace(quick=quick_key(st))
                continue
            mode = git_mode(st.st_mode)
            if mode is None or mode == MODE_GITLINK:
                staged.remove(path)
                changed = True
                continue
            fresh = make_entry(path, mode, self._hash(path, st, mode), st)
            same_content = fresh.mode == entry.mode and fresh.sha == entry.sha
            if fresh.packed != entry.packed:
                staged.put(path, fresh, content=not same_content)
                changed = True
            else:
                node.files[name] = fresh
                # Verified only by reading it: rewriting the index later than its mtime ends that.
                changed = changed or racy
        return changed

    def _update_gitlinks(self, staged: StagedTree, scan: Scan) -> bool:
        changed = False
        for path in scan.gitlinks:
            head = _nested_head(self.root + b"/" + path)
            entry = staged.get(path)
            if head is not None and entry is not None and head != entry.sha:
                st = os.lstat(self.root + b"/" + path)
                staged.put(path, make_entry(path, MODE_GITLINK, head, st))
                changed = True
        return changed

    def _add_untracked(self, staged: StagedTree, rules: IgnoreRules, path: bytes, is_dir: bool) -> bool:
        full = self.root + b"/" + path
        if is_dir:
            if rules.prunes_dir(path):
                return False
            if checkout.is_nested_repository(full):
                # `git add -A` records a nested repository as a gitlink to its HEAD.
                head = _nested_head(full)
                if head is None:
                    return False
                staged.put(path, make_entry(path, MODE_GITLINK, head, os.lstat(full)))
                return True
            changed = False
            try:
                listing = os.scandir(full)
            except (FileNotFoundError, NotADirectoryError):
                return False
            with listing:
                children = [(item.name, item.is_dir(follow_symlinks=False)) for item in listing]
            for name, child_is_dir in children:
                if name != b".git":
                    changed = self._add_untracked(staged, rules, path + b"/" + name, child_is_dir) or changed
            return changed
        if rules.ignores_file(path):
            return False
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            return False
        mode = git_mode(st.st_mode)
        if mode is None or mode == MODE_GITLINK:
            return False  # sockets, fifos and devices are never tracked
        staged.put(path, make_entry(path, mode, self._hash(path, st, mode), st))
        return True

    # --------------------------------------------------------------------- world operations

    # ------------------------------------------------------------------ the kept record

    def forget_record(self) -> None:
        """Drop a record left from an earlier setup in this state directory: a fresh run starts its own."""
        if self.record is not None:
            self.record.forget()
        if self._db is not None:
            self._db.tee = None
        self._run_excludes = None
        self._rules = None

    def start_record(self) -> None:
        """Seed the private record from this (just prepared) repository and record HEAD as kept."""
        if self.record is None:
            return
        self._run_excludes = None
        self._rules = None
        repo = self.repo
        # The store as set up is the run's starting point: taken as it is, packed if it holds
        # many loose objects (before the record copies it, which then copies a few packs).
        watch = self._watch_store()
        watch.baseline()
        self._keep_loose_few(watch)
        self._objects_trusted = True
        self.record.seed(
            Path(self.db.store.path), Path(repo.controldir()), Path(repo.commondir()), self.workspace / ".git"
        )
        self.db.tee = self.record.db
        head = self.head()
        base = self.base()
        if head is not None:
            self.record.record(self.db, head.decode(), base.decode() if base else None)
        if self._staged is not None:
            self._write_index()  # so a resume knows the index on disk is the engine's own

    def damage(self, *, objects: bool = True) -> str | None:
        """Why the workspace repository cannot be trusted (only judged once a record exists), or None.

        Cheap enough for every operation: a few lstat calls in .git, HEAD and packed-refs read,
        and one lstat per file of the object store (object_watch.py); only what someone else
        changed there is read. `objects=False` leaves the object store out (see _keep).
        """
        self._stage_checked = False
        if self.record is None or not self.record.exists():
            return None
        why = self._root_damage() or self._dotgit_damage()
        if why is None:
            try:
                why = self._refs_damage() or (self._objects_damage() if objects else None)
            except PermissionError:
                raise  # the caller takes its access back and asks again
            except head_ref.Unreadable as exc:
                why = exc.message
            except Exception as exc:  # dulwich raises all sorts for a mangled repository
                why = f"the repository cannot be read ({type(exc).__name__})"
        return why

    def _root_damage(self) -> str | None:
        # An agent that can write the directory holding the workspace (a composite's component
        # sits in the agent's own working directory) can put a link to some other repository in
        # its place: every later operation, the rebuild included, would then act on that one.
        try:
            st = os.lstat(self.workspace)
        except FileNotFoundError:
            return "the workspace directory is missing"
        if stat.S_ISLNK(st.st_mode):
            return "the workspace directory was replaced by a symbolic link"
        if not stat.S_ISDIR(st.st_mode):
            return "the workspace is not a directory"
        return None

    def _dotgit_damage(self) -> str | None:
        assert self.record is not None
        dotgit = self.workspace / ".git"
        try:
            st = os.lstat(dotgit)
        except FileNotFoundError:
            return ".git is missing"
        if stat.S_ISLNK(st.st_mode):
            return ".git is a symbolic link"
        if not stat.S_ISDIR(st.st_mode):
            if not stat.S_ISREG(st.st_mode) or not self.record.same_dotgit_file(dotgit):
                return ".git is not a directory"
            return None
        raw = self.root + b"/.git"
        if permissions.regain(raw):
            self.note("the engine's permissions on .git had been taken away; they were given back")
        # Paths joined as bytes, with one lstat each: this runs before every world operation, and
        # joining them as Path objects cost more than the system calls themselves.
        lstat = os.lstat
        for name, path in _NO_LINKS_RAW:
            try:
                if stat.S_ISLNK(lstat(raw + path).st_mode):
                    return f".git/{name} is a symbolic link"
            except OSError:  # as os.path.islink: what cannot be looked at is no link
                continue
        for name, path in _REGULAR_RAW:
            try:
                mode = lstat(raw + path).st_mode
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(mode):
                return f".git/{name} is not a regular file"
        if os.path.lexists(raw + b"/commondir"):
            return ".git/commondir points the repository elsewhere"
        return None

    def _refs_damage(self) -> str | None:
        self.repo  # noqa: B018 - opens the repository on first use
        why = head_ref.packed_refs_problem(self._dirs[1])
        if why is not None:
            return why
        head = self.head()
        if head is None:
            return "HEAD names no commit"
        text = head.decode("ascii", "replace")
        if len(text) != 40 or any(ch not in "0123456789abcdef" for ch in text):
            return "HEAD does not hold a commit id"
        if not self.db.on_disk(bytes.fromhex(text)):
            return f"HEAD names {text}, which is not in the repository"
        return None

    def _objects_damage(self) -> str | None:
        """What someone else did to the object store since the engine last looked (object_watch.py)."""
        assert self.record is not None
        db = self.db
        watch = self._watch_store()
        # The first look in this process verifies what changed since the last keep (a resume
        # after a turn that was killed), unless the store was only just set up or rebuilt.
        trusted = None if self._objects_trusted else self.record.kept_since_ns()
        listed: list[bool] = []

        def present(sha: bytes) -> bool:
            if not listed:
                db.refresh()  # once: a repack replaced the pack files
                listed.append(True)
            return db.on_disk(sha, refresh=False)

        started = time.time_ns()
        why, vanished = watch.check(trusted, present, self.record.db.has)
        if vanished:
            db.forget_presence()
        if why is None:
            self._objects_trusted = True
            # Whatever changed since this moment (less the racy window, whose files only the
            # next check reads again) is what a resume must verify.
            self._sound_since_ns = started - watch.window_ns
            self._keep_loose_few(watch, self._sound_since_ns)
        return why

    def _watch_store(self) -> ObjectWatch:
        db = self.db
        watch = self._watch
        if watch is None or watch.root != db.root:
            watch = self._watch = db.watch = ObjectWatch(db.root)
        return watch

    def _keep_loose_few(self, watch: ObjectWatch, checked_since_ns: int | None = None) -> None:
        """Every check costs one lstat per loose object and per fan-out directory: past
        LOOSE_LIMIT the loose objects a check has just found sound go into a small pack and
        their emptied directories go, as git's auto gc does; the store's small packs are merged
        now and then, so both the walk and the number of packs stay short."""
        if watch.loose_count() - len(self._big_loose) <= LOOSE_LIMIT:
            return  # counted during the check's listing: no pass over every file here
        loose = watch.loose()
        packable = [sha for sha, _ in loose if sha not in self._big_loose]
        if len(packable) > LOOSE_LIMIT:
            # A file older than SETTLED_NS may be on disk for good: its pack must be too before
            # the file goes (a machine crash must not lose an object both ways).
            settled = time.time_ns() - SETTLED_NS
            durable = any(ctime < settled for _, ctime in loose)
            big = self.db.pack_loose(packable, durable=durable)
            # The big ones known before were not offered (so not returned): still loose, they
            # stay known, and a header is not read again at every check.
            still_loose = {sha for sha, _ in loose}
            self._big_loose = (self._big_loose & still_loose) | set(big)
            # What changed since the check's listing (`checked_since_ns`) is not all the engine's:
            # the next check reads it again rather than taking it as known.
            watch.baseline(checked_since_ns)

    def rebuild(self, why: str, commit: str) -> None:
        """Replace a damaged workspace repository by one made from the record, at `commit`."""
        assert self.record is not None
        self.close()
        where = self.record.rebuild(self.workspace, commit)
        self._commit_trees.clear()
        self._watch = None
        self._big_loose.clear()
        self._objects_trusted = True  # made just now, from the record
        self.kept = commit
        self.note(
            f"the workspace repository was damaged ({why}); rebuilt it from the engine's record "
            f"of kept commits at {commit[:12]} ({where})"
        )

    def _heal(self, why: str, commit: str | None) -> bool:
        """Rebuild at `commit` if the record can; False when there is nothing to rebuild from."""
        if self.record is None or commit is None or not self.record.has_commit(commit):
            return False
        self.rebuild(why, commit)
        return True

    def _with_access(self, operation: Callable[[], T]) -> T:
        """Run a world operation; when the workspace denies the engine access (an agent's
        `chmod 000` on a directory), give the owner's access back everywhere and run it again."""
        try:
            return operation()
        except PermissionError as exc:
            regained = permissions.regain_tree(self.root)
            if not regained:
                raise _denied(self.workspace, exc) from exc
            shown = ", ".join(os.fsdecode(path) for path in regained[:5])
            more = f" and {len(regained) - 5} more" if len(regained) > 5 else ""
            self.note(
                f"the workspace had lost the permissions the engine needs on {shown}{more}; they were given back"
            )
        try:
            return operation()
        except PermissionError as exc:
            raise _denied(self.workspace, exc) from exc

    def stage(self) -> tuple[str, bool, str]:
        """`git add -A` without a commit: (tree id, equal to the kept state, why refused)."""
        return self._with_access(self._stage)

    def _stage(self) -> tuple[str, bool, str]:
        why = self.damage()
        if why is None:
            try:
                if self.stage_all():
                    self._write_index()
                staged = self._staged
                assert staged is not None
                tree = staged.tree_id(self.db)
                base = self.kept.encode() if self.kept else self.head()
                unchanged = base is not None and self.tree_of(base) == tree
                self._stage_checked = True
                return tree.hex(), unchanged, ""
            except Exception as exc:
                if isinstance(exc, PermissionError):
                    raise
                if self.record is None or not self.record.exists():
                    if isinstance(exc, RunFailed | WorkspaceError):
                        raise
                    raise RunFailed(
                        f"staging failed in {self.workspace}: {exc}", hint="check the workspace"
                    ) from exc
                why = self.damage()
                if why is None:
                    if isinstance(
                        exc, OSError
                    ):  # an unreadable file, say: the candidate's, not the repository's
                        return "", False, f"the candidate could not be staged: {exc}"
                    why = f"{type(exc).__name__}: {exc}"
        kept = self.kept or (self.record.kept() if self.record else None)
        if not self._heal(why, kept):
            raise RunFailed(
                f"the workspace repository is damaged ({why}) and there is no record to rebuild it from",
                hint="restore the workspace's .git from a backup",
            )
        return "", False, f"the candidate damaged the workspace repository ({why}); it was rebuilt"

    def put_back_staged(self, token: str) -> None:
        """Make the files hold the staged tree `token` again: what changed since stage() is undone.

        A measure's side effects (a build directory, a rewritten file) go this way, so a keep
        commits what was measured. Ignored and spared paths are left alone, as restore leaves them.
        """
        self._with_access(lambda: self._put_back_staged(token))

    def _put_back_staged(self, token: str) -> None:
        why = self.damage()
        if why is not None:
            raise RunFailed(
                f"the workspace repository is damaged ({why}); the candidate was not kept",
                hint="resume the run: the repository is rebuilt from the engine's record",
            )
        try:
            self._checkout(bytes.fromhex(token))
        except PermissionError:
            raise
        except (OSError, ValueError) as exc:
            raise RunFailed(
                f"could not undo the measure's changes in {self.workspace}: {exc}", hint="check the workspace"
            ) from exc

    def snapshot(self, label: str, *, pack: bool = False) -> str:
        """Stage everything and commit it; with nothing to commit, HEAD is the snapshot.

        `pack` writes the new objects as packs instead of loose files (a baseline of a whole
        tree: one file per object would cost one lstat each on every later check).
        """
        return self._with_access(lambda: self._keep(label, pack))

    def _keep(self, label: str, pack: bool = False) -> str:
        # Right after a stage that checked the object store, the keep does not walk it again:
        # what the keep copies into the record is verified there object by object (kept_record),
        # so nothing damaged since that check enters kept history; the next check (the next
        # stage's, or a resume's, which verifies what changed since that check) finds the
        # damage before anything else reads the store. .git and the refs are checked as always.
        why = self.damage(objects=not self._stage_checked)
        if why is not None:
            raise _not_kept(why)
        before = self.kept
        try:
            kept = self._snapshot(label, pack)
        except (RunFailed, OSError):
            raise
        except Exception as exc:  # an object it read was mangled since the check
            raise _not_kept(self.damage() or f"{type(exc).__name__}: {exc}") from exc
        if self.record is not None and self.record.exists():
            try:
                self.record.record(self.db, kept, sound_since_ns=self._sound_since_ns)
            except OSError as exc:
                raise RunFailed(
                    f"could not record the kept commit outside the workspace: {exc}",
                    hint="check the state directory's disk",
                ) from exc
            except Exception as exc:  # an object of the commit was damaged: the record refused it
                # The record's latest commit stays the one kept; a rebuild goes back to it.
                self.kept = self.record.kept() or before
                raise _not_kept(self.damage() or f"{type(exc).__name__}: {exc}") from exc
        return kept

    def _snapshot(self, label: str, pack: bool = False) -> str:
        try:
            # Every object is on disk before the index or HEAD names it.
            with self.db.packed() if pack else contextlib.nullcontext():
                changed = self.stage_all()
                staged = self._staged
                assert staged is not None
                tree = staged.tree_id(self.db)
                head = self.head()
                new = head is None or self.tree_of(head) != tree
                if new:
                    commit = self._commit(tree, head, label)
            if not new:
                assert head is not None
                if changed:
                    self._write_index()
                self.kept = head.decode()
                return self.kept
            if changed or self._index_key is None:
                # Otherwise the file on disk is the one stage() wrote for this very tree (the
                # index names no commit), so a keep right after a stage skips two renames.
                self._write_index()
            self._move_head(head, commit, f"commit: {label}")
        except PermissionError:
            raise
        except OSError as exc:
            raise RunFailed(
                f"snapshot failed in {self.workspace}: {exc}", hint="check the workspace"
            ) from exc
        self.kept = commit.decode()
        return self.kept

    def _commit(self, tree: bytes, parent: bytes | None, label: str) -> bytes:
        # The baseline commit is a function of its tree and parent alone (it takes the parent's
        # time, or 0), so a run's base commit, and the RunIdentity digest that names it, can be
        # known before the run: `crucible scope` freezes that digest in SCOPE.md.
        seconds = self._commit_time(parent) if label == BASELINE_LABEL else int(time.time())
        when = b"%d +0000" % seconds
        lines = [b"tree " + tree.hex().encode()]
        if parent is not None:
            lines.append(b"parent " + parent)
        lines.append(b"author " + IDENTITY + b" " + when)
        lines.append(b"committer " + IDENTITY + b" " + when)
        message = label.replace("\0", "").encode("utf-8", "surrogateescape").rstrip(b"\n") + b"\n"
        body = b"\n".join(lines) + b"\n\n" + message
        commit = self.db.write(b"commit", body).hex().encode()
        self._commit_trees[commit] = tree
        return commit

    def _commit_time(self, commit: bytes | None) -> int:
        """The committer time of `commit` (0 for none, or one that cannot be read)."""
        if commit is None:
            return 0
        try:
            kind, body = self.db.read(bytes.fromhex(commit.decode()))
        except (RunFailed, OSError, ValueError):
            return 0
        for line in body.split(b"\n\n", 1)[0].split(b"\n") if kind == b"commit" else ():
            if line.startswith(b"committer "):
                stamp = line.rsplit(b" ", 2)[-2]
                return int(stamp) if stamp.isdigit() else 0
        return 0

    def restore(self, rev: str) -> None:
        """`git reset --hard rev && git clean -fd`, touching only the paths that differ.

        A damaged repository (see damage()) is rebuilt from the record first; a restore that
        fails on the way (a missing or mangled object) is retried once on a rebuilt one.
        """
        self._with_access(lambda: self._restore_healed(rev))

    def _restore_healed(self, rev: str) -> None:
        why = self.damage()
        if why is not None and not self._heal(why, rev.strip()):
            raise RunFailed(
                f"the workspace repository is damaged ({why}) and the record does not hold {rev!r}",
                hint="restore the workspace's .git from a backup",
            )
        try:
            self._restore(rev)
        except PermissionError:
            raise
        except Exception as exc:
            if not self._heal(f"restore failed: {type(exc).__name__}: {exc}", rev.strip()):
                raise
            self._restore(rev)

    def _restore(self, rev: str) -> None:
        commit = self.resolve_commit(rev)
        try:
            tree = self.tree_of(commit)
            self._checkout(tree, rules=tree)  # the ignore rules of the state it returns to
            head = self.head()
            if head != commit:
                self._move_head(head, commit, f"reset: moving to {commit.decode()}")
        except PermissionError:
            raise
        except OSError as exc:
            raise RunFailed(f"restore failed in {self.workspace}: {exc}", hint="check the workspace") from exc
        self.kept = commit.decode()

    def _checkout(self, target_tree: bytes, rules: bytes | None = None) -> None:
        """Make the working tree `target_tree`; the clean judges untracked paths by the ignore
        rules of tree `rules` (the kept tree's when None), as staging did."""
        staged = self._sync()
        db = self.db
        scan = scan_worktree(self.root, staged, self._racy_ns)
        plan = checkout.plan_against(db, staged, target_tree)
        planned = {path for path, _, _ in plan.writes}
        planned.update(plan.removes)
        writes = list(plan.writes)
        # Tracked files the agent touched go back to their content in the target; a suspect
        # whose stat still matches git's rule (an index just read from disk) is left alone.
        racy_ns = self._racy_ns
        for node, name, path, st in scan.suspects:
            entry = node.files[name]
            if path in planned:
                continue
            if st.st_mtime_ns < racy_ns and stat_matches(entry, st):
                node.files[name] = entry._replace(quick=quick_key(st))
                continue
            writes.append((path, entry.mode, entry.sha))
        for path in scan.missing:
            if path not in planned:
                missing = staged.get(path)
                if missing is not None:
                    writes.append((path, missing.mode, missing.sha))
        for directory in scan.missing_dirs:
            writes.extend(
                (path, entry.mode, entry.sha)
                for path, entry in staged.files(directory)
                if path not in planned
            )
        changed = bool(writes or plan.removes) or self._stale_index
        writer = checkout.WorktreeWriter(self.root)
        for path in plan.removes:
            writer.remove(path)
            staged.remove(path)
        for path, mode, sha in writes:
            data = b"" if mode == MODE_GITLINK else db.read(sha)[1]
            st = writer.write(path, mode, data)
            # Rewriting a file the agent touched leaves its directory's tree id as it was.
            staged.put(path, make_entry(path, mode, sha, st), content=path in planned)
        if scan.untracked:
            checkout.clean(self.root, scan.untracked, staged, self.ignore_rules(rules))
        if changed:
            self._write_index()

    def changed_paths(self) -> list[str]:
        """Paths a snapshot now would change relative to the last kept state (git add -A; diff)."""
        return self._with_access(self._changed_paths)

    def _changed_paths(self) -> list[str]:
        if self.damage() is not None:
            return []  # nothing is read through a damaged repository; the next stage heals it
        changed = self.stage_all()
        if changed:
            self._write_index()
        base = self.kept.encode() if self.kept else self.head()
        staged = self._staged
        assert staged is not None
        if base is None:
            return [os.fsdecode(path) for path, _ in staged.files()]
        plan = checkout.plan_against(self.db, staged, self.tree_of(base))
        paths = {path for path, _, _ in plan.writes}
        paths.update(plan.removes)
        return sorted(os.fsdecode(path) for path in paths)


def _not_kept(why: str) -> RunFailed:
    return RunFailed(
        f"the workspace repository is damaged ({why}); the candidate was not kept",
        hint="resume the run: the repository is rebuilt from the engine's record",
    )


def _denied(workspace: Path, exc: PermissionError) -> RunFailed:
    return RunFailed(
        f"the workspace {workspace} denies the engine access: {exc}",
        hint="give the run's user read, write and search permission on the workspace and its .git, then resume",
    )


def _nested_head(full: bytes) -> bytes | None:
    """The raw commit id a nested repository has checked out, or None if it has none.

    Its HEAD and refs are read as regular files only, like the workspace's own.
    """
    dotgit = Path(os.fsdecode(full)) / ".git"
    try:
        if dotgit.is_dir() and not dotgit.is_symlink():
            controldir = dotgit
        else:
            pointer = head_ref.read_ref_file(dotgit) or b""
            if not pointer.startswith(b"gitdir: "):
                return None
            controldir = dotgit.parent / os.fsdecode(pointer[8:].strip())
        common = head_ref.read_ref_file(controldir / "commondir")
        commondir = controldir / os.fsdecode(common.strip()) if common else controldir
        head = head_ref.read_head(controldir, commondir)
        return None if head is None else bytes.fromhex(head.decode("ascii"))
    except (head_ref.Unsupported, head_ref.Unreadable, OSError, ValueError):
        return None
