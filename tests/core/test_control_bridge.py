"""The control bridge over a real loopback socket: tokens, idempotent ids, fail-closed recording."""

from __future__ import annotations

import json
import os
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crucible_core.control.bridge import ControlBridge
from crucible_core.control.client import send
from crucible_core.control.inbox import Inbox
from crucible_core.control.ledger import Ledger
from crucible_core.errors import ControlError
from crucible_core.session_log import read_events


@pytest.fixture
def bridge(tmp_path: Path) -> Iterator[ControlBridge]:
    state = tmp_path / "state"
    state.mkdir()
    b = ControlBridge(Ledger(state / "admissions.jsonl"), Inbox())
    b.start(state / "control.json")
    yield b
    b.close()


def raw(state: Path, request: dict) -> dict:
    record = json.loads((state / "control.json").read_text())
    with socket.create_connection((record["host"], record["port"]), timeout=5) as conn:
        conn.sendall((json.dumps(request) + "\n").encode())
        return json.loads(conn.makefile("rb").readline())


def admissions(state: Path) -> list[dict]:
    return list(read_events(state / "admissions.jsonl"))


def test_control_file_is_private_and_loopback_only(bridge: ControlBridge, tmp_path: Path) -> None:
    state = tmp_path / "state"
    record = json.loads((state / "control.json").read_text())
    assert record["host"] == "127.0.0.1"
    assert stat.S_IMODE(os.stat(state / "control.json").st_mode) == 0o600
    assert send(state, {"cmd": "status"})["status"]["phase"] == "starting"
    bridge.close()
    assert not (state / "control.json").exists()


def test_missing_or_wrong_token_is_refused_and_nothing_is_recorded(
    bridge: ControlBridge, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    for request in ({"cmd": "stop"}, {"cmd": "stop", "token": "guess"}, {"cmd": "status", "token": ""}):
        reply = raw(state, request)
        assert not reply["ok"] and "token" in reply["error"]
    assert admissions(state) == []
    assert bridge.inbox.take() == []


def test_idempotent_and_conflicting_redelivery(bridge: ControlBridge, tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = send(state, {"cmd": "steer", "text": "look at the cache", "id": "pr-comment:7"})
    again = send(state, {"cmd": "steer", "text": "look at the cache", "id": "pr-comment:7"})
    assert first["key"] == again["key"] == "pr-comment:7"
    assert "dup" not in first and again["dup"] is True
    with pytest.raises(ControlError, match="idempotency conflict"):
        send(state, {"cmd": "steer", "text": "something else", "id": "pr-comment:7"})
    assert [(e["kind"], e["key"], e["input"], e["text"]) for e in admissions(state)] == [
        ("admitted", "pr-comment:7", "steer", "look at the cache")
    ]
    assert len(bridge.inbox.take()) == 1  # acted on once
    bridge.ledger.settle("pr-comment:7", "applied")
    settled = send(state, {"cmd": "steer", "text": "look at the cache", "id": "pr-comment:7"})
    assert settled["dup"] and settled["outcome"] == "applied"


def test_unrecordable_stop_still_stops_and_a_steer_fails_closed(
    bridge: ControlBridge, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    bridge.ledger.path = state / "no-such-dir" / "admissions.jsonl"  # every append now fails
    with pytest.raises(ControlError, match="could not record"):
        send(state, {"cmd": "steer", "text": "x"})
    assert bridge.inbox.take() == []
    reply = send(state, {"cmd": "stop"})
    assert reply["unrecorded"] is True
    [order] = bridge.inbox.take()
    assert order.input == "stop" and order.unrecorded


def test_bad_requests_are_refused_before_recording(bridge: ControlBridge, tmp_path: Path) -> None:
    state = tmp_path / "state"
    for request, message in [
        ({"cmd": "steer", "text": "  "}, "text"),
        ({"cmd": "set-budget"}, "at least one"),
        ({"cmd": "rescope"}, "regime"),
        ({"cmd": "launch"}, "unknown command"),
        ({"cmd": "approve"}, "no approval is pending"),
        ({"cmd": "stop", "id": ""}, "id must be"),
    ]:
        with pytest.raises(ControlError, match=message):
            send(state, request)
    assert admissions(state) == []


def test_an_unreachable_run_is_a_control_error(tmp_path: Path) -> None:
    with pytest.raises(ControlError, match="no run is reachable"):
        send(tmp_path, {"cmd": "status"})
    with socket.socket() as s:  # bound and held but not listening: refused, and no other test can take it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        (tmp_path / "control.json").write_text(json.dumps({"host": "127.0.0.1", "port": port, "token": "t"}))
        with pytest.raises(ControlError, match="no run is reachable"):
            send(tmp_path, {"cmd": "status"})


def test_the_control_record_is_renamed_into_place_without_an_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It names a live process's port: a machine crash ends that process, so waiting for the disk
    buys nothing."""
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    state = tmp_path / "state"
    state.mkdir()
    b = ControlBridge(Ledger(state / "admissions.jsonl"), Inbox())
    b.start(state / "control.json")
    try:
        (state / "control.json").unlink()
        assert b.restore_record() == "the control record"
        assert json.loads((state / "control.json").read_text())["host"] == "127.0.0.1"
    finally:
        b.close()
    assert [path for path in synced if "control" in Path(path).name] == []


def test_an_untouched_control_record_is_not_read_again_and_any_write_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crucible_core.control import bridge as bridge_module

    state = tmp_path / "state"
    state.mkdir()
    b = ControlBridge(Ledger(state / "admissions.jsonl"), Inbox())
    b.start(state / "control.json")
    record = state / "control.json"
    reads: list[object] = []
    real = bridge_module.read_regular
    monkeypatch.setattr(bridge_module, "read_regular", lambda *a: reads.append(a) or real(*a))
    try:
        time.sleep(0.08)  # the record's last write now lies outside the racy window
        assert b.restore_record() is None and len(reads) == 1  # read once, found intact
        assert b.restore_record() is None and len(reads) == 1  # untouched since: one lstat
        original = record.read_bytes()
        forged = original.replace(b'"pid": ', b'"pid": 9').replace(b'"port": ', b'"port": 1')[: len(original)]
        with open(record, "r+b") as handle:  # the agent rewrites it in place, same length
            handle.write(forged)
        assert b.restore_record() == "the control record" and record.read_bytes() == original
        time.sleep(0.08)
        assert b.restore_record() is None and b.restore_record() is None
        os.chmod(record, 0o644)  # even a chmod moves the ctime: read again (the bytes are intact)
        assert b.restore_record() is None and len(reads) == 4
    finally:
        b.close()


def test_a_bridge_token_is_what_secrets_token_urlsafe_makes_of_the_same_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bridge writes its token itself (secrets would import base64 at every start): same
    alphabet, no padding, and fresh randomness for each bridge."""
    import secrets

    from crucible_core.control import bridge as bridge_module

    for size in (1, 2, 3, 31, 32, 33):
        raw = os.urandom(size)
        monkeypatch.setattr(bridge_module.os, "urandom", lambda n, raw=raw: raw[:n])
        ours = bridge_module.url_safe_token(size)
        monkeypatch.setattr(secrets, "token_bytes", lambda n, raw=raw: raw[:n])
        assert ours == secrets.token_urlsafe(size)
    monkeypatch.undo()
    tokens = {ControlBridge(Ledger(Path(os.devnull)), Inbox()).token for _ in range(20)}
    assert len(tokens) == 20
    assert all(len(token) == 43 and "=" not in token for token in tokens)
