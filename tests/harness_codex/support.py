"""Helpers for the codex harness tests: the pinned CLI, turn environments, a reach recorder, sign-in material."""

from __future__ import annotations

import base64
import json
import os
import socket
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from crucible_core.manifest.models import AgentSection
from crucible_core.protocols import HarnessContext
from crucible_harness_codex.settings import CodexSettings, CodexTable
from tests.fakes.openai_responses import FakeResponses

ROOT = Path(__file__).resolve().parents[2]
# Where `python3 tasks.py test` installs the pinned CLI; the env var is what it passes on.
DEFAULT_CLI = ROOT / ".cache" / "codex-cli" / "node_modules" / ".bin" / "codex"
# A model the CLI has no metadata for (it says so in a non-fatal error item); priced at the
# table's fallback, Sol's $5 in / $30 out per million tokens.
TEST_MODEL = "gpt-crucible-test"
TEST_KEY = "sk-proj-crucible-codex-test-key-0000000000"


def codex_cli_path() -> Path | None:
    configured = os.environ.get("CRUCIBLE_TEST_CODEX_CLI")
    candidate = Path(configured) if configured else DEFAULT_CLI
    return candidate if candidate.exists() else None


def fallback_cost(*replies: tuple[int, int, int]) -> float:
    """What the scripted replies cost at the fallback price: (input, cached, output) each."""
    return sum((i - c) * 5.0 + c * 0.5 + o * 30.0 for i, c, o in replies) / 1_000_000


class ReachRecorder:
    """An HTTP(S) proxy on 127.0.0.1 that answers nothing and records where each request wanted to go.

    Handed to a turn as HTTPS_PROXY/HTTP_PROXY/ALL_PROXY (with 127.0.0.1 exempt, where the fake
    model is), it catches any connection the CLI opens beyond the model: analytics, update
    checks, plugin catalogues.
    """

    def __init__(self) -> None:
        self.targets: list[str] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.getsockname()[1]}"

    def env(self) -> dict[str, str]:
        return {
            "HTTPS_PROXY": self.url,
            "HTTP_PROXY": self.url,
            "ALL_PROXY": self.url,
            "https_proxy": self.url,
            "http_proxy": self.url,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    first = conn.recv(4096).split(b"\r\n", 1)[0].decode("latin-1")
                except OSError:
                    first = "?"
                self.targets.append(first)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._server.close()


def turn_env(fake: FakeResponses, home: Path, cli: Path, **extra: str) -> dict[str, str]:
    """A turn environment pointing the CLI at the fake, with a home a test can look into."""
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": TEST_KEY,
        "CRUCIBLE_CODEX_BIN": str(cli),
    }
    env.update(extra)
    return env


def harness_context(private_dir: Path, **table: Any) -> HarnessContext:
    return HarnessContext(
        AgentSection(harness="codex"), private_dir.parent, private_dir, CodexSettings(CodexTable(**table))
    )


def jwt(claims: Mapping[str, Any]) -> str:
    """An unsigned JWT-shaped token (the CLI reads an id token's claims; nobody checks a signature here)."""

    def part(data: Mapping[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


ACCOUNT = "acct-crucible-test-7"
ID_TOKEN = jwt(
    {
        "email": "dev@example.com",
        "https://api.openai.com/auth": {"chatgpt_plan_type": "plus", "chatgpt_account_id": ACCOUNT},
    }
)


def login_file(refresh_token: str) -> str:
    """What `codex login` leaves in ~/.codex/auth.json, as CODEX_CREDENTIALS carries it."""
    return json.dumps(
        {
            "OPENAI_API_KEY": None,
            "tokens": {
                "id_token": ID_TOKEN,
                "access_token": "login-access-token",
                "refresh_token": refresh_token,
                "account_id": ACCOUNT,
            },
            "last_refresh": "2026-01-01T00:00:00Z",
        }
    )
