"""Pack index fan-out tables: read in one call (dulwich_fanout), and used to pass over packs in lookups."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest
from dulwich.object_store import DiskObjectStore

from crucible_world_git import dulwich_fanout
from crucible_world_git.loose_objects import ObjectDatabase
from tests.world_git.support import git, make_base, write


def _packed_repository(tmp_path: Path) -> tuple[Path, list[str]]:
    """A repository whose objects are all in one pack git wrote: (its path, the ids in the pack)."""
    ws = make_base(tmp_path / "ws")
    for n in range(40):
        write(ws, f"f{n}.txt", f"{n}\n")
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "many")
    git(ws, "repack", "-adq")
    (idx,) = (ws / ".git" / "objects" / "pack").glob("*.idx")
    shown = subprocess.run(["git", "show-index"], input=idx.read_bytes(), capture_output=True, check=True)
    return ws, [line.split()[1] for line in shown.stdout.decode().splitlines()]


def test_a_loaded_index_has_the_fan_out_table_git_wrote(tmp_path: Path) -> None:
    ws, ids = _packed_repository(tmp_path)
    first_bytes = [int(sha[:2], 16) for sha in ids]
    expected = [sum(1 for byte in first_bytes if byte <= b) for b in range(256)]
    db = ObjectDatabase(DiskObjectStore(str(ws / ".git" / "objects")))  # installs the reader
    (pack,) = db.store.packs
    index = pack.index
    assert index._fan_out_table == expected
    assert dulwich_fanout.original is not None  # dulwich's own reader reads the same
    assert dulwich_fanout.original(index, 8) == dulwich_fanout.read_fan_out_table(index, 8) == expected
    assert len(index) == len(first_bytes)


def test_an_index_too_short_for_its_table_fails_as_with_dulwichs_reader(tmp_path: Path) -> None:
    class Short:
        _contents = b"\377tOc" + struct.pack(">I", 2) + bytes(100)

    dulwich_fanout.install()
    assert dulwich_fanout.original is not None
    with pytest.raises(struct.error):
        dulwich_fanout.original(Short(), 8)
    with pytest.raises(struct.error):
        dulwich_fanout.read_fan_out_table(Short(), 8)


def test_a_lookup_passing_over_packs_by_their_fan_out_finds_every_packed_object_and_nothing_else(
    tmp_path: Path,
) -> None:
    ws, ids = _packed_repository(tmp_path)
    db = ObjectDatabase(DiskObjectStore(str(ws / ".git" / "objects")))
    assert all(db.has(bytes.fromhex(sha)) for sha in ids)
    assert all(db.on_disk(bytes.fromhex(sha)) for sha in ids)
    taken = {sha[:2] for sha in ids}
    # Absent ids: one sharing its first byte with a packed object (the index is searched), one
    # whose first byte no packed object has (passed over on the fan-out alone), and the ends.
    sharing = next(iter(taken)) + "0" * 38
    assert sharing not in ids
    lonely = next(f"{b:02x}" for b in range(256) if f"{b:02x}" not in taken) + "1" * 38
    for absent in (sharing, lonely, "00" * 20, "ff" * 20):
        if absent not in ids:
            assert not db.has(bytes.fromhex(absent)) and not db.on_disk(bytes.fromhex(absent))
