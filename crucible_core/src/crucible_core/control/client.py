"""Talking to a live run's control bridge: find it from the state directory, send one request, read one reply."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

from crucible_core.agent_files import read_regular
from crucible_core.errors import ControlError

CONNECT_TIMEOUT = 5.0
MAX_CONTROL_BYTES = 4096  # control.json holds a host, a port, a token and a pid
REPLY_TIMEOUT = 30.0
BUSY_PAUSES = (0.05, 0.1, 0.2, 0.4, 0.8)  # the waits before each new try when the bridge is busy


class RunUnreachable(ControlError):
    """No run answers on this state directory: never started, finished, or killed."""


def state_dir_for(manifest: Path, state_dir: Path | None) -> Path:
    """The run's state directory: --state-dir, else <manifest dir>/state (no manifest parse needed)."""
    return (state_dir or manifest.resolve().parent / "state").resolve()


def read_control(state_dir: Path) -> dict[str, Any]:
    path = state_dir / "control.json"
    try:
        # read like any file a local agent can reach: a FIFO or a link there is refused at once
        record = json.loads(read_regular(path, MAX_CONTROL_BYTES))
    except FileNotFoundError:
        raise RunUnreachable(
            f"no run is reachable: {path} does not exist",
            hint="is the run started? pass --state-dir or --manifest to point at it",
        ) from None
    except (OSError, ValueError) as exc:
        raise ControlError(f"cannot read {path}: {exc}", hint="is this a crucible state directory?") from None
    if not isinstance(record, dict) or not isinstance(record.get("port"), int):
        raise ControlError(f"{path} is not a control record", hint="is this a crucible state directory?")
    return record


def send(state_dir: Path, request: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    """Send one request with the run's token; a refusal or an unreachable run is a ControlError.

    `name` is the command as the operator typed it, for the message (`unpause` sends `resume`).
    """
    record = read_control(state_dir)
    address = (record.get("host") or "127.0.0.1", record["port"])
    return send_to(address, record.get("token"), request, name)


def send_to(
    address: tuple[str, int], token: object, request: dict[str, Any], name: str | None = None
) -> dict[str, Any]:
    """`send` to a bridge at a known address with a known token (a watcher given --control-addr)."""
    payload = {**request, "token": token}
    reply = _exchange(address, payload)
    for pause in BUSY_PAUSES:
        # A busy bridge did not read the request (a flood of other connections pushed it out
        # before it arrived), so sending it again cannot act twice.
        if not (isinstance(reply, dict) and reply.get("busy") is True):
            break
        time.sleep(pause)
        reply = _exchange(address, payload)
    if not isinstance(reply, dict) or not reply.get("ok"):
        error = reply.get("error") if isinstance(reply, dict) else reply
        raise ControlError(f"the run refused {name or request.get('cmd')}: {error}")
    return reply


def _exchange(address: tuple[str, int], payload: dict[str, Any]) -> Any:
    """One connection: the request line out, the reply line back, parsed."""
    try:
        with socket.create_connection(address, timeout=CONNECT_TIMEOUT) as conn:
            conn.settimeout(REPLY_TIMEOUT)
            conn.sendall((json.dumps(payload) + "\n").encode("utf-8"))
            reply_line = conn.makefile("rb").readline()
    except OSError as exc:
        raise RunUnreachable(
            f"no run is reachable at {address[0]}:{address[1]} ({exc})",
            hint="the run may have ended; `crucible run --resume` continues it",
        ) from None
    try:
        return json.loads(reply_line)
    except ValueError:
        raise ControlError("the control bridge sent no reply", hint="the run may be shutting down") from None


def live_run(state_dir: Path) -> dict[str, Any] | None:
    """The control record of a run still answering on this state directory's bridge, or None.

    A SIGKILLed run leaves control.json behind; only a bridge that answers counts as alive.
    """
    if not (state_dir / "control.json").exists():
        return None
    try:
        send(state_dir, {"cmd": "status"})
        return read_control(state_dir)
    except ControlError:
        return None
