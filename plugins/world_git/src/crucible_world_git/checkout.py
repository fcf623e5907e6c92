"""Making the working tree match a target tree: the plan, writing and removing paths, and the clean."""

from __future__ import annotations

import os
import shutil
import stat
from contextlib import suppress

import attrs

from crucible_world_git.ignores import IgnoreRules
from crucible_world_git.index_file import MODE_EXEC, MODE_GITLINK, MODE_LINK, MODE_TREE
from crucible_world_git.loose_objects import ObjectDatabase, open_regular, parse_tree, write_all
from crucible_world_git.staged_tree import DirNode, StagedTree


@attrs.define
class Plan:
    """How the index differs from a target tree: paths to drop, and (path, mode, id) to write."""

    removes: list[bytes] = attrs.field(factory=list)
    writes: list[tuple[bytes, int, bytes]] = attrs.field(factory=list)


def plan_against(db: ObjectDatabase, staged: StagedTree, target_tree: bytes) -> Plan:
    """Diff the staged tree with `target_tree`, skipping every directory whose tree id matches."""
    plan = Plan()
    staged.tree_id(db)  # make every directory's cached id valid, so equal subtrees are skipped
    _diff(db, staged.root, target_tree, b"", plan)
    return plan


def _diff(db: ObjectDatabase, node: DirNode | None, tree: bytes | None, prefix: bytes, plan: Plan) -> None:
    if node is not None and tree is not None and node.tree == tree:
        return
    files = node.files if node is not None else {}
    dirs = node.dirs if node is not None else {}
    target: dict[bytes, tuple[int, bytes]] = {}
    if tree is not None:
        _, body = db.read(tree)
        target = {name: (mode, sha) for name, mode, sha in parse_tree(body)}
    for name, (mode, sha) in target.items():
        path = prefix + name
        if mode == MODE_TREE:
            if name in files:
                plan.removes.append(path)
            _diff(db, dirs.get(name), sha, path + b"/", plan)
        else:
            if name in dirs:
                _diff(db, dirs[name], None, path + b"/", plan)
            entry = files.get(name)
            if entry is None or entry.mode != mode or entry.sha != sha:
                plan.writes.append((path, mode, sha))
    for name in files:
        if name not in target:
            plan.removes.append(prefix + name)
    for name, sub in dirs.items():
        if name not in target:
            _diff(db, sub, None, prefix + name + b"/", plan)


class WorktreeWriter:
    """Writes and removes tracked paths for one checkout, never through a symlink.

    A directory the agent replaced by a symlink must not let a checkout write or delete
    files wherever the link points: every leading directory is checked (once per checkout)
    to be a real directory, and whatever else stands there is removed, as git does.
    """

    def __init__(self, root: bytes) -> None:
        self.root = root
        self._real_dirs: set[bytes] = {b""}

    def _parents(self, path: bytes, *, make: bool) -> bool:
        """Whether every directory leading to `path` is a real one; with `make`, make it so."""
        slash = path.rfind(b"/")
        parent = path[:slash] if slash >= 0 else b""
        if parent in self._real_dirs:
            return True
        current = b""
        for part in parent.split(b"/"):
            current = current + b"/" + part if current else part
            if current in self._real_dirs:
                continue
            full = self.root + b"/" + current
            try:
                st = os.lstat(full)
            except FileNotFoundError:
                if not make:
                    return False
                os.mkdir(full)
            else:
                if not stat.S_ISDIR(st.st_mode):
                    if not make:
                        return False
                    os.unlink(full)
                    os.mkdir(full)
            self._real_dirs.add(current)
        return True

    def remove(self, path: bytes) -> None:
        """Delete a file the target no longer tracks, and the directories it leaves empty."""
        if not self._parents(path, make=False):
            return  # its directory is gone or is not a directory any more: nothing of ours there
        full = self.root + b"/" + path
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            # A gitlink, or a directory the agent put where a file was: only an empty one goes
            # here; anything inside is the clean's to judge.
            try:
                os.rmdir(full)
            except OSError:
                return
        else:
            os.unlink(full)
        for removed in remove_empty_parents(self.root, path):
            self._real_dirs.discard(removed)

    def write(self, path: bytes, mode: int, data: bytes) -> os.stat_result:
        """Put a tracked path in place (replacing whatever is there) and return its lstat."""
        self._parents(path, make=True)
        full = self.root + b"/" + path
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            pass
        else:
            if not stat.S_ISDIR(st.st_mode):
                os.unlink(full)
            elif mode == MODE_GITLINK:
                return st  # a submodule's checkout is its own business
            else:
                shutil.rmtree(full)
        if mode == MODE_LINK:
            os.symlink(data, full)
        elif mode == MODE_GITLINK:
            # git checks out a submodule's directory, never its contents.
            os.mkdir(full)
        else:
            # A fresh file, so the mode comes from the umask as git's checkout does.
            fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o777 if mode == MODE_EXEC else 0o666)
            try:
                write_all(fd, data)
            finally:
                os.close(fd)
        return os.lstat(full)


def remove_empty_parents(root: bytes, path: bytes, stop: StagedTree | None = None) -> list[bytes]:
    """Remove the directories above `path` that are now empty (up to `stop`'s tracked ones)."""
    removed: list[bytes] = []
    while True:
        slash = path.rfind(b"/")
        if slash < 0:
            return removed
        path = path[:slash]
        if stop is not None and stop.is_dir(path):
            return removed
        try:
            os.rmdir(root + b"/" + path)
        except OSError:
            return removed
        removed.append(path)


def is_nested_repository(full: bytes) -> bool:
    """Whether a directory holds a repository of its own, which `git clean -d` leaves alone."""
    dotgit = full + b"/.git"
    try:
        st = os.lstat(dotgit)
    except OSError:
        return False
    if stat.S_ISREG(st.st_mode):
        try:
            with open_regular(dotgit) as f:
                return f.read(8) == b"gitdir: "
        except OSError:
            return False
    if stat.S_ISDIR(st.st_mode):
        return (
            os.path.isfile(dotgit + b"/HEAD")
            and os.path.isdir(dotgit + b"/objects")
            and os.path.isdir(dotgit + b"/refs")
        )
    return False


def clean(root: bytes, candidates: list[tuple[bytes, bool]], staged: StagedTree, rules: IgnoreRules) -> None:
    """`git clean -fd` over the paths a scan found untracked, judged against the new index.

    Ignored paths stay (no -x), and so does every nested repository (no second -f).
    """
    for path, _ in candidates:
        if staged.get(path) is not None:
            continue  # the checkout put a tracked file here
        node = staged.find_dir(path)
        if node is not None and os.path.isdir(root + b"/" + path) and not os.path.islink(root + b"/" + path):
            _clean_inside(root, path, node, rules)
        else:
            _clean_path(root, path, rules)
            remove_empty_parents(root, path, stop=staged)


def _clean_path(root: bytes, path: bytes, rules: IgnoreRules) -> None:
    full = root + b"/" + path
    try:
        st = os.lstat(full)
    except (FileNotFoundError, NotADirectoryError):
        return
    if stat.S_ISDIR(st.st_mode):
        if rules.prunes_dir(path) or is_nested_repository(full):
            return
        for name in os.listdir(full):
            _clean_path(root, path + b"/" + name, rules)
        with suppress(OSError):  # ignored files live on inside
            os.rmdir(full)
    elif not rules.ignores_file(path):
        os.unlink(full)


def _clean_inside(root: bytes, path: bytes, node: DirNode, rules: IgnoreRules) -> None:
    # The target tracks something below this once-untracked directory: judge its children.
    full = root + b"/" + path
    for name in os.listdir(full):
        child = path + b"/" + name
        if name in node.files or name == b".git":
            continue
        sub = node.dirs.get(name)
        if sub is not None:
            _clean_inside(root, child, sub, rules)
        else:
            _clean_path(root, child, rules)
