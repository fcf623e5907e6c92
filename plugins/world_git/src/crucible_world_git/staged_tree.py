"""The index held in memory as a tree of directories, each caching its tree id and its index bytes.

A change to one file invalidates only the directories above it, so committing or writing the
index after a small edit re-hashes a handful of trees and re-joins a handful of byte strings,
whatever the size of the repository (the same idea as git's cache-tree extension).

Listing a directory's children in git's tree order (a subdirectory sorts as if its name ended
in "/") and walking depth first yields exactly the byte order the index file needs, so both
products come from one traversal shape.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from operator import itemgetter
from typing import TYPE_CHECKING

from crucible_world_git.index_file import MODE_TREE, IndexEntry

if TYPE_CHECKING:
    from crucible_world_git.loose_objects import ObjectDatabase

_by_key = itemgetter(0)


class DirNode:
    """One directory of the index: file entries by name, subdirectories by name, two caches."""

    __slots__ = ("blob", "dirs", "files", "tree")

    def __init__(self) -> None:
        self.files: dict[bytes, IndexEntry] = {}
        self.dirs: dict[bytes, DirNode] = {}
        self.tree: bytes | None = None  # raw tree id, while nothing below changed
        self.blob: bytes | None = None  # the index-file bytes of everything below, likewise

    def ordered(self) -> list[tuple[bytes, IndexEntry | DirNode]]:
        """Children in git tree order; a subdirectory's key carries its trailing slash."""
        items: list[tuple[bytes, IndexEntry | DirNode]] = list(self.files.items())
        items.extend((name + b"/", node) for name, node in self.dirs.items())
        items.sort(key=_by_key)
        return items


class StagedTree:
    """The whole stage-0 index. Paths are workspace-relative bytes with "/" separators."""

    def __init__(self) -> None:
        self.root = DirNode()
        self.count = 0

    @classmethod
    def from_entries(
        cls,
        entries: Iterable[tuple[bytes, IndexEntry]],
        cache_tree: dict[bytes, tuple[int, bytes]] | None = None,
    ) -> StagedTree:
        """Build from entries in index order; `cache_tree` seeds the tree ids it vouches for."""
        staged = cls()
        last_dir: bytes | None = None
        node = staged.root
        count = 0
        for path, entry in entries:
            slash = path.rfind(b"/")
            directory = path[:slash] if slash >= 0 else b""
            if directory != last_dir:
                node = staged._dir(directory, create=True, content=True)
                last_dir = directory
            node.files[path[slash + 1 :]] = entry
            count += 1
        staged.count = count
        if cache_tree:
            _seed(staged.root, b"", cache_tree)
        return staged

    def cache_tree(self, db: ObjectDatabase) -> list[tuple[bytes, int, int, bytes]]:
        """(name, entries, subtrees, tree id) per directory, depth first: the TREE extension."""
        self.tree_id(db)
        items: list[tuple[bytes, int, int, bytes]] = []
        _cache_tree_items(self.root, b"", items)
        return items

    def _dir(self, directory: bytes, *, create: bool, content: bool) -> DirNode:
        """The node for `directory`, invalidating the caches on the way (tree ids only if content)."""
        node = self.root
        node.blob = None
        if content:
            node.tree = None
        if not directory:
            return node
        for part in directory.split(b"/"):
            child = node.dirs.get(part)
            if child is None:
                if not create:
                    raise KeyError(directory)
                if part in node.files:
                    # A file is where a directory now has to be: the index cannot hold both.
                    del node.files[part]
                    self.count -= 1
                child = DirNode()
                node.dirs[part] = child
            node = child
            node.blob = None
            if content:
                node.tree = None
        return node

    def find_dir(self, directory: bytes) -> DirNode | None:
        node = self.root
        if not directory:
            return node
        for part in directory.split(b"/"):
            child = node.dirs.get(part)
            if child is None:
                return None
            node = child
        return node

    def get(self, path: bytes) -> IndexEntry | None:
        slash = path.rfind(b"/")
        node = self.find_dir(path[:slash] if slash >= 0 else b"")
        return None if node is None else node.files.get(path[slash + 1 :])

    def is_dir(self, path: bytes) -> bool:
        return bool(path) and self.find_dir(path) is not None

    def put(self, path: bytes, entry: IndexEntry, *, content: bool = True) -> None:
        """Set the entry for `path`; `content=False` when only its stat data changed."""
        slash = path.rfind(b"/")
        node = self._dir(path[:slash] if slash >= 0 else b"", create=True, content=content)
        name = path[slash + 1 :]
        if name in node.dirs:
            self._drop_subtree(node, name)
            node.tree = None
        if name not in node.files:
            self.count += 1
        node.files[name] = entry

    def remove(self, path: bytes) -> IndexEntry | None:
        slash = path.rfind(b"/")
        directory = path[:slash] if slash >= 0 else b""
        if self.find_dir(directory) is None:
            return None
        node = self._dir(directory, create=False, content=True)
        entry = node.files.pop(path[slash + 1 :], None)
        if entry is not None:
            self.count -= 1
            self._prune(directory)
        return entry

    def remove_dir(self, directory: bytes) -> int:
        """Drop every entry below `directory`; returns how many there were."""
        slash = directory.rfind(b"/")
        parent_path = directory[:slash] if slash >= 0 else b""
        parent = self.find_dir(parent_path)
        name = directory[slash + 1 :]
        if parent is None or name not in parent.dirs:
            return 0
        parent = self._dir(parent_path, create=False, content=True)
        removed = self._drop_subtree(parent, name)
        self._prune(parent_path)
        return removed

    def _drop_subtree(self, parent: DirNode, name: bytes) -> int:
        removed = sum(1 for _ in _files_below(parent.dirs.pop(name), b""))
        self.count -= removed
        return removed

    def _prune(self, directory: bytes) -> None:
        # A directory without entries has no tree in git: remove empty nodes bottom-up.
        while directory:
            node = self.find_dir(directory)
            if node is None or node.files or node.dirs:
                return
            slash = directory.rfind(b"/")
            parent_path = directory[:slash] if slash >= 0 else b""
            parent = self.find_dir(parent_path)
            if parent is None:
                return
            del parent.dirs[directory[slash + 1 :]]
            directory = parent_path

    def files(self, directory: bytes = b"") -> Iterator[tuple[bytes, IndexEntry]]:
        """(path, entry) for every file below `directory`, in index order."""
        node = self.find_dir(directory)
        if node is None:
            return iter(())
        return _files_below(node, directory + b"/" if directory else b"")

    def index_body(self) -> bytes:
        return _blob(self.root)

    def tree_id(self, db: ObjectDatabase) -> bytes:
        """The root tree id, writing the tree objects of changed directories."""
        return _tree(self.root, db)


def _files_below(node: DirNode, prefix: bytes) -> Iterator[tuple[bytes, IndexEntry]]:
    for key, child in node.ordered():
        if isinstance(child, DirNode):
            yield from _files_below(child, prefix + key)
        else:
            yield prefix + key, child


def _blob(node: DirNode) -> bytes:
    if node.blob is None:
        node.blob = b"".join(
            _blob(child) if isinstance(child, DirNode) else child.packed for _, child in node.ordered()
        )
    return node.blob


def _tree(node: DirNode, db: ObjectDatabase) -> bytes:
    if node.tree is None:
        parts = []
        for key, child in node.ordered():
            if isinstance(child, DirNode):
                parts.append(b"%o %s\0%s" % (MODE_TREE, key[:-1], _tree(child, db)))
            else:
                parts.append(b"%o %s\0%s" % (child.mode, key, child.sha))
        node.tree = db.write(b"tree", b"".join(parts))
    return node.tree


def _seed(node: DirNode, path: bytes, cache_tree: dict[bytes, tuple[int, bytes]]) -> int:
    """Adopt the cached tree ids whose entry counts agree with the entries; returns this count."""
    count = len(node.files)
    for name, child in node.dirs.items():
        count += _seed(child, path + b"/" + name if path else name, cache_tree)
    cached = cache_tree.get(path)
    if cached is not None and cached[0] == count:
        node.tree = cached[1]
    return count


def _cache_tree_items(node: DirNode, name: bytes, items: list[tuple[bytes, int, int, bytes]]) -> int:
    assert node.tree is not None
    at = len(items)
    items.append((name, 0, len(node.dirs), node.tree))
    count = len(node.files)
    # git keeps subtrees ordered by name length, then name.
    for child_name in sorted(node.dirs, key=lambda n: (len(n), n)):
        count += _cache_tree_items(node.dirs[child_name], child_name, items)
    items[at] = (name, count, len(node.dirs), node.tree)
    return count
