"""Starting the broker's server off the engine's thread: the SDK import (about half a second) and
the server start overlap whatever the run does before its first turn (the baseline measure).

Deliberately light: it imports the server module, and with it the mcp SDK, on its own thread.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crucible_core.api import RunFailed

if TYPE_CHECKING:
    from crucible_broker_mcp.server import BrokerServer

START_SECONDS = 60.0  # import plus start; a loaded machine can be slow, a hung one must not hang the run
STOP_WAIT_SECONDS = 10.0  # past this the start thread stops what it started itself


class Starter:
    def __init__(self, broker: Any, directory: Path) -> None:
        self.broker = broker
        self.directory = directory
        self.server: BrokerServer | None = None
        self.error: BaseException | None = None
        self._done = threading.Event()
        self._stopped = False
        self._lock = threading.Lock()

    @classmethod
    def begin(cls, broker: Any, directory: Path) -> Starter:
        starter = cls(broker, directory)
        threading.Thread(target=starter._start, name="crucible-broker-start", daemon=True).start()
        return starter

    def _start(self) -> None:
        try:
            from crucible_broker_mcp.server import BrokerServer

            server = BrokerServer(self.broker, self.directory)
            server.start()
            with self._lock:
                self.server = server
                late = self._stopped
            if late:  # the run ended while we were starting: do not leave the server behind
                server.stop()
        except BaseException as exc:
            self.error = exc
        finally:
            self._done.set()

    def wait(self) -> BrokerServer:
        if not self._done.wait(START_SECONDS):
            raise RunFailed(f"the broker's MCP server did not start within {START_SECONDS:.0f}s")
        if self.server is None:
            raise RunFailed(
                f"the broker's MCP server could not start: {type(self.error).__name__}: {self.error}"
            )
        return self.server

    def stop(self) -> None:
        """Stop the server, waiting (bounded) for a start still under way: run end means gone."""
        self._done.wait(STOP_WAIT_SECONDS)
        with self._lock:
            self._stopped = True
            server = self.server
        if server is not None:
            server.stop()
