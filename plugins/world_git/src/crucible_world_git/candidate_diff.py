"""The candidate's change against the kept state it was proposed from: a row's `diff` and `diffstat`.

Read from the object store only: a symlink the agent planted shows as the path it names (its
blob), never as what it points at, and nothing outside the workspace's repository is opened.
The agent chose every byte here, so each file is bounded: a side over `FILE_DIFF_CAP` is named
with its size instead of diffed, and past `TEXT_BUDGET` bytes of diff text the rest of the files
are only counted (the engine cuts a row's diff far below that anyway).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from dulwich.objects import Blob
from dulwich.patch import gen_diff_header, write_object_diff

from crucible_world_git.change_diff import shown_path
from crucible_world_git.diffstat import summary_line
from crucible_world_git.dulwich_names import object_id
from crucible_world_git.git_memory import GitMemory
from crucible_world_git.index_file import MODE_GITLINK, MODE_TREE
from crucible_world_git.loose_objects import parse_tree

if TYPE_CHECKING:
    from dulwich.objects import ObjectID

# A file side bigger than this is not run through the line diff (difflib's cost grows with the
# product of the two sides' lines): its header and sizes stand for it, as git's "Binary files".
FILE_DIFF_CAP = 1 << 20
# How much diff text is produced before the remaining files are only counted.
TEXT_BUDGET = 256 * 1024

Side = tuple[int, bytes] | None  # (mode, raw object id), None when the path is absent


def candidate_change(memory: GitMemory, base: str, staged_tree: str) -> tuple[str, str]:
    """(unified diff, one-line diffstat) from kept commit `base` to the staged tree `staged_tree`."""
    old_tree = memory.tree_of(memory.resolve_commit(base))
    new_tree = bytes.fromhex(staged_tree)
    if old_tree == new_tree:
        return "", ""
    out = io.BytesIO()
    files = insertions = deletions = 0
    for path, old, new in _changes(memory, old_tree, new_tree, b""):
        files += 1
        piece = io.BytesIO()
        _write_file_diff(piece, memory, path, old, new)
        added, removed = _counted(piece.getvalue())
        insertions += added
        deletions += removed
        if out.tell() < TEXT_BUDGET:
            out.write(piece.getvalue())
    text = out.getvalue().decode("utf-8", "replace")
    if out.tell() >= TEXT_BUDGET:
        text += f"[crucible: diff text stopped after {TEXT_BUDGET} bytes; every file is counted]\n"
    return text, summary_line(files, insertions, deletions)


def _entries(memory: GitMemory, tree: bytes | None) -> dict[bytes, tuple[int, bytes]]:
    if tree is None:
        return {}
    kind, body = memory.db.read(tree)
    if kind != b"tree":
        return {}
    return {name: (mode, sha) for name, mode, sha in parse_tree(body)}


def _changes(
    memory: GitMemory, old_tree: bytes | None, new_tree: bytes | None, prefix: bytes
) -> list[tuple[bytes, Side, Side]]:
    """Every changed file below the two trees, in git's path order (a tree never opened twice)."""
    old, new = _entries(memory, old_tree), _entries(memory, new_tree)
    found: list[tuple[bytes, Side, Side]] = []
    for name in sorted(old.keys() | new.keys()):
        before, after = old.get(name), new.get(name)
        if before == after:
            continue
        path = prefix + name
        old_dir = before is not None and before[0] == MODE_TREE
        new_dir = after is not None and after[0] == MODE_TREE
        if old_dir or new_dir:
            found.extend(
                _changes(
                    memory,
                    before[1] if old_dir and before is not None else None,
                    after[1] if new_dir and after is not None else None,
                    path + b"/",
                )
            )
            # a file that became a directory (or back) is a removal beside the tree's additions
            if before is not None and not old_dir:
                found.append((path, before, None))
            if after is not None and not new_dir:
                found.append((path, None, after))
            continue
        found.append((path, before, after))
    found.sort(key=lambda change: change[0])
    return found


def _body(memory: GitMemory, side: Side) -> bytes:
    if side is None or side[0] == MODE_GITLINK:
        return b""
    return memory.db.read(side[1])[1]


class _Bodies:
    """The two sides' objects, already read, as the store dulwich's diff writer asks by hex id
    (through dulwich's own store each would be read and parsed a second time)."""

    def __init__(self, bodies: dict[bytes, bytes]) -> None:
        self._bodies = bodies

    def __getitem__(self, hexsha: bytes) -> Blob:
        return Blob.from_string(self._bodies[hexsha])


def _diff_side(path: bytes, side: Side) -> tuple[bytes | None, int | None, ObjectID | None]:
    """One side as dulwich's diff writer takes it: (path, mode, hex id), all None when absent."""
    if side is None:
        return None, None, None
    return path, side[0], object_id(side[1].hex().encode())


def _write_file_diff(out: io.BytesIO, memory: GitMemory, path: bytes, old: Side, new: Side) -> None:
    shown = shown_path(path) or path
    old_file, new_file = _diff_side(shown, old), _diff_side(shown, new)
    old_body, new_body = _body(memory, old), _body(memory, new)
    old_size, new_size = len(old_body), len(new_body)
    if max(old_size, new_size) > FILE_DIFF_CAP:
        header = gen_diff_header(
            (old_file[0], new_file[0]), (old_file[1], new_file[1]), (old_file[2], new_file[2])
        )
        out.writelines(header)
        out.write(
            b"Large file a/%s (%d bytes) and b/%s (%d bytes): not diffed\n"
            % (shown, old_size, shown, new_size)
        )
        return
    bodies = {
        hexsha: body
        for hexsha, body in ((old_file[2], old_body), (new_file[2], new_body))
        if hexsha is not None
    }
    write_object_diff(out, _Bodies(bodies), old_file, new_file)  # type: ignore[arg-type]


def _counted(piece: bytes) -> tuple[int, int]:
    """(insertions, deletions) of one file's diff: the +/- lines of its hunks."""
    added = removed = 0
    in_hunk = False
    for line in piece.split(b"\n"):
        if line.startswith(b"@@"):
            in_hunk = True
        elif in_hunk and line.startswith(b"+"):
            added += 1
        elif in_hunk and line.startswith(b"-"):
            removed += 1
    return added, removed
