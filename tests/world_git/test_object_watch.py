"""The object-store watch against a real repository: what it accepts, what it calls damage."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from crucible_world_git import object_watch
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


# ------------------------------------------------------------------------------ the racy window


def test_the_probed_window_on_this_machine_is_far_below_a_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This machine's ext4 hands out a fresh ctime on every change someone looked at before.
    window = object_watch.probe_window(os.fsencode(tmp_path))
    assert object_watch.MIN_WINDOW_NS <= window <= 100_000_000
    assert os.listdir(tmp_path) == []  # the probe file is gone
    # A watch takes the window probed for its store's file system. Probed again here, under a
    # loaded machine's scheduling, it could come out another few milliseconds: the watch is
    # handed this probe's answer, with no window kept from an earlier test.
    monkeypatch.setattr(object_watch, "_windows", {})
    monkeypatch.setattr(object_watch, "probe_window", lambda directory, sample=None: window + 1)
    _, watch = repository(tmp_path / "repo")
    assert watch.window_ns == window + 1


def test_an_object_rewritten_in_place_right_after_a_check_is_caught_at_the_next(tmp_path: Path) -> None:
    repo, watch = repository(tmp_path)
    obj = loose_file(repo, "HEAD:a.txt")
    assert check(watch) is None
    before = os.stat(obj)
    obj.chmod(0o644)
    with open(obj, "r+b") as f:  # at once: same inode, same size, other bytes
        f.seek(2)
        f.write(b"garbage")
    after = os.stat(obj)
    assert (after.st_ino, after.st_size) == (before.st_ino, before.st_size)
    assert check(watch) == f"objects/{obj.parent.name}/{obj.name} is not the object it names"


def test_a_probe_that_sees_no_change_keeps_a_one_second_window(tmp_path: Path) -> None:
    def frozen(fd: int) -> list[object_watch.Sample]:
        ctime = os.fstat(fd).st_ctime_ns
        return [(ctime, ctime, ctime + 1_000)] * 50

    assert object_watch.probe_window(os.fsencode(tmp_path), frozen) == object_watch.FALLBACK_WINDOW_NS
    now = time.time_ns()
    steps = [(now + i * 10_000, now + i * 10_000 + 500, now + i * 10_000 + 900) for i in range(1, 5)]
    assert object_watch.window_from(now, steps) == object_watch.MIN_WINDOW_NS
    # A clock running ahead of ours (a network file system's server), or backwards: a second.
    ahead = [(b, c + 5_000_000, a) for b, c, a in steps]
    assert object_watch.window_from(now, ahead) == object_watch.FALLBACK_WINDOW_NS
    assert object_watch.window_from(now, steps[::-1]) == object_watch.FALLBACK_WINDOW_NS
    # A jiffy clock: 4 ms steps and ctimes lagging by up to a step give four steps' worth.
    jiffy = [
        (now + i * 4_000_000 + 3_000_000, now + i * 4_000_000, now + i * 4_000_000 + 3_100_000)
        for i in range(1, 5)
    ]
    assert object_watch.window_from(now, jiffy) == max(object_watch.MIN_WINDOW_NS, 4 * 4_000_000)


def test_on_a_clock_of_whole_seconds_a_rewrite_within_the_same_tick_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Emulate a file system whose timestamps move once a second (lstat and fstat alike): a
    # rewrite in the same second leaves the signature as it was. The probe must see that and
    # keep the one-second window, under which the object is read again at the next check.
    real_lstat, real_fstat = os.lstat, os.fstat

    def coarse(st: os.stat_result) -> os.stat_result:
        tick = st.st_ctime_ns - st.st_ctime_ns % 1_000_000_000
        extra = {
            name: getattr(st, name) for name in ("st_atime_ns", "st_mtime_ns", "st_blksize", "st_blocks")
        }
        return os.stat_result(tuple(st), {**extra, "st_ctime_ns": tick})

    monkeypatch.setattr(os, "lstat", lambda path, **kw: coarse(real_lstat(path, **kw)))
    monkeypatch.setattr(os, "fstat", lambda fd: coarse(real_fstat(fd)))
    monkeypatch.setattr(object_watch, "_windows", {})  # probe afresh, and forget it after
    repo, watch = repository(tmp_path)
    assert watch.window_ns == object_watch.FALLBACK_WINDOW_NS
    obj = loose_file(repo, "HEAD:a.txt")
    obj.chmod(0o444)
    for _ in range(3):  # a fresh tick, so that what follows lands within one second
        if time.time_ns() % 1_000_000_000 < 500_000_000:
            break
        time.sleep(0.5)
    obj.chmod(0o444 | 0o200)
    obj.chmod(0o444)
    assert check(watch) is None
    signature = os.lstat(obj)
    obj.chmod(0o644)
    with open(obj, "r+b") as f:
        f.seek(2)
        f.write(b"garbage")
    obj.chmod(0o444)
    if os.lstat(obj).st_ctime_ns != signature.st_ctime_ns:
        pytest.skip("the second turned over mid-test; the rewrite changed the signature")
    assert check(watch) == f"objects/{obj.parent.name}/{obj.name} is not the object it names"


def test_a_pack_the_engine_wrote_itself_does_not_excuse_a_deleted_pack(tmp_path: Path) -> None:
    # The engine's own new pack is verified again while its time is within the racy window; that
    # re-read must not count as someone's repack, which would let a pack of kept history vanish.
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "gc.auto", "0")
    write(repo, "a.txt", "a\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    git(repo, "gc", "-q")
    packs = repo / ".git" / "objects" / "pack"
    (kept,) = packs.glob("*.pack")
    watch = ObjectWatch(os.fsencode(repo / ".git" / "objects"), window_ns=60_000_000_000)
    watch.baseline()
    assert check(watch) is None
    for suffix in (".pack", ".idx"):  # the engine writes a pack of its own and says so
        own = packs / f"pack-{'e' * 40}{suffix}"
        own.write_bytes(kept.with_suffix(suffix).read_bytes())
        watch.wrote(os.fsencode(f"pack/{own.name}"))
    kept.unlink()  # the agent deletes the pack kept history is in
    kept.with_suffix(".idx").unlink()
    assert check(watch) in {f"objects/pack/{name} was deleted" for name in (kept.name, f"{kept.stem}.idx")}
