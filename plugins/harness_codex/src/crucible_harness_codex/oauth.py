"""The ChatGPT sign-in's token, minted on the engine host: the refresh grant and the single-refresher rule.

`codex login` leaves an OAuth pair in ~/.codex/auth.json; its contents reach the engine as
CODEX_CREDENTIALS. At the top of every ChatGPT turn the engine performs the refresh_token
grant against OpenAI's token endpoint and hands the turn only what the grant returned (an
access token, the id token, the account id), never the refresh token. OpenAI rotates the
refresh token on every grant and a spent one is dead, so:

- exactly one party refreshes (this module, in the engine), never the CLI or a sandbox;
- each rotation is persisted at once (0600, atomically) to
  $HOME/.config/crucible/codex-credentials.json, which takes precedence over
  CODEX_CREDENTIALS from then on (the variable is seed material for the first grant only);
- grants are serialized by an exclusive lock beside that file, so concurrent turns of one
  engine, or two engines sharing a home, never present the same refresh token twice.

The token endpoint can be overridden with CRUCIBLE_CODEX_TOKEN_URL in the engine's own
environment (a test's loopback endpoint); a manifest cannot redirect it.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from crucible_harness_codex.auth import CREDENTIALS_ENV, chatgpt_hint

# The Codex CLI's public OAuth client (OpenAI's registration for its sign-in flow).
CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"
TOKEN_URL = "https://auth.openai.com/oauth/token"
TOKEN_URL_ENV = "CRUCIBLE_CODEX_TOKEN_URL"
STATE_FILE = Path(".config") / "crucible" / "codex-credentials.json"
_MAX_MATERIAL_BYTES = 256 * 1024
_MAX_RESPONSE_BYTES = 1024 * 1024
# Answers of the token endpoint that mean the stored refresh token is dead for good.
_DEAD_TOKEN_CODES = (
    "refresh_token_expired",
    "refresh_token_reused",
    "refresh_token_invalidated",
    "invalid_grant",
)


class MintFailed(Exception):
    """No token for this turn; the message is one line saying why and what to do."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient  # the endpoint could not be reached (vs. it refused)


@attrs.frozen
class Minted:
    access_token: str = attrs.field(repr=False)
    account_id: str = attrs.field(repr=False)
    id_token: str = attrs.field(repr=False)

    def secrets(self) -> tuple[str, ...]:
        return (self.access_token, self.id_token)


@attrs.frozen
class Material:
    refresh_token: str = attrs.field(repr=False)
    account_id: str = ""
    id_token: str = attrs.field(default="", repr=False)


def parse_material(text: str, origin: str) -> Material:
    """The OAuth pair of a codex auth.json (or of the persisted state, which has the same shape)."""
    try:
        data = json.loads(text)
    except ValueError:
        raise MintFailed(f"{origin} is not JSON; {chatgpt_hint()}", transient=False) from None
    tokens = data.get("tokens") if isinstance(data, dict) else None
    refresh = tokens.get("refresh_token") if isinstance(tokens, dict) else None
    if not isinstance(refresh, str) or not refresh.strip():
        raise MintFailed(
            f"{origin} holds no tokens.refresh_token (is it a ChatGPT sign-in?); {chatgpt_hint()}",
            transient=False,
        )
    assert isinstance(tokens, dict)
    return Material(refresh.strip(), _text(tokens.get("account_id")), _text(tokens.get("id_token")))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def account_of(id_token: str) -> str:
    """The ChatGPT account id an id token's claims name, or "" (the signature is not ours to check)."""
    try:
        payload = id_token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        auth = claims.get("https://api.openai.com/auth", {})
        account = auth.get("chatgpt_account_id") if isinstance(auth, dict) else None
        return account if isinstance(account, str) else ""
    except (IndexError, ValueError, AttributeError):
        return ""


@attrs.frozen
class Refresher:
    state_path: Path
    token_url: str = TOKEN_URL
    timeout: float = 30.0

    @classmethod
    def for_engine(cls, environ: Mapping[str, str] | None = None) -> Refresher:
        """The engine's refresher: its state under the engine user's HOME, OpenAI's endpoint."""
        environ = os.environ if environ is None else environ
        home = Path(environ.get("HOME") or os.path.expanduser("~"))
        return cls(home / STATE_FILE, environ.get(TOKEN_URL_ENV) or TOKEN_URL)

    def has_material(self, env: Mapping[str, str]) -> bool:
        return self.state_path.exists() or bool(env.get(CREDENTIALS_ENV, "").strip())

    def problem(self, env: Mapping[str, str]) -> str | None:
        """What would stop a grant before any is made (no material, material of the wrong shape)."""
        try:
            self._material(env)
        except MintFailed as exc:
            return str(exc)
        return None

    def mint(self, env: Mapping[str, str]) -> Minted:
        """One refresh grant (serialized with every other), its rotation persisted before returning."""
        with self._exclusive():
            material = self._material(env)
            answer = self._grant(material.refresh_token)
            access = answer.get("access_token")
            if not isinstance(access, str) or not access:
                raise MintFailed(
                    "the ChatGPT token endpoint answered without an access token", transient=True
                )
            id_token = _text(answer.get("id_token")) or material.id_token
            account = material.account_id or account_of(id_token)
            if not account or not id_token:
                raise MintFailed(
                    f"the ChatGPT sign-in lacks an account id or id token; {chatgpt_hint()}", transient=False
                )
            minted = Minted(access, account, id_token)
            rotated = _text(answer.get("refresh_token"))
            if rotated:
                self._persist(minted, rotated)
            return minted

    # -- the pieces -----------------------------------------------------------------------------

    def _material(self, env: Mapping[str, str]) -> Material:
        try:
            raw = self.state_path.read_bytes()[:_MAX_MATERIAL_BYTES]
        except FileNotFoundError:
            seed = env.get(CREDENTIALS_ENV, "").strip()
            if not seed:
                raise MintFailed(chatgpt_hint(), transient=False) from None
            return parse_material(seed, CREDENTIALS_ENV)
        except OSError as exc:
            raise MintFailed(f"cannot read {self.state_path}: {exc.strerror}", transient=False) from None
        return parse_material(
            raw.decode("utf-8", errors="replace"),
            f"{self.state_path} (delete it to start from {CREDENTIALS_ENV})",
        )

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        folder = self.state_path.parent
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(folder / f".{self.state_path.name}.lock", os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            # flock: one holder per open file, whether the others are threads or processes.
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _grant(self, refresh_token: str) -> dict[str, Any]:
        body = json.dumps(
            {
                "client_id": CLIENT_ID,
                "grant_type": "refresh_token",
                "refresh_token": refresh_token,
                "scope": "openid profile email",
            }
        ).encode()
        request = urllib.request.Request(
            self.token_url, data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read(_MAX_RESPONSE_BYTES)
        except urllib.error.HTTPError as exc:
            detail = exc.read(_MAX_RESPONSE_BYTES).decode("utf-8", errors="replace")
            dead = next((code for code in _DEAD_TOKEN_CODES if code in detail), None)
            if dead is not None or exc.code == 401:
                raise MintFailed(
                    f"the ChatGPT token endpoint refused the refresh token ({dead or f'HTTP {exc.code}'}): "
                    f"run `codex login` again, replace {CREDENTIALS_ENV}, and delete {self.state_path}",
                    transient=False,
                ) from None
            raise MintFailed(f"the ChatGPT token endpoint answered HTTP {exc.code}", transient=True) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise MintFailed(
                f"could not reach the ChatGPT token endpoint: {reason}", transient=True
            ) from None
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise MintFailed("the ChatGPT token endpoint answered something other than JSON", transient=True)
        return answer

    def _persist(self, minted: Minted, refresh_token: str) -> None:
        data = json.dumps(
            {
                "tokens": {
                    "access_token": minted.access_token,
                    "refresh_token": refresh_token,
                    "account_id": minted.account_id,
                    "id_token": minted.id_token,
                },
                "last_refresh": datetime.now(UTC).isoformat(),
            }
        ).encode()
        tmp = self.state_path.with_name(f".{self.state_path.name}.tmp{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.state_path)
