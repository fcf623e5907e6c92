"""The object-store watch against a real repository: what it accepts, what it calls damage."""

from __future__ import annotations

import os
from pathlib import Path

from crucible_world_git.object_watch import ObjectWatch
from tests.world_git.support import git, write


def repository(tmp_path: Path) -> tuple[Path, ObjectWatch]:
    repo = tmp_path / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "config", "gc.auto", "0")
    write(repo, "a.txt", "a\n")
    write(repo, "b.txt", "b\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    watch = ObjectWatch(os.fsencode(repo / ".git" / "objects"))
    watch.baseline()
    return repo, watch


def check(watch: ObjectWatch, needed: frozenset[bytes] = frozenset()) -> str | None:
    return watch.check(None, lambda sha: False, needed.__contains__)[0]


def loose_file(repo: Path, rev: str) -> Path:
    sha = git(repo, "rev-parse", rev).strip()
    return repo / ".git" / "objects" / sha[:2] / sha[2:]


def test_an_untouched_store_and_the_agents_own_sound_objects_pass(tmp_path: Path) -> None:
    repo, watch = repository(tmp_path)
    assert check(watch) is None
    write(repo, "c.txt", "c\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "two")  # new loose objects, written by someone else
    assert check(watch) is None
    git(repo, "gc", "-q")  # a repack: loose objects gone, a new pack
    assert check(watch) is None


def test_an_object_rewritten_in_place_is_damage(tmp_path: Path) -> None:
    repo, watch = repository(tmp_path)
    obj = loose_file(repo, "HEAD:a.txt")
    obj.chmod(0o644)
    with open(obj, "r+b") as f:  # same inode, same directory entry, same size
        f.seek(2)
        f.write(b"garbage")
    assert check(watch) == f"objects/{obj.parent.name}/{obj.name} is not the object it names"


def test_a_new_object_hidden_behind_a_reset_directory_time_is_still_found(tmp_path: Path) -> None:
    repo, watch = repository(tmp_path)
    fanout = loose_file(repo, "HEAD:a.txt").parent
    before = os.stat(fanout)
    (fanout / ("0" * 38)).write_bytes(b"not an object")
    os.utime(fanout, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert check(watch) == f"objects/{fanout.name}/{'0' * 38} is not the object it names"


def test_a_deleted_object_matters_only_when_kept_history_needs_it(tmp_path: Path) -> None:
    repo, watch = repository(tmp_path)
    junk = loose_file(repo, "HEAD:b.txt")
    junk.unlink()
    assert check(watch) is None  # nothing the record holds
    kept = loose_file(repo, "HEAD:a.txt")
    kept.unlink()
    sha = bytes.fromhex(kept.parent.name + kept.name)
    assert check(watch, frozenset({sha})) == f"object {sha.hex()} of kept history was deleted"


def test_a_corrupted_pack_a_fifo_and_new_alternates_are_damage(tmp_path: Path) -> None:
    repo, watch = repository(tmp_path)
    git(repo, "gc", "-q")
    assert check(watch) is None
    pack = next((repo / ".git" / "objects" / "pack").glob("*.pack"))
    pack.chmod(0o644)
    with open(pack, "r+b") as f:
        f.seek(40)
        f.write(b"XXXX")
    assert check(watch) == f"objects/pack/{pack.name} fails its checksum"

    repo, watch = repository(tmp_path / "fifo")
    os.mkfifo(repo / ".git" / "objects" / "info" / "fifo")
    assert check(watch) == "objects/info/fifo is not a regular file"

    repo, watch = repository(tmp_path / "alternates")
    write(repo, ".git/objects/info/alternates", str(tmp_path) + "\n")
    assert check(watch) == "objects/info/alternates changed (objects would live outside the workspace)"


def test_a_first_look_verifies_only_what_changed_since_the_trusted_time(tmp_path: Path) -> None:
    repo, _ = repository(tmp_path)
    obj = loose_file(repo, "HEAD:a.txt")
    obj.chmod(0o644)
    obj.write_bytes(b"garbage")
    fresh = ObjectWatch(os.fsencode(repo / ".git" / "objects"))
    assert fresh.check(None, lambda sha: False, lambda sha: False)[0] is None  # all trusted
    fresh = ObjectWatch(os.fsencode(repo / ".git" / "objects"))
    since = os.stat(obj).st_ctime_ns
    assert fresh.check(since, lambda sha: False, lambda sha: False)[0] is not None
