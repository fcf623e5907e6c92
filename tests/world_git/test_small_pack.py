"""The kept record's small packs (small_pack.py): what a kill at any instant leaves behind."""

from __future__ import annotations

import hashlib
import os
import time
import zlib
from pathlib import Path

import pytest

from crucible_world_git import small_pack


def _blob(text: bytes) -> tuple[bytes, bytes, bytes]:
    return hashlib.sha1(b"blob %d\0" % len(text) + text).digest(), b"blob", text


def _pack_checksum_in_index(base: bytes) -> bytes:
    with open(base + b".idx", "rb") as f:
        return f.read()[-40:-20]


def _pack_trailer(base: bytes) -> bytes:
    with open(base + b".pack", "rb") as f:
        return f.read()[-20:]


def _read_all(base: bytes) -> dict[bytes, bytes]:
    """Every object of the pack through its index: raw id -> body (whole objects only)."""
    with open(base + b".pack", "rb") as f:
        pack = f.read()
    found = {}
    for sha, start, end, _ in small_pack._entries(base):
        entry = pack[start:end]
        i = 0
        while entry[i] & 0x80:
            i += 1
        found[sha] = zlib.decompress(entry[i + 1 :])
    return found


def test_a_merge_whose_objects_a_whole_pack_already_holds_leaves_that_pack_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kill between a merge's new pack and the removal of the packs it merged leaves the merged
    pack beside them; a later merge of the same objects (in another order: the pack list's order
    is not kept from one process to the next) names the same pack. Writing it over again, .pack
    first and .idx last, left the old index with a new pack between the two renames: a kill there
    and the record's pack is unreadable (its index's checksum names another pack)."""
    pack_dir = os.fsencode(tmp_path)
    one = small_pack.write_pack(pack_dir, 2, iter([_blob(b"a\n"), _blob(b"b\n")]))
    two = small_pack.write_pack(pack_dir, 2, iter([_blob(b"c\n"), _blob(b"d\n")]))
    merged = small_pack.merge_packs(pack_dir, [one, two])
    held = _read_all(merged)
    ident = os.stat(merged + b".pack").st_ino

    real_replace = os.replace

    def killed_at_the_index(src: bytes, dst: bytes) -> None:
        if dst.endswith(b".idx"):
            raise KeyboardInterrupt  # the kill: nothing after this rename's predecessor runs
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", killed_at_the_index)
    try:
        again = small_pack.merge_packs(pack_dir, [two, one, merged])
    except KeyboardInterrupt:
        again = None
    monkeypatch.setattr(os, "replace", real_replace)
    assert again == merged  # the same objects name the same pack, which was whole already
    assert _pack_checksum_in_index(merged) == _pack_trailer(merged)
    assert os.stat(merged + b".pack").st_ino == ident
    assert _read_all(merged) == held
    assert small_pack.merge_packs(pack_dir, [two, one, merged]) == merged
    assert _read_all(merged) == held


def test_a_pack_left_without_its_index_by_a_kill_is_written_whole_again(tmp_path: Path) -> None:
    pack_dir = os.fsencode(tmp_path)
    objects = [_blob(b"x\n"), _blob(b"y\n")]
    base = small_pack.write_pack(pack_dir, 2, iter(objects))
    os.unlink(base + b".idx")
    with open(base + b".pack", "r+b") as f:  # a torn pack: only its start was written
        f.truncate(12)
    assert small_pack.write_pack(pack_dir, 2, iter(objects)) == base
    assert _pack_checksum_in_index(base) == _pack_trailer(base)
    assert _read_all(base) == {sha: body for sha, _, body in objects}
    assert not list(tmp_path.glob("tmp_pack_*"))


def test_after_a_kill_between_a_merge_and_its_removals_the_resumed_record_reads_every_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kill leaves the merged pack beside the packs it merged; the resumed process's next
    keep merges the same objects again (the merged pack among them). Written over, in another
    order, the pack no longer matched the index the process had already read: objects of kept
    history came back as other objects."""
    from dulwich.object_store import DiskObjectStore

    from crucible_world_git.loose_objects import SMALL_PACKS, ObjectDatabase

    (tmp_path / "pack").mkdir()
    bodies = [b"%d\n" % n for n in range(SMALL_PACKS + 1 + 50)]
    db = ObjectDatabase(DiskObjectStore(str(tmp_path)))
    db.hold()
    real_merge = small_pack.merge_packs

    def killed_after_the_merge(pack_dir: bytes, bases: list[bytes], *, durable: bool = True) -> bytes:
        real_merge(pack_dir, bases, durable=durable)
        raise KeyboardInterrupt  # the kill: the merged packs are not removed

    monkeypatch.setattr(small_pack, "merge_packs", killed_after_the_merge)
    with pytest.raises(KeyboardInterrupt):
        for body in bodies[: SMALL_PACKS + 1]:  # one keep each: the last one merges
            db.write(b"blob", body)
            db.flush_held()
    monkeypatch.setattr(small_pack, "merge_packs", real_merge)

    resumed = ObjectDatabase(DiskObjectStore(str(tmp_path)))
    resumed.hold()
    for body in bodies[SMALL_PACKS + 1 :]:  # one bigger keep: it merges again
        resumed.write(b"blob", body)
    resumed.flush_held()
    for body in bodies:
        assert resumed.read(_blob(body)[0]) == (b"blob", body)
    for idx in (tmp_path / "pack").glob("*.idx"):
        base = os.fsencode(idx.with_suffix(""))
        assert _pack_checksum_in_index(base) == _pack_trailer(base)


def _held_store(root: Path) -> object:
    from dulwich.object_store import DiskObjectStore

    from crucible_world_git.loose_objects import ObjectDatabase

    (root / "pack").mkdir(exist_ok=True)
    db = ObjectDatabase(DiskObjectStore(str(root)))
    db.hold()
    return db


def _damage_first_pack(root: Path, how: str) -> Path:
    first = sorted((root / "pack").glob("pack-crucible-*.pack"), key=os.path.getmtime)[0]
    data = bytearray(first.read_bytes())
    if how == "flip":
        data[20] ^= 0xFF  # inside the first entry's compressed data
    else:
        data = data[:12]  # torn: only its header reached the disk
    os.chmod(first, 0o644)
    first.write_bytes(bytes(data))
    return first


@pytest.mark.parametrize("how", ["flip", "torn"])
def test_a_damaged_small_pack_is_neither_merged_nor_in_the_way_of_the_next_keeps(
    tmp_path: Path, how: str
) -> None:
    """Merging only spares lookups. A pack whose entry no longer matches its index's checksum
    (a flipped bit) was copied into the merged pack under a fresh checksum, so the damage no
    longer showed, and its own files removed; a torn one made every later keep fail. Now the
    merge is left for another time, the damaged pack stays as it is, and the keeps go on."""
    from crucible_world_git.loose_objects import SMALL_PACKS, ObjectDatabase

    db = _held_store(tmp_path)
    assert isinstance(db, ObjectDatabase)
    bodies = [b"object %d\n" % n for n in range(SMALL_PACKS * 2)]
    db.write(b"blob", bodies[0])
    db.flush_held()
    damaged = _damage_first_pack(tmp_path, how)
    held = damaged.read_bytes()
    for body in bodies[1:]:
        db.write(b"blob", body)
        db.flush_held()  # a keep: more than SMALL_PACKS packs from the ninth on
    assert damaged.read_bytes() == held
    merged = [pack for pack in (tmp_path / "pack").glob("pack-crucible-*.pack") if pack != damaged]
    assert len(merged) < len(bodies) - 1  # the others were merged all the same
    for body in bodies[1:]:
        assert db.read(_blob(body)[0]) == (b"blob", body)
    for pack in merged:
        base = os.fsencode(pack.with_suffix(""))
        assert _blob(bodies[0])[0] not in {entry[0] for entry in small_pack._entries(base)}


def test_a_merged_pack_is_on_disk_for_sure_before_the_packs_it_merged_are_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The packs a merge removes hold kept history written long before: a machine crash after
    their removal must not find the merged pack's names without its bytes (no fsync, and a
    file system may commit the names first). The merged pack, its index and the directory are
    fsynced before the first removal; a keep's own small pack is not (as before)."""
    from crucible_world_git.loose_objects import SETTLED_NS, SMALL_PACKS, ObjectDatabase

    db = _held_store(tmp_path)
    assert isinstance(db, ObjectDatabase)
    events: list[str] = []
    real_fsync, real_unlink = os.fsync, os.unlink

    def fsync(fd: int) -> None:
        events.append("fsync " + os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def unlink(path: bytes | str, **kwargs: object) -> None:
        events.append("unlink " + os.path.basename(os.fsdecode(path)))
        real_unlink(path)

    for n in range(SMALL_PACKS):
        db.write(b"blob", b"%d\n" % n)
        db.flush_held()
    settled = time.time() - SETTLED_NS / 1e9 - 60
    for pack in (tmp_path / "pack").glob("*.pack"):
        os.utime(pack, (settled, settled))  # written a minute ago: on disk for good by now
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "unlink", unlink)
    db.write(b"blob", b"the ninth\n")
    db.flush_held()
    removed = [i for i, event in enumerate(events) if event.startswith("unlink pack-crucible-")]
    assert removed, events
    synced = [event.removeprefix("fsync ") for event in events[: removed[0]] if event.startswith("fsync")]
    assert synced[-1] == "pack", events  # the directory, after both renames
    assert len([name for name in synced if name.startswith("tmp_pack_")]) == 2, events  # .pack and .idx
    assert len(synced) == 3, events  # nothing else: a keep's own pack is not fsynced


def test_a_merge_of_packs_written_moments_ago_only_is_not_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Packs younger than SETTLED_NS are no more durable than the pack merged from them: a
    quick run's merges cost no fsync."""
    from crucible_world_git.loose_objects import SMALL_PACKS, ObjectDatabase

    db = _held_store(tmp_path)
    assert isinstance(db, ObjectDatabase)
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", synced.append)
    for n in range(SMALL_PACKS + 1):
        db.write(b"blob", b"%d\n" % n)
        db.flush_held()
    assert len(list((tmp_path / "pack").glob("*.idx"))) == 1  # merged
    assert synced == []


@pytest.mark.parametrize("keep", [0, 8 + 256 * 4 + 10, 8 + 256 * 4 + 40 + 28 + 10])
def test_a_torn_index_is_named_a_damaged_pack_by_the_merge(tmp_path: Path, keep: int) -> None:
    """What consolidate() leaves out (DamagedPack), not an error of any other kind (which
    failed the keep that merged)."""
    pack_dir = os.fsencode(tmp_path)
    one = small_pack.write_pack(pack_dir, 2, iter([_blob(b"a\n"), _blob(b"b\n")]))
    two = small_pack.write_pack(pack_dir, 1, iter([_blob(b"c\n")]))
    index = Path(os.fsdecode(one + b".idx"))
    data = index.read_bytes()
    os.chmod(index, 0o644)
    index.write_bytes(data[:keep])
    with pytest.raises(small_pack.DamagedPack) as raised:
        small_pack.merge_packs(pack_dir, [two, one])
    assert raised.value.base == one
    assert not list(tmp_path.glob("tmp_pack_*"))


def test_a_deltified_pack_under_this_modules_name_is_never_merged(tmp_path: Path) -> None:
    """The workspace's packs are the agent's to write: one named like ours but holding deltas
    (git's own repack, renamed) would be copied into a pack where its deltas name nothing."""
    import subprocess

    from tests.world_git.support import GIT_ENV, git, make_base

    ws = make_base(tmp_path / "ws")
    text = "".join(f"line {n}\n" for n in range(400))
    (ws / "big.txt").write_text(text)
    git(ws, "add", "big.txt")
    git(ws, "commit", "-qm", "one")
    (ws / "big.txt").write_text(text + "one more line\n")
    git(ws, "commit", "-qam", "two")
    git(ws, "repack", "-adq")
    pack_dir = ws / ".git" / "objects" / "pack"
    (idx,) = pack_dir.glob("pack-*.idx")
    verified = subprocess.run(
        ["git", "verify-pack", "-v", str(idx)],
        cwd=ws,
        env=GIT_ENV,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "chain length = 1" in verified  # git stored one of the blobs as a delta
    planted = bytes(pack_dir / "pack-crucible-planted")
    for suffix in (".idx", ".pack"):
        os.rename(idx.with_suffix(suffix), os.fsdecode(planted) + suffix)
    ours = small_pack.write_pack(bytes(pack_dir), 1, [_blob(b"ours\n")])
    with pytest.raises(small_pack.DamagedPack, match="is a delta") as raised:
        small_pack.merge_packs(bytes(pack_dir), [planted, ours], durable=False)
    assert raised.value.base == planted
    assert sorted(p.name for p in pack_dir.iterdir()) == sorted(
        [os.path.basename(os.fsdecode(b)) + s for b in (planted, ours) for s in (".idx", ".pack")]
    )


def test_a_pack_another_writer_merged_away_is_looked_up_in_the_merged_pack(tmp_path: Path) -> None:
    """Two stores over one object directory (a second world over the same kept record): one
    merges the small packs the other listed before loading their indexes; the other's lookups
    list the packs again and find the objects in the merged pack instead of failing."""
    from dulwich.object_store import DiskObjectStore

    from crucible_world_git.loose_objects import SMALL_PACKS, ObjectDatabase

    objects = tmp_path / "objects"
    (objects / "pack").mkdir(parents=True)
    blobs = [_blob(b"object %d\n" % n) for n in range(SMALL_PACKS + 2)]
    for blob in blobs:
        small_pack.write_pack(os.fsencode(objects / "pack"), 1, [blob])
    reader = ObjectDatabase(DiskObjectStore(str(objects)))
    merger = ObjectDatabase(DiskObjectStore(str(objects)))
    reader.refresh()  # lists every pack, loads no index yet
    merger.refresh()
    merger.consolidate()
    assert len(list((objects / "pack").glob("*.idx"))) < len(blobs)  # some packs were merged away
    assert all(reader.has(sha) for sha, _, _ in blobs)
    assert all(reader.on_disk(sha, refresh=False) for sha, _, _ in blobs)
    assert not reader.has(_blob(b"never written\n")[0])


def _two_packs(pack_dir: Path) -> list[bytes]:
    return [small_pack.write_pack(os.fsencode(pack_dir), 1, [_blob(b"pack %d\n" % n)]) for n in range(2)]


def test_a_fifo_planted_as_a_packs_index_or_pack_is_damage_not_a_wait(tmp_path: Path) -> None:
    """The workspace's small packs are the agent's to write: a FIFO in place of an index or a
    pack is named damage at once, where an open would have waited for a writer for ever."""
    import signal

    def stuck(_signum: int, _frame: object) -> None:
        raise TimeoutError("the merge waited on a FIFO")

    previous = signal.signal(signal.SIGALRM, stuck)
    try:
        for suffix in (b".idx", b".pack"):
            pack_dir = tmp_path / suffix.decode()[1:]
            pack_dir.mkdir()
            bases = _two_packs(pack_dir)
            os.unlink(bases[0] + suffix)
            os.mkfifo(bases[0] + suffix)
            signal.setitimer(signal.ITIMER_REAL, 5.0)
            with pytest.raises(small_pack.DamagedPack):
                small_pack.merge_packs(os.fsencode(pack_dir), bases)
            signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_an_index_larger_than_its_objects_allow_is_damage_and_not_read(tmp_path: Path) -> None:
    """An index is a fixed size per object it counts: a bigger file (an agent's planted one,
    sparse gigabytes behind a valid head) is refused before it is read into memory."""
    bases = _two_packs(tmp_path)
    with open(bases[0] + b".idx", "r+b") as f:
        f.truncate(1 << 30)
    with pytest.raises(small_pack.DamagedPack, match="larger than the objects it counts"):
        small_pack.merge_packs(os.fsencode(tmp_path), bases)


def test_an_entry_larger_than_any_written_here_is_damage_and_not_read(tmp_path: Path) -> None:
    """A pack's one entry runs to its end: grown (sparse) past MAX_ENTRY_BYTES, that entry is
    refused before it is read into memory."""
    bases = _two_packs(tmp_path)
    with open(bases[0] + b".pack", "r+b") as f:
        f.truncate(small_pack.MAX_ENTRY_BYTES + 1024)
    with pytest.raises(small_pack.DamagedPack, match="larger than any entry written here"):
        small_pack.merge_packs(os.fsencode(tmp_path), bases)
