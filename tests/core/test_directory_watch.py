"""DirectoryWatch: a look for an agent's marker is skipped only while no entry of the directory changed since a look found nothing."""

from __future__ import annotations

import os
import time
from pathlib import Path

from crucible_core.agent_files import COARSE_RACY_NS, RACY_NS, DirectoryWatch, Stamp, _outside_racy_window


def settled(directory: Path) -> DirectoryWatch:
    """A watch whose last look found nothing, on a directory last changed outside the racy window."""
    time.sleep(RACY_NS / 1e9 + 0.02)
    watch = DirectoryWatch(directory)
    stamp = watch.stamp()
    assert not watch.unchanged(stamp)  # never looked: look
    watch.found_nothing(stamp)
    assert watch.unchanged(watch.stamp())
    return watch


def test_any_entry_added_removed_or_renamed_is_seen(tmp_path: Path) -> None:
    (tmp_path / "old.txt").write_text("x")
    changes = [
        lambda: (tmp_path / "ESCALATION.json").write_text("{}"),  # created
        lambda: (tmp_path / "ESCALATION.json").unlink(),  # removed
        lambda: os.replace(tmp_path / "old.txt", tmp_path / "PROVISIONING_PENDING.json"),  # renamed in
        lambda: os.mkdir(tmp_path / "sub"),  # a directory is an entry too
        lambda: os.symlink("/etc/passwd", tmp_path / "link"),
    ]
    for change in changes:
        watch = settled(tmp_path)
        change()
        assert not watch.unchanged(watch.stamp())


def test_writing_inside_an_existing_file_leaves_the_directory_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "value.txt").write_text("1\n")
    watch = settled(tmp_path)
    (tmp_path / "value.txt").write_text("2\n")  # what an agent's edit in place does
    assert watch.unchanged(watch.stamp())  # a look for absent names stays skipped: none appeared


def test_a_directory_put_in_its_place_is_looked_in(tmp_path: Path) -> None:
    directory = tmp_path / "workspace"
    directory.mkdir()
    watch = settled(directory)
    directory.rename(tmp_path / "aside")
    directory.mkdir()
    assert not watch.unchanged(watch.stamp())
    os.rmdir(directory)
    assert watch.stamp() is None and not watch.unchanged(None)  # gone: look (and find nothing)


def test_a_directory_changed_within_the_racy_window_is_looked_in_every_time(tmp_path: Path) -> None:
    watch = DirectoryWatch(tmp_path)
    (tmp_path / "fresh").write_text("")  # the directory changed just now
    stamp = watch.stamp()
    watch.found_nothing(stamp)
    assert not watch.unchanged(watch.stamp())


def test_the_racy_window_follows_the_file_systems_timestamps() -> None:
    now = 1_800_000_000_123_456_789
    fine = now - RACY_NS - 1_234  # nanosecond timestamps
    assert _outside_racy_window(Stamp((1, 2, fine, fine), now))
    assert not _outside_racy_window(Stamp((1, 2, now - 1_000, now - 1_000), now))
    whole_ms = (now - RACY_NS - 5_000_000) // 1_000_000 * 1_000_000  # whole milliseconds (or seconds)
    assert not _outside_racy_window(Stamp((1, 2, whole_ms, whole_ms), now))
    old = (now - COARSE_RACY_NS - 1) // 1_000_000_000 * 1_000_000_000
    assert _outside_racy_window(Stamp((1, 2, old, old), now))
    ahead = now + 1_000_000_007  # a ctime ahead of the clock
    assert not _outside_racy_window(Stamp((1, 2, ahead, ahead), now))
