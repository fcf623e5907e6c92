"""The control bridge: a loopback JSON-lines server that admits operator inputs into the ledger and the inbox.

One request object per connection, one reply line back. Every request carries the run's
token (written with the port to state/control.json, mode 0600); anything else is refused
before it is read further. The bridge only validates, records and hands over; the socket side
and its bounds (one thread, bounded requests, a flood that cannot crowd the operator out) are
in control/server.py. JSON nesting is at most MAX_REQUEST_DEPTH.
"""

from __future__ import annotations

import binascii
import contextlib
import hmac
import json
import os
import time
from pathlib import Path
from typing import Any

from crucible_core.agent_files import AgentFileRefused, file_status, outside_racy_window, read_regular
from crucible_core.contract.json_bounds import JsonRefused, loads_bounded
from crucible_core.control.commands import MUTATING, READ_ONLY, STOPPING, BadRequest, payload_of
from crucible_core.control.inbox import Inbox, Order
from crucible_core.control.ledger import IdempotencyConflict, Ledger, valid_id
from crucible_core.control.orders import BY_NAME, NEEDS_PENDING_APPROVAL
from crucible_core.control.server import LOOPBACK, MAX_REQUEST_BYTES, LineServer
from crucible_core.manifest.paths import write_atomic

MAX_REQUEST_DEPTH = 16
MAX_CONNECTIONS = 64  # unfinished requests held at once (each buffer at most MAX_REQUEST_BYTES)
READ_SECONDS = 5.0


TOKEN_BYTES = 32  # of randomness in a bridge's token
_URL_SAFE = bytes.maketrans(b"+/", b"-_")


def url_safe_token(nbytes: int) -> str:
    """`secrets.token_urlsafe(nbytes)`'s text (os.urandom's bytes in URL-safe base64, unpadded),
    made here: `secrets` imports base64, and every run opens a bridge while few ever use base64."""
    encoded = binascii.b2a_base64(os.urandom(nbytes), newline=False)
    return encoded.translate(_URL_SAFE).rstrip(b"=").decode("ascii")


class ControlBridge:
    def __init__(
        self,
        ledger: Ledger,
        inbox: Inbox,
        token: str | None = None,
        *,
        read_seconds: float = READ_SECONDS,
        max_connections: int = MAX_CONNECTIONS,
        honours: frozenset[str] | None = None,
        lane: str = "loop",
    ) -> None:
        self.ledger = ledger
        self.inbox = inbox
        # The orders this kind of run acts on (None: every one); the others are refused by name,
        # before anything is recorded, so the operator hears why instead of waiting for nothing.
        self.honours = honours
        self.lane = lane
        self.read_seconds = read_seconds
        self.max_connections = max_connections
        self.token = token or url_safe_token(TOKEN_BYTES)
        self._server: LineServer | None = None
        self._control_file: Path | None = None
        # control.json's bytes while the server runs: its port, token and pid do not change, and
        # the state guard compares the file with them after every child (no encoding each time)
        self._record_bytes = b""
        # control.json's status when its bytes were last found to be the record, outside the racy
        # window: while the file is untouched, the guard's check is one lstat, not a read
        self._verified: tuple[int, ...] | None = None

    # -- the protocol, independent of sockets -------------------------------------------------
    def handle(self, request: Any) -> dict[str, Any]:
        if not isinstance(request, dict):
            return {"ok": False, "error": "a request is one JSON object"}
        token = request.get("token")
        if not isinstance(token, str) or not hmac.compare_digest(token.encode(), self.token.encode()):
            return {"ok": False, "error": "missing or wrong token (read it from state/control.json)"}
        cmd = request.get("cmd")
        if cmd in READ_ONLY:
            return {"ok": True, "cmd": cmd, "status": self.inbox.status()}
        if not isinstance(cmd, str) or cmd not in MUTATING:
            return {"ok": False, "cmd": cmd, "error": f"unknown command {cmd!r}"}
        if self.honours is not None and cmd not in self.honours:
            return {"ok": False, "cmd": cmd, "error": self._not_honoured(cmd)}
        id_ = request.get("id")
        if id_ is not None and not valid_id(id_):
            return {"ok": False, "cmd": cmd, "error": "id must be a non-empty string of at most 256 bytes"}
        try:
            payload = payload_of(cmd, request)
        except BadRequest as exc:
            return {"ok": False, "cmd": cmd, "error": str(exc)}
        if cmd in NEEDS_PENDING_APPROVAL and not self.inbox.status().get("approval"):
            known = self.ledger.entries.get(id_) if id_ is not None else None
            if known is None:  # a redelivery of a settled approve still converges below
                return {"ok": False, "cmd": cmd, "error": "no approval is pending"}
        try:
            admission = self.ledger.admit(cmd, payload, id_)
        except IdempotencyConflict as exc:
            return {"ok": False, "cmd": cmd, "error": str(exc)}
        except OSError as exc:
            if cmd not in STOPPING:
                return {
                    "ok": False,
                    "cmd": cmd,
                    "error": f"could not record the input, so it was not taken: {exc}",
                }
            self.inbox.put(Order(f"unrecorded-{os.urandom(6).hex()}", cmd, payload, unrecorded=True))
            return {"ok": True, "cmd": cmd, "unrecorded": True}
        entry = admission.entry
        reply: dict[str, Any] = {"ok": True, "cmd": cmd, "key": entry.key}
        if admission.dup:
            reply["dup"] = True
            if entry.outcome is not None:
                reply["outcome"] = entry.outcome
            return reply
        self.inbox.put(Order(entry.key, cmd, payload))
        return reply

    def _not_honoured(self, cmd: str) -> str:
        takes = ", ".join(f"`crucible {BY_NAME[name].command}`" for name in sorted(self.honours or ()))
        return (
            f"a {self.lane} run does not take `crucible {BY_NAME[cmd].command}`: "
            f"it acts on {takes or 'no order'} (and answers `crucible status`)"
        )

    # -- the server ---------------------------------------------------------------------------
    def answer(self, line: bytes) -> dict[str, Any]:
        """The reply to one raw request line; never raises."""
        try:
            request = loads_bounded(line, max_chars=MAX_REQUEST_BYTES, max_depth=MAX_REQUEST_DEPTH)
        except JsonRefused as exc:
            return {"ok": False, "error": f"a request is one JSON object on one line ({exc})"}
        try:
            return self.handle(request)
        except Exception as exc:  # never take the server thread down with a bad request
            return {"ok": False, "error": f"internal error: {type(exc).__name__}: {exc}"}

    def start(self, control_file: Path) -> int:
        self._server = LineServer(
            self.answer, read_seconds=self.read_seconds, max_connections=self.max_connections
        )
        self._server.start()
        # Not fsynced: the record names a live process's port, which a machine crash ends anyway
        # (and a reader checks the bridge answers); the rename alone keeps it from being read torn.
        self._record_bytes = json.dumps(self._record()).encode("utf-8")
        write_atomic(control_file, self._record_bytes, mode=0o600, durable=False)
        self._control_file = control_file
        return self._server.port

    def restore_record(self) -> str | None:
        """Rewrite control.json if it was deleted or changed while the bridge runs."""
        if self._server is None or self._control_file is None:
            return None
        record = self._record_bytes
        taken = time.time_ns()
        try:
            st = os.lstat(self._control_file)
        except OSError:
            st = None
        seen = file_status(st) if st is not None else None
        if seen is not None and seen == self._verified:
            return None  # the file found intact last time, untouched since (a write moves the ctime)
        # the state directory is within a local agent's reach: a FIFO planted here must not
        # block the engine, it is replaced like any other change
        with contextlib.suppress(FileNotFoundError, AgentFileRefused):
            if read_regular(self._control_file, len(record)) == record:
                if st is not None and outside_racy_window(st.st_ctime_ns, taken):
                    self._verified = seen
                return None
        self._verified = None
        write_atomic(self._control_file, record, mode=0o600, durable=False)  # as in start()
        return "the control record"

    def _record(self) -> dict[str, Any]:
        assert self._server is not None
        return {
            "host": LOOPBACK,
            "port": self._server.port,
            "token": self.token,
            "pid": os.getpid(),
        }

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._control_file is not None:
            with contextlib.suppress(OSError):
                self._control_file.unlink()
            self._control_file = None
