"""Rules the git oracle cannot provoke on a fine-grained clock: racy entries and the index codec."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crucible_core.errors import RunFailed
from crucible_world_git.index_file import quick_key, read_index
from crucible_world_git.worktree_scan import scan_worktree
from tests.world_git.support import Twin, git, write


def _forge_same_stat(twin: Twin, rel: str) -> None:
    """Make the cached signature match the file on disk, as a coarse clock would after an edit."""
    memory = twin.world.memory
    staged = memory._sync()
    path = rel.encode()
    entry = staged.get(path)
    assert entry is not None
    st = os.lstat(twin.ours / rel)
    staged.put(path, entry._replace(quick=quick_key(st)), content=False)
    memory._racy_ns = st.st_mtime_ns  # the index was written in the same tick as the edit


def test_a_racily_clean_file_is_hashed_even_when_its_stat_matches(tmp_path: Path) -> None:
    twin = Twin.create(tmp_path)
    write(twin.ours, "README.md", "HELLO\n")  # same size as "hello\n"
    _forge_same_stat(twin, "README.md")
    sha = twin.world.snapshot("racy")
    assert git(twin.ours, "show", f"{sha}:README.md") == "HELLO\n"
    # Verified by reading, so the index was rewritten after it: the next scan trusts the stat.
    memory = twin.world.memory
    scan = scan_worktree(memory.root, memory._sync(), memory._racy_ns)
    assert scan.suspects == []


def test_a_racily_clean_file_is_restored(tmp_path: Path) -> None:
    twin = Twin.create(tmp_path)
    head = git(twin.ours, "rev-parse", "HEAD").strip()
    write(twin.ours, "README.md", "HELLO\n")
    _forge_same_stat(twin, "README.md")
    twin.world.restore(head)
    assert (twin.ours / "README.md").read_text() == "hello\n"


def test_index_written_by_us_reads_back_and_git_agrees(tmp_path: Path) -> None:
    twin = Twin.create(tmp_path)
    write(twin.ours, "src/x.py", "x\n")
    twin.world.snapshot("x")
    parsed = read_index(str(twin.ours / ".git" / "index"))
    listed = git(twin.ours, "ls-files", "-s").splitlines()
    assert [p.decode() for p, _ in parsed.entries] == [line.split("\t", 1)[1] for line in listed]
    assert [f"{e.mode:o} {e.sha.hex()} 0" for _, e in parsed.entries] == [
        line.split("\t")[0] for line in listed
    ]
    assert (twin.ours / ".git" / "index").read_bytes()[4:8] == b"\0\0\0\2"


def test_a_split_index_is_refused_with_advice(tmp_path: Path) -> None:
    twin = Twin.create(tmp_path)
    git(twin.ours, "update-index", "--split-index")
    with pytest.raises(RunFailed, match="split index") as caught:
        read_index(str(twin.ours / ".git" / "index"))
    assert "--no-split-index" in (caught.value.hint or "")


def test_a_corrupt_index_is_refused(tmp_path: Path) -> None:
    twin = Twin.create(tmp_path)
    index = twin.ours / ".git" / "index"
    data = bytearray(index.read_bytes())
    data[40] ^= 0xFF
    index.write_bytes(bytes(data))
    with pytest.raises(RunFailed, match="checksum"):
        read_index(str(index))


def test_a_leftover_index_lock_stops_the_snapshot(tmp_path: Path) -> None:
    twin = Twin.create(tmp_path)
    (twin.ours / ".git" / "index.lock").write_text("")
    write(twin.ours, "README.md", "changed\n")
    with pytest.raises(RunFailed, match=r"index\.lock exists"):
        twin.world.snapshot("blocked")


def test_a_racy_file_found_unchanged_is_not_read_again_next_time(tmp_path: Path) -> None:
    twin = Twin.create(tmp_path)
    head = git(twin.ours, "rev-parse", "HEAD").strip()
    _forge_same_stat(twin, "src/app.py")
    assert twin.world.snapshot("nothing new") == head
    memory = twin.world.memory
    scan = scan_worktree(memory.root, memory._sync(), memory._racy_ns)
    assert scan.suspects == []  # the index was rewritten later than the file's mtime


def _extensions(index: Path) -> dict[bytes, bytes]:
    """The extensions of a version-2 index, by signature."""
    data = index.read_bytes()
    count = int.from_bytes(data[8:12], "big")
    pos = 12
    for _ in range(count):
        name_length = int.from_bytes(data[pos + 60 : pos + 62], "big") & 0xFFF
        pos += (62 + name_length + 8) & ~7
    found = {}
    while pos < len(data) - 20:
        size = int.from_bytes(data[pos + 4 : pos + 8], "big")
        found[data[pos : pos + 4]] = data[pos + 8 : pos + 8 + size]
        pos += 8 + size
    return found


def test_our_cache_tree_is_the_one_git_writes(tmp_path: Path) -> None:
    twin = Twin.create(tmp_path)
    write(twin.ours, "src/new/deeper/file.txt", "x\n")
    write(twin.ours, "zz/file.txt", "x\n")
    twin.world.snapshot("more directories")
    ours = _extensions(twin.ours / ".git" / "index")[b"TREE"]
    git(twin.ours, "read-tree", "HEAD")  # git primes a full cache-tree from the commit
    assert _extensions(twin.ours / ".git" / "index")[b"TREE"] == ours


def test_a_cold_start_adopts_the_cache_tree_only_where_counts_agree(tmp_path: Path) -> None:
    from crucible_world_git.staged_tree import StagedTree

    twin = Twin.create(tmp_path)
    write(twin.ours, "README.md", "changed\n")
    twin.world.snapshot("x")
    parsed = read_index(str(twin.ours / ".git" / "index"))
    staged = StagedTree.from_entries(parsed.entries, parsed.cache_tree)
    head_tree = bytes.fromhex(git(twin.ours, "rev-parse", "HEAD^{tree}").strip())
    assert staged.root.tree == head_tree  # no directory needs hashing again
    lying = dict(parsed.cache_tree)
    lying[b"src"] = (lying[b"src"][0] + 1, lying[b"src"][1])
    staged = StagedTree.from_entries(parsed.entries, lying)
    assert staged.root.dirs[b"src"].tree is None
    assert staged.tree_id(twin.world.memory.db) == head_tree


def test_a_new_workspace_repository_is_what_dulwich_makes_without_an_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dulwich.repo import Repo

    from crucible_world_git.engine_repo import init_repo

    (tmp_path / "ours").mkdir()
    (tmp_path / "dulwich").mkdir()
    Repo.init(str(tmp_path / "dulwich")).close()
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    init_repo(tmp_path / "ours").close()
    assert synced == []  # git init does not fsync either; see init_repo

    def tree(root: Path) -> dict[str, bytes | None]:
        return {
            str(p.relative_to(root)): p.read_bytes() if p.is_file() else None for p in sorted(root.rglob("*"))
        }

    assert tree(tmp_path / "ours") == tree(tmp_path / "dulwich")
    assert git(tmp_path / "ours", "status", "--porcelain") == ""


def test_ignore_rules_compiled_once_per_text_still_follow_the_text(tmp_path: Path) -> None:
    from crucible_world_git.ignores import IgnoreRules

    def rules(text: bytes) -> IgnoreRules:
        return IgnoreRules(str(tmp_path), lambda _path: None, [text])

    logs = rules(b"*.log\n")
    assert logs.ignores_file(b"build.log") and not logs.ignores_file(b"build.txt")
    # The same text reuses its compiled filter; another text is compiled for itself.
    assert rules(b"*.log\n")._manager._global_filters == logs._manager._global_filters
    texts = rules(b"*.txt\n")
    assert texts.ignores_file(b"build.txt") and not texts.ignores_file(b"build.log")
    assert rules(b"*.log\n").ignores_file(b"build.log")


def test_a_small_index_and_the_branch_are_written_over_in_place_and_git_reads_them(tmp_path: Path) -> None:
    """Creating git's lock file costs the kernel far more than the write: a small index of the
    same size, and the branch HEAD names, are written over in place (same inode, no lock file
    left), and git reads both as its own."""
    twin = Twin.create(tmp_path)
    dotgit = twin.ours / ".git"
    index, branch = dotgit / "index", dotgit / "refs" / "heads" / "main"
    twin.edit(lambda root: write(root, "README.md", "first\n"))
    twin.snapshot("first")
    inodes = (index.stat().st_ino, branch.stat().st_ino)
    for n in range(3):
        twin.edit(lambda root, n=n: write(root, "README.md", f"edit{n}\n"))
        _, ours = twin.snapshot(f"edit {n}")
        assert (index.stat().st_ino, branch.stat().st_ino) == inodes
        assert git(twin.ours, "rev-parse", "main").strip() == ours
        twin.assert_same()
    assert not list(dotgit.glob("**/*.lock"))
    assert git(twin.ours, "reflog", "-1", "--format=%gs").strip() == "commit: edit 2"
    git(twin.ours, "fsck", "--strict", "--no-dangling")


@pytest.mark.parametrize("name", ["index", "refs/heads/main"])
def test_an_index_or_branch_hard_linked_elsewhere_is_replaced_not_written_through(
    tmp_path: Path, name: str
) -> None:
    """The agent can give the index or the branch a second name (a hard link from a file of its
    choosing): the engine then writes a new file and renames it, as git does, and the file at
    that other name keeps its bytes."""
    twin = Twin.create(tmp_path)
    twin.edit(lambda root: write(root, "README.md", "first\n"))
    twin.snapshot("first")
    target = twin.ours / ".git" / name
    elsewhere = tmp_path / "elsewhere"
    os.link(target, elsewhere)
    before = elsewhere.read_bytes()
    twin.edit(lambda root: write(root, "README.md", "second\n"))
    _, ours = twin.snapshot("second")
    assert elsewhere.read_bytes() == before
    assert target.stat().st_nlink == 1 and target.stat().st_ino != elsewhere.stat().st_ino
    assert git(twin.ours, "rev-parse", "main").strip() == ours
    twin.assert_same()


def test_writing_in_place_leaves_a_file_that_is_not_what_the_caller_expects(tmp_path: Path) -> None:
    """write_in_place only writes over a plain file of the size given that holds what the caller
    read a moment before and whose git lock is free; else it leaves it and says so (None)."""
    from crucible_world_git.index_file import write_in_place

    path = tmp_path / "ref"
    path.write_bytes(b"a" * 40 + b"\n")
    raw = os.fsencode(path)
    assert write_in_place(raw, b"b" * 40 + b"\n", expected=b"c" * 40 + b"\n") is None
    assert write_in_place(raw, b"b" * 39 + b"\n") is None  # another size
    (tmp_path / "ref.lock").write_bytes(b"")
    assert write_in_place(raw, b"b" * 40 + b"\n") is None  # git's lock is taken
    assert path.read_bytes() == b"a" * 40 + b"\n"
    (tmp_path / "ref.lock").unlink()
    os.mkfifo(tmp_path / "fifo")
    assert write_in_place(os.fsencode(tmp_path / "fifo"), b"x") is None
    st = write_in_place(raw, b"b" * 40 + b"\n", expected=b"a" * 40 + b"\n")
    assert st is not None and path.read_bytes() == b"b" * 40 + b"\n"
