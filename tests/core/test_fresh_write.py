"""write_fresh: the in-place write of a file nobody reads until it is written (a turn's prompt copy)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from crucible_core.manifest.paths import write_fresh


def test_the_file_is_written_with_its_mode_whatever_the_umask(tmp_path: Path) -> None:
    target = tmp_path / "prompt.md"
    old = os.umask(0o077)
    try:
        write_fresh(target, b"the prompt\n", mode=0o640)
    finally:
        os.umask(old)
    assert target.read_bytes() == b"the prompt\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["prompt.md"]  # no temporary name left behind


def test_a_planted_link_is_replaced_not_written_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"not yours\n")
    outside.chmod(0o644)
    target = tmp_path / "prompt.md"
    target.symlink_to(outside)
    write_fresh(target, b"the prompt\n")
    assert not target.is_symlink() and target.read_bytes() == b"the prompt\n"
    assert outside.read_bytes() == b"not yours\n"
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_a_file_left_torn_by_a_killed_run_is_started_over(tmp_path: Path) -> None:
    target = tmp_path / "prompt.md"
    target.write_bytes(b"a longer, half-written prompt from before the kill")
    write_fresh(target, b"new\n")
    assert target.read_bytes() == b"new\n"
