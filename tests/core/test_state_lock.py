"""The state directory's lock names its holder, even when refused in the instant the holder has
taken the lock but not yet written its pid."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import pytest

from crucible_core.errors import ExitCode
from crucible_core.run.state_lock import LOCK_NAME, StateLock, StateLocked


def test_a_second_engine_is_refused_naming_the_holder(tmp_path: Path) -> None:
    held = StateLock.acquire(tmp_path)
    try:
        with pytest.raises(StateLocked) as refused:
            StateLock.acquire(tmp_path)
        assert f"pid {os.getpid()}" in refused.value.message
        assert refused.value.exit_code is ExitCode.WORKSPACE
    finally:
        held.release()
    StateLock.acquire(tmp_path).release()  # released: the next engine gets in


def test_a_holder_that_has_not_written_its_pid_yet_is_still_named(tmp_path: Path) -> None:
    # Another engine in the instant between its flock and its pid write: the file is empty.
    fd = os.open(tmp_path / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    writer = threading.Timer(0.1, lambda: os.write(fd, b"4242\n"))
    writer.start()
    try:
        with pytest.raises(StateLocked) as refused:
            StateLock.acquire(tmp_path)
        assert "pid 4242 holds" in refused.value.message
    finally:
        writer.join()
        os.close(fd)


def test_the_held_check_looks_at_the_path_only_and_still_sees_a_replaced_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = StateLock.acquire(tmp_path)
    looked: list[int] = []
    real_fstat = os.fstat
    monkeypatch.setattr(os, "fstat", lambda fd: looked.append(fd) or real_fstat(fd))
    assert lock.held_in_place() and lock.reassert() is False
    assert looked == []  # the held file is known from when it was taken: one stat per check
    monkeypatch.undo()
    (tmp_path / LOCK_NAME).unlink()
    (tmp_path / LOCK_NAME).write_text("planted\n")
    assert not lock.held_in_place()
    assert lock.reassert() is True and lock.held_in_place()
    lock.release()
