"""The control bridge's socket side: one thread serves every loopback connection, each within fixed bounds.

A request is one line of at most MAX_REQUEST_BYTES that must arrive within `read_seconds` of
connecting; it gets exactly one reply line, then the connection is closed. At most
`max_connections` unfinished requests are held at once. Any local process can connect, and
none of them has to send anything, so a newcomer beyond that bound closes the oldest unfinished
connection (told it is busy) rather than being turned away itself: a flood of connections that
never finish a request only ever evicts its own, while the operator's client, which writes its
whole request the moment it connects, is read on the round it arrives and answered. Threads
(one) and memory (`max_connections` buffers) stay the same whatever arrives.
"""

from __future__ import annotations

import contextlib
import json
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import attrs

from crucible_core.contract.records import value_methods

LOOPBACK = "127.0.0.1"
MAX_REQUEST_BYTES = 256 * 1024
# Connections the kernel queues until a round accepts them. A full queue drops new connections
# for a second or more (TCP retries), so each round drains it.
BACKLOG = 1024
REPLY_SECONDS = 2.0  # a reply is one short line; a client that never reads cannot hold the thread longer
BUSY: dict[str, Any] = {"ok": False, "busy": True, "error": "too many control connections; retry shortly"}


@value_methods
@attrs.define(repr=False, eq=False)
class _Unfinished:
    """A connection whose request line has not all arrived yet."""

    deadline: float
    buffer: bytearray = attrs.field(factory=bytearray)


def send_reply(conn: socket.socket, reply: dict[str, Any]) -> None:
    """One reply line, then the connection is closed."""
    with contextlib.suppress(OSError):
        conn.settimeout(REPLY_SECONDS)
        conn.sendall((json.dumps(reply, default=str) + "\n").encode("utf-8"))
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)
    conn.close()


class LineServer:
    """Listens on 127.0.0.1 (an ephemeral port) and answers each request line with `answer(line)`."""

    def __init__(
        self, answer: Callable[[bytes], dict[str, Any]], *, read_seconds: float, max_connections: int
    ) -> None:
        self.answer = answer
        self.read_seconds = read_seconds
        self.max_connections = max_connections
        self._listener = socket.create_server((LOOPBACK, 0), backlog=BACKLOG)
        self._listener.setblocking(False)
        self._wake, self._waker = socket.socketpair()  # close() writes to _waker to end a select
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._selector.register(self._wake, selectors.EVENT_READ)
        self._open: dict[socket.socket, _Unfinished] = {}  # oldest first: deadlines in order too
        self._thread = threading.Thread(target=self._serve, name="crucible-control", daemon=True)

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._waker.send(b"\0")
        if self._thread.is_alive():
            self._thread.join(timeout=REPLY_SECONDS + 1.0)
            if self._thread.is_alive():
                return  # still inside one answer (a stalled disk): it ends at the wake-up; the run is ending
        for conn in [*self._open, self._listener, self._wake, self._waker]:
            conn.close()
        self._open.clear()
        self._selector.close()

    # -- the one thread -------------------------------------------------------------------------
    def _serve(self) -> None:
        while True:
            oldest = next(iter(self._open.values()), None)
            timeout = None if oldest is None else max(0.0, oldest.deadline - time.monotonic())
            ready = [key.fileobj for key, _ in self._selector.select(timeout)]
            if self._wake in ready:
                return  # close() asked
            # What has arrived is read before anyone new is let in, so a request on its way is
            # never evicted by connections that came after it.
            for conn in ready:
                if conn in self._open:
                    self._read(conn)
            if self._listener in ready:
                self._accept()
            self._expire()

    def _accept(self) -> None:
        for _ in range(BACKLOG):  # bounded, so the requests already held are read again soon
            try:
                conn, _address = self._listener.accept()
            except OSError:  # none left (BlockingIOError), or out of descriptors: next round
                return
            conn.setblocking(False)
            if len(self._open) >= self.max_connections:
                self._finish(next(iter(self._open)), BUSY)
            self._open[conn] = _Unfinished(time.monotonic() + self.read_seconds)
            self._selector.register(conn, selectors.EVENT_READ)
            self._read(conn)  # a client that wrote its request at once is answered now

    def _read(self, conn: socket.socket) -> None:
        pending = self._open[conn]
        try:
            chunk = conn.recv(65536)
        except BlockingIOError:
            return
        except OSError:  # reset by the client: no one to answer
            self._forget(conn)
            conn.close()
            return
        pending.buffer += chunk
        if b"\n" in chunk or not chunk:  # a whole line, or the client closed its side
            line = bytes(pending.buffer.split(b"\n", 1)[0])
            self._forget(conn)
            send_reply(conn, self.answer(line))
        elif len(pending.buffer) > MAX_REQUEST_BYTES:
            self._finish(
                conn, {"ok": False, "error": f"the request is longer than {MAX_REQUEST_BYTES} bytes"}
            )

    def _expire(self) -> None:
        now = time.monotonic()
        while self._open:
            conn, pending = next(iter(self._open.items()))
            if pending.deadline > now:
                return
            self._finish(
                conn, {"ok": False, "error": f"the request was not complete within {self.read_seconds:g}s"}
            )

    def _finish(self, conn: socket.socket, reply: dict[str, Any]) -> None:
        self._forget(conn)
        send_reply(conn, reply)

    def _forget(self, conn: socket.socket) -> None:
        del self._open[conn]
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(conn)
