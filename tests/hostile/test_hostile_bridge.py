"""Bridge abuse over real loopback sockets: deep nesting, oversize and trickled requests, connection floods."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crucible_core.control.bridge import MAX_REQUEST_BYTES, ControlBridge
from crucible_core.control.client import send
from crucible_core.control.inbox import Inbox
from crucible_core.control.ledger import Ledger


@pytest.fixture
def bridge(tmp_path: Path) -> Iterator[ControlBridge]:
    b = ControlBridge(Ledger(tmp_path / "admissions.jsonl"), Inbox(), read_seconds=1.0, max_connections=4)
    b.start(tmp_path / "control.json")
    yield b
    b.close()


def connect(tmp_path: Path) -> socket.socket:
    record = json.loads((tmp_path / "control.json").read_text())
    return socket.create_connection((record["host"], record["port"]), timeout=10)


def reply_to(conn: socket.socket) -> dict:
    conn.settimeout(10)
    line = conn.makefile("rb").readline()
    assert line, "the bridge closed the connection without a reply"
    return json.loads(line)


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        (b"[" * 100_000 + b"\n", "nests deeper"),
        (b"{" * 50_000, "nests deeper"),  # no newline: the client half-closes
        (b'{"cmd": "status", "n": ' + b"9" * 5001 + b"}\n", "digits"),
        (b"\xff\xfe garbage\n", "UTF-8"),
        (b"x" * (MAX_REQUEST_BYTES + 10), "longer than"),
        (b"\n", "JSON"),
    ],
)
def test_every_malformed_request_gets_an_error_reply(
    bridge: ControlBridge, tmp_path: Path, payload: bytes, says: str
) -> None:
    with connect(tmp_path) as conn:
        conn.sendall(payload)
        conn.shutdown(socket.SHUT_WR)
        reply = reply_to(conn)
    assert reply["ok"] is False and says in reply["error"], reply
    assert send(tmp_path, {"cmd": "status"})["ok"]  # the bridge still serves


def test_trickling_clients_are_cut_off_at_the_read_deadline(bridge: ControlBridge, tmp_path: Path) -> None:
    held = [connect(tmp_path) for _ in range(4)]
    for conn in held:
        conn.sendall(b"{")
    # one byte every 0.2s never completes a request; the read deadline (1s here) ends each one
    replies: dict[int, dict] = {}
    for _ in range(30):
        for index, conn in enumerate(held):
            if index in replies:
                continue
            with contextlib.suppress(OSError):
                conn.sendall(b" ")
            conn.settimeout(0.01)
            try:
                line = conn.makefile("rb").readline()
            except TimeoutError:
                continue
            if line:
                replies[index] = json.loads(line)
        if len(replies) == len(held):
            break
        time.sleep(0.2)
    for conn in held:
        conn.close()
    assert len(replies) == len(held), "a trickling client held its connection past the read deadline"
    assert all("not complete within" in r["error"] for r in replies.values())
    assert send(tmp_path, {"cmd": "status"})["ok"]  # the slots came back


def test_a_flood_of_unfinished_connections_cannot_keep_the_operator_out(
    bridge: ControlBridge, tmp_path: Path
) -> None:
    # Twice as many idle connections as the bridge holds (4 here): the newest push out the
    # oldest unfinished ones, which are told so, and the operator's request is still answered.
    held = [connect(tmp_path) for _ in range(8)]
    for conn in held[:4]:
        reply = reply_to(conn)
        assert reply["ok"] is False and reply.get("busy") is True and "too many" in reply["error"], reply
    assert send(tmp_path, {"cmd": "status"})["ok"]
    for conn in held:
        conn.close()


@pytest.mark.parametrize(
    "cap",
    [
        '"max_time": NaN',
        '"max_time": Infinity',
        '"max_time": 1e308',
        '"max_time": -Infinity',
        '"max_cost": NaN',
        '"max_cost": Infinity',
        '"max_cost": 1e308',
        '"iterations": 1000000000000',
        '"max_time": "400d"',
    ],
)
def test_set_budget_refuses_a_cap_that_is_not_finite_and_in_range(
    bridge: ControlBridge, tmp_path: Path, cap: str
) -> None:
    token = json.loads((tmp_path / "control.json").read_text())["token"]
    with connect(tmp_path) as conn:
        conn.sendall(f'{{"cmd": "set-budget", {cap}, "token": "{token}"}}\n'.encode())
        reply = reply_to(conn)
    assert reply["ok"] is False, reply
    assert "from 0 to" in reply["error"] or "longer than a year" in reply["error"], reply
    assert not (tmp_path / "admissions.jsonl").exists()  # refused before anything is recorded
    assert bridge.inbox.take() == []
