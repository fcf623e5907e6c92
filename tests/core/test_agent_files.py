"""Reading agent-written files: regular files only, never through a link, bounded; JSON with valid text."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from crucible_core.agent_files import AgentFileRefused, load_json, read_regular
from crucible_core.contract.json_bounds import JsonRefused


def test_a_regular_file_is_read(tmp_path: Path) -> None:
    (tmp_path / "m.json").write_bytes(b'{"a": 1}')
    assert read_regular(tmp_path / "m.json", 100) == b'{"a": 1}'
    assert load_json(tmp_path / "m.json", max_bytes=100, max_depth=4) == {"a": 1}


def test_a_missing_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "absent", 100)


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "ESCALATION.json"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def attempt() -> None:
        try:
            read_regular(fifo, 100)
        except BaseException as exc:  # recorded for the assertion below
            outcome.append(exc)

    reader = threading.Thread(target=attempt, daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert isinstance(outcome[0], AgentFileRefused)


def test_a_fifo_with_a_writer_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a writer holding it open
    try:
        with pytest.raises(AgentFileRefused, match="not a regular file"):
            read_regular(fifo, 100)
    finally:
        os.close(writer)


def test_links_and_directories_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "secret"
    outside.write_text("x")
    (tmp_path / "link").symlink_to(outside)
    (tmp_path / "dir").mkdir()
    with pytest.raises(AgentFileRefused, match="symbolic link"):
        read_regular(tmp_path / "link", 100)
    with pytest.raises(AgentFileRefused, match="not a regular file"):
        read_regular(tmp_path / "dir", 100)


def test_a_long_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 101)
    with pytest.raises(AgentFileRefused, match="at most 100"):
        read_regular(tmp_path / "big", 100)
    assert read_regular(tmp_path / "big", 101) == b"x" * 101


def test_deep_or_surrogate_json_is_refused(tmp_path: Path) -> None:
    (tmp_path / "deep").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(JsonRefused, match="deeper"):
        load_json(tmp_path / "deep", max_bytes=1 << 20, max_depth=32)
    (tmp_path / "lone").write_text('{"reason": "\\ud800"}')
    with pytest.raises(JsonRefused, match="surrogate"):
        load_json(tmp_path / "lone", max_bytes=100, max_depth=4)
    (tmp_path / "key").write_text('{"\\udfff": 1}')
    with pytest.raises(JsonRefused, match="surrogate"):
        load_json(tmp_path / "key", max_bytes=100, max_depth=4)
    (tmp_path / "pair").write_text('{"emoji": "\\ud83d\\ude00"}')
    assert load_json(tmp_path / "pair", max_bytes=100, max_depth=4) == {"emoji": "\U0001f600"}
