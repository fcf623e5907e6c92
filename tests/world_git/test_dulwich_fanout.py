"""dulwich_fanout: the fan-out table read in one call is the one git wrote and dulwich read."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest
from dulwich.object_store import DiskObjectStore

from crucible_world_git import dulwich_fanout
from crucible_world_git.loose_objects import ObjectDatabase
from tests.world_git.support import git, make_base, write


def test_a_loaded_index_has_the_fan_out_table_git_wrote(tmp_path: Path) -> None:
    ws = make_base(tmp_path / "ws")
    for n in range(40):
        write(ws, f"f{n}.txt", f"{n}\n")
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "many")
    git(ws, "repack", "-adq")
    (idx,) = (ws / ".git" / "objects" / "pack").glob("*.idx")
    shown = subprocess.run(["git", "show-index"], input=idx.read_bytes(), capture_output=True, check=True)
    first_bytes = [int(line.split()[1][:2], 16) for line in shown.stdout.decode().splitlines()]
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
