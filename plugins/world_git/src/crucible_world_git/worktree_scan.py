"""One pass over the working tree against the staged tree: what changed, vanished or is new.

The walk only enters directories the index knows, lstat-ing each tracked file once and
comparing the result with the signature cached in its entry; nothing is read or hashed here.
Entries the index does not know are reported unjudged: whether the ignore rules keep them is
decided afterwards, for the few there are, by the caller that needs to know.
"""

from __future__ import annotations

import os

import attrs

from crucible_world_git.index_file import MODE_GITLINK
from crucible_world_git.staged_tree import DirNode, StagedTree


@attrs.define
class Scan:
    # (directory node, name, path, lstat) of tracked files whose signature no longer matches,
    # or which are racily clean (modified in the same clock tick the index was written).
    suspects: list[tuple[DirNode, bytes, bytes, os.stat_result]] = attrs.field(factory=list)
    # Tracked files with nothing, or a directory, where they were.
    missing: list[bytes] = attrs.field(factory=list)
    # Tracked directories with nothing, or a file, where they were.
    missing_dirs: list[bytes] = attrs.field(factory=list)
    # (path, is_directory) of entries the index does not know.
    untracked: list[tuple[bytes, bool]] = attrs.field(factory=list)
    # Tracked gitlinks (nested repositories) present as directories.
    gitlinks: list[bytes] = attrs.field(factory=list)


def scan_worktree(root: bytes, staged: StagedTree, racy_ns: int) -> Scan:
    """Compare the working tree under `root` (absolute, bytes) with `staged`.

    `racy_ns` is the index file's mtime: a file modified at or after it may have changed
    without its signature changing, so it is always a suspect.
    """
    scan = Scan()
    _scan_dir(root + b"/", b"", staged.root, racy_ns, scan)
    return scan


def _scan_dir(abs_prefix: bytes, prefix: bytes, node: DirNode, racy_ns: int, scan: Scan) -> None:
    files = node.files
    dirs = node.dirs
    suspects = scan.suspects
    untracked = scan.untracked
    subdirs: list[tuple[bytes, DirNode]] = []
    matched = 0
    try:
        listing = os.scandir(abs_prefix)
    except (FileNotFoundError, NotADirectoryError):
        _all_missing(prefix, node, scan)
        return
    with listing:
        for item in listing:
            name = item.name
            entry = files.get(name)
            if entry is not None:
                if item.is_dir(follow_symlinks=False):
                    if entry.mode == MODE_GITLINK:
                        matched += 1
                        scan.gitlinks.append(prefix + name)
                    else:
                        scan.missing.append(prefix + name)
                        untracked.append((prefix + name, True))
                    continue
                matched += 1
                st = item.stat(follow_symlinks=False)
                mtime = st.st_mtime_ns
                key = (mtime, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode)
                if mtime >= racy_ns or entry.quick != key:
                    suspects.append((node, name, prefix + name, st))
                continue
            sub = dirs.get(name)
            if sub is not None:
                if item.is_dir(follow_symlinks=False):
                    matched += 1
                    subdirs.append((name, sub))
                else:
                    scan.missing_dirs.append(prefix + name)
                    untracked.append((prefix + name, False))
                continue
            if name == b".git":
                # git never tracks a .git entry; a nested repository's own is its business.
                continue
            untracked.append((prefix + name, item.is_dir(follow_symlinks=False)))
    if matched != len(files) + len(dirs):
        # Something tracked is gone; only now pay for finding out what.
        present = set(os.listdir(abs_prefix))
        for name in files:
            if name not in present:
                scan.missing.append(prefix + name)
        for name in dirs:
            if name not in present:
                scan.missing_dirs.append(prefix + name)
    for name, sub in subdirs:
        _scan_dir(abs_prefix + name + b"/", prefix + name + b"/", sub, racy_ns, scan)


def _all_missing(prefix: bytes, node: DirNode, scan: Scan) -> None:
    scan.missing.extend(prefix + name for name in node.files)
    scan.missing_dirs.extend(prefix + name for name in node.dirs)
