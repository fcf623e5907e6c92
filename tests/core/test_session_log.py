"""The session log on disk: a private state directory, a private file, and a `seq` on every line."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from crucible_core.contract import wire
from crucible_core.session_log import SessionLog, read_events
from tests.cli_support import run_crucible


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def seqs(path: Path) -> list[object]:
    return [json.loads(line).get("seq") for line in path.read_text().splitlines() if line.strip()]


def test_a_run_keeps_its_state_private_and_numbers_every_line(example) -> None:
    manifest = example("counter")
    assert run_crucible("run", "-m", manifest, "--iterations", "1").returncode == 0
    state = manifest.parent / "state"
    assert mode(state) == 0o700 and mode(state / "session.jsonl") == 0o600
    assert mode(state / "private") == 0o700 and mode(state / "distress") == 0o700
    first = seqs(state / "session.jsonl")
    assert first == list(range(1, len(first) + 1))
    assert run_crucible("run", "-m", manifest, "--resume", "--iterations", "2").returncode == 0
    assert seqs(state / "session.jsonl") == list(range(1, len(seqs(state / "session.jsonl")) + 1))
    assert len(seqs(state / "session.jsonl")) > len(first)  # the resume continued the numbering


@pytest.mark.leaves_open_log("it writes single events through the log, as an older writer left it")
def test_a_log_an_older_writer_left_is_made_private_and_numbered_on(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    path = state / "session.jsonl"
    older = [wire.encode(wire.Note(msg="a")), wire.encode(wire.Note(msg="b")), '{"v":1,"kind":"no']  # torn
    path.write_text("\n".join(older))
    path.chmod(0o644)
    log = SessionLog(path)
    try:
        written = log.emit(wire.Note(msg="c"))
    finally:
        log.close()
    assert mode(state) == 0o700 and mode(path) == 0o600
    assert written["seq"] == 4 and list(written)[:3] == ["v", "seq", "ts"]  # the 4th line of the log
    log = SessionLog(path)
    try:
        assert log.emit(wire.Note(msg="d"))["seq"] == 5  # continued from the last seq written
    finally:
        log.close()
    assert wire.decode(path.read_text().splitlines()[-1]) == wire.Note(msg="d")  # readers ignore seq


@pytest.mark.leaves_open_log("it writes notes to a bare log; no session closes it")
@pytest.mark.parametrize("lines", [3, 900])  # within one batch of the twin, and over several
def test_a_deleted_or_cut_log_is_put_back_whole_with_its_last_lines(tmp_path: Path, lines: int) -> None:
    # The twin is written in batches: whatever it has not yet received must still come back.
    log = SessionLog(tmp_path / "state" / "session.jsonl")
    for i in range(lines):
        log.emit(wire.Note(msg=f"line {i} " + "x" * 100, level="info"))
    written = log.path.read_bytes()
    assert written.count(b"\n") == lines
    log.path.unlink()
    assert log.restore_if_damaged() == "deleted"
    assert log.path.read_bytes() == written
    log.emit(wire.Note(msg="after the restore", level="info"))
    log.path.write_bytes(written[: len(written) // 2])
    assert log.restore_if_damaged() == "truncated"
    assert log.path.read_bytes().startswith(written) and b"after the restore" in log.path.read_bytes()
    log.path.unlink()
    log.close()  # the run's end puts it back too
    assert seqs(log.path) == list(range(1, lines + 2))


@pytest.mark.leaves_open_log("it writes notes to a bare log; no session closes it")
def test_the_damage_check_looks_at_the_path_only_and_still_sees_a_replaced_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = SessionLog(tmp_path / "state" / "session.jsonl")
    log.emit(wire.Note(msg="one"))
    looked: list[int] = []
    real_fstat = os.fstat
    monkeypatch.setattr(os, "fstat", lambda fd: looked.append(fd) or real_fstat(fd))
    assert log.damage() is None
    assert looked == []  # the log's own file is known from when it was opened: one stat per check
    monkeypatch.undo()
    log.path.rename(log.path.with_name("aside.jsonl"))
    log.path.write_bytes(log.path.with_name("aside.jsonl").read_bytes())  # same bytes, another file
    assert log.restore_if_damaged() == "replaced"
    log.emit(wire.Note(msg="two"))
    assert log.damage() is None  # the file put back is the one now written to
    assert [e["msg"] for e in read_events(log.path) if e["kind"] == "note"] == ["one", "two"]
    log.close()


@pytest.mark.leaves_open_log("it writes two notes and no session")
def test_a_written_line_is_decoded_once_for_every_observer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The engine, the console and RESULTS.md each decode a row the log wrote: one decoding serves
    # them all, and it is the decoding of the line as written (redacted), equal to a fresh one.
    decoded: list[object] = []
    real = wire.from_object

    def counted(obj: object) -> wire.Line | None:
        decoded.append(obj)
        return real(obj)

    monkeypatch.setattr(wire, "from_object", counted)
    log = SessionLog(tmp_path / "session.jsonl")
    log.redactor.add(["hunter2-secret-value"])
    seen: list[wire.Line | None] = []
    log.observers.append(lambda obj: seen.append(wire.from_written(obj)))
    log.observers.append(lambda obj: seen.append(wire.from_written(obj)))
    try:
        written = log.emit(wire.Note(msg="the key is hunter2-secret-value", level="info"))
        again = wire.from_written(written)
        other = log.emit(wire.Note(msg="second", level="info"))
    finally:
        log.close()
    assert len(decoded) == 2 and decoded[0] is written and decoded[1] is other
    assert seen[0] is seen[1] is again
    assert again == real(json.loads(json.dumps(written)))
    assert isinstance(again.event, wire.Note) and "hunter2" not in again.event.msg
    assert wire.from_written(other) is seen[2] and seen[2] is not None
    assert isinstance(seen[2].event, wire.Note) and seen[2].event.msg == "second"
