"""The `codex` harness: one turn of `codex exec --json`, supervised, its stream decoded live.

Each turn gets a home of its own (HOME, CODEX_HOME and the XDG directories), made fresh under
the run's private state and removed when the turn ends: the CLI's config, the auth file holding
the turn's credential, its caches and its transcript never land in a user's home, the workspace
or anything the run keeps. A home a killed engine left behind is removed before this engine
makes its first one (a resume); never earlier, since building a harness (`crucible check`)
must not touch the homes of a run in progress.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import attrs

from crucible_core.api import (
    BUILTIN,
    Completed,
    EgressEndpoint,
    EgressReach,
    FailureClass,
    HarnessContext,
    SandboxCommand,
    SandboxLayout,
    Turn,
    TurnResult,
    run_process,
)
from crucible_harness_codex import auth, events, launch
from crucible_harness_codex.exec_json import ExecDecoder
from crucible_harness_codex.oauth import MintFailed, Refresher
from crucible_harness_codex.pricing import cost_usd
from crucible_harness_codex.rollout import recorded_usage
from crucible_harness_codex.sessions import SessionMarks
from crucible_harness_codex.settings import CodexSettings
from crucible_harness_codex.verdict import classify

HARNESS_NAME = "codex"
_HOMES = "codex-homes"
# Runs the CLI in a pod with the pod's own endpoint: the custom provider's base URL comes from
# the pod's OPENAI_BASE_URL when it has one (a command written here cannot know it).
_POD_SCRIPT = (
    'command -v "$0" >/dev/null 2>&1 || { echo "crucible: $0 is not on the PATH of this pod" >&2; exit 127; }\n'
    'if [ -n "${OPENAI_BASE_URL:-}" ]; then\n'
    f'  set -- "$@" -c "model_providers.{launch.PROVIDER_ID}.base_url=\\"$OPENAI_BASE_URL\\""\n'
    "fi\n"
    'exec "$0" "$@" -\n'
)


@attrs.frozen
class Prepared:
    """A turn's credential, ready to seed: the auth file (or the variable a pod reads) and what to mask."""

    auth_file: bytes | None = attrs.field(repr=False)
    endpoint: launch.Endpoint
    secrets: tuple[str, ...] = attrs.field(repr=False)


@attrs.frozen
class _Opened:
    """A turn about to start: its credential, model and stream decoder, and how its end is judged."""

    prepared: Prepared
    model: str
    decoder: ExecDecoder
    verdict: Callable[..., TurnResult]  # (Completed, fallback_cost=0.0): closes the session, masks the note


@attrs.define
class _Homes:
    """Where turn homes are made; the first one made sweeps what a killed engine left there."""

    root: Path
    swept: bool = False
    lock: threading.Lock = attrs.field(factory=threading.Lock)

    def make(self, iteration: int) -> Path:
        with self.lock:  # a wide round's turns start together: none may sweep another's home
            if not self.swept:
                shutil.rmtree(self.root, ignore_errors=True)
                self.swept = True
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(self.root, 0o700)
            home = self.root / f"turn-{iteration}-{secrets.token_hex(4)}"
            home.mkdir(mode=0o700)
            return home


@attrs.frozen
class CodexHarness:
    settings: CodexSettings
    marks: SessionMarks
    homes: _Homes  # where turn homes are made (mode 0700, in the run's private state)
    refresher: Refresher
    # The engine's environment with [agent].env over it: where a sandboxed turn's credential is
    # resolved (the sandbox itself is given only the disclosed variables).
    host_env: Mapping[str, str] = attrs.field(repr=False)

    @classmethod
    def from_context(cls, ctx: HarnessContext) -> CodexHarness:
        settings = ctx.settings if isinstance(ctx.settings, CodexSettings) else CodexSettings()
        return cls(
            settings,
            SessionMarks.under(ctx.private_dir),
            _Homes(ctx.private_dir / _HOMES),
            Refresher.for_engine(),
            {**os.environ, **ctx.agent.env},
        )

    def preflight(self, env: Mapping[str, str]) -> list[str]:
        """What would stop a turn on this host: the CLI not found, no credential, each with its fix."""
        cli = launch.find_cli(env)
        return ([cli.missing_note()] if cli.path is None else []) + self.sandbox_preflight(env)

    def sandbox_preflight(self, env: Mapping[str, str]) -> list[str]:
        """What would stop a sandboxed turn: the credential, resolved on this host (the CLI is the image's)."""
        problems = []
        selection = self._select(env)
        if isinstance(selection, auth.Refused):
            problems.append(selection.reason)
        elif isinstance(selection, auth.ChatGpt):
            problem = self.refresher.problem(env)
            if problem:
                problems.append(problem)
        return problems

    def sandbox_egress(self) -> EgressReach:
        """The reach the CLI needs in a confining sandbox (a backend adds it to the sandbox's allowlist):
        OpenAI's hosts, and the host of the custom endpoint OPENAI_BASE_URL names, when it names one."""
        reach = self.settings.sandbox_egress()
        endpoint = launch.endpoint_host(self.host_env.get(launch.BASE_URL_ENV, ""))
        if endpoint is None:
            return reach
        host, port = endpoint
        return attrs.evolve(reach, endpoints=(*reach.endpoints, EgressEndpoint(host, port, "full", BUILTIN)))

    def run(self, turn: Turn) -> TurnResult:
        cli = launch.find_cli(turn.env)
        if cli.path is None:
            return TurnResult(False, FailureClass.SPAWN, note=cli.missing_note())
        opened = self._open(turn, lambda: self._prepare(turn.env))
        if isinstance(opened, TurnResult):
            return opened
        with self._turn_home(turn.iteration) as home:
            for path, data in self._files(str(home), turn, opened).items():
                _write_private(Path(path), data)
            done = run_process(
                launch.build_argv(cli.path, model=opened.model, effort=turn.effort),
                cwd=turn.workspace,
                env=launch.child_env(turn.env, str(home)),
                timeout=turn.deadline_seconds,
                stdin_data=turn.prompt.encode("utf-8"),
                on_stdout_line=opened.decoder.feed,
            )
            recorded = None if opened.decoder.completed else recorded_usage(home / ".codex")
        return opened.verdict(done, cost_usd(opened.model, recorded) if recorded is not None else 0.0)

    def sandbox_command(self, turn: Turn, layout: SandboxLayout) -> SandboxCommand | TurnResult:
        """The turn as a command for a sandboxing backend; the box, not the CLI, is the boundary.

        The CLI is looked up on the sandbox's PATH (or [agent].env's CRUCIBLE_CODEX_BIN); its home
        is the sandbox's, and its config.toml and auth file travel as 0600 files there. Where the
        layout lets files carry secrets (an OpenShell sandbox), the credential is resolved here, on
        the engine host, and seeded in the auth file; where it does not (a task pod's Job), the
        pod's own environment holds the key the config names, and a ChatGPT sign-in is refused
        (its token is minted only by the engine).
        """
        prepare = (lambda: self._prepare(self.host_env)) if layout.carries_secrets else self._pod_credential
        opened = self._open(turn, prepare)
        if isinstance(opened, TurnResult):
            return opened
        cli = turn.env.get(launch.CLI_BIN_ENV) or launch.CLI_NAME
        argv = launch.build_argv(cli, model=opened.model, effort=turn.effort)
        if not layout.carries_secrets:
            argv = ["sh", "-c", _POD_SCRIPT, *argv[:-1]]
        return SandboxCommand(
            argv=tuple(argv),
            env=launch.child_env(turn.env, layout.home),
            stdin=turn.prompt.encode("utf-8"),
            on_stdout_line=opened.decoder.feed,
            finish=opened.verdict,
            files=self._files(layout.home, turn, opened),
        )

    # -- the pieces -----------------------------------------------------------------------------

    def _select(self, env: Mapping[str, str]) -> auth.Selection:
        return auth.select(self.settings.codex, env, chatgpt_material=self.refresher.has_material(env))

    def _prepare(self, env: Mapping[str, str]) -> Prepared | TurnResult:
        """The turn's credential, resolved from `env` on this host (a ChatGPT token minted now)."""
        endpoint = launch.Endpoint(base_url=env.get(launch.BASE_URL_ENV) or None)
        selection = self._select(env)
        if isinstance(selection, auth.ApiKey):
            return Prepared(auth.api_key_file(selection), endpoint, (selection.value,))
        if isinstance(selection, auth.Refused):
            return TurnResult(False, FailureClass.SPAWN, note=selection.reason)
        try:
            minted = self.refresher.mint(env)
        except MintFailed as exc:
            failure = FailureClass.SPAWN if exc.transient else FailureClass.PROVIDER
            return TurnResult(False, failure, note=str(exc))
        data = auth.chatgpt_file(minted.access_token, minted.account_id, minted.id_token)
        return Prepared(data, endpoint, minted.secrets())

    def _pod_credential(self) -> Prepared | TurnResult:
        table = self.settings.codex
        if table.auth == "chatgpt":
            return TurnResult(
                False,
                FailureClass.SPAWN,
                note='a task pod cannot use the ChatGPT sign-in (only the engine mints its tokens): set [agent.codex].auth = "api" '
                f"and give the pods {table.key_variable}",
            )
        return Prepared(None, launch.Endpoint(env_key=table.key_variable), ())

    def _open(self, turn: Turn, prepare: Callable[[], Prepared | TurnResult]) -> _Opened | TurnResult:
        """Everything before the CLI starts: the session rule, the credential, the stream decoder."""
        refused = self._session_refusal(turn)
        if refused is not None:
            return refused
        prepared = prepare()
        if isinstance(prepared, TurnResult):
            return prepared
        self._announce_session(turn)
        hidden = _hidden(prepared, turn)
        model = self.settings.choose_model(turn.model)
        decoder = ExecDecoder(lambda kind, fields: turn.emit(kind, events.mask(fields, hidden)), model)

        def verdict(done: Completed, fallback_cost: float = 0.0) -> TurnResult:
            self._close_session(turn, decoder)
            result = classify(done, decoder, fallback_cost=fallback_cost)
            return attrs.evolve(result, note=events.mask(result.note, hidden))

        return _Opened(prepared, model, decoder, verdict)

    def _files(self, home: str, turn: Turn, opened: _Opened) -> dict[str, bytes]:
        prepared = opened.prepared
        config = launch.config(
            model=opened.model, endpoint=prepared.endpoint, mcp_servers=turn.mcp_servers, effort=turn.effort
        )
        files = {f"{home}/.codex/config.toml": launch.toml_text(config).encode("utf-8")}
        if prepared.auth_file is not None:
            files[f"{home}/.codex/auth.json"] = prepared.auth_file
        return files

    @contextlib.contextmanager
    def _turn_home(self, iteration: int) -> Iterator[Path]:
        home = self.homes.make(iteration)
        try:
            yield home
        finally:
            shutil.rmtree(home, ignore_errors=True)

    def _session_refusal(self, turn: Turn) -> TurnResult | None:
        """The second turn of a logical session is refused: it cannot resume, and must not start afresh."""
        if turn.session and self.marks.used(turn.session):
            return TurnResult(False, FailureClass.AGENT, note=self.marks.refusal(turn.session))
        return None

    def _announce_session(self, turn: Turn) -> None:
        if turn.session:
            turn.emit(events.AGENT_SESSION, {"session": turn.session, "action": "started", "turn": 1})

    def _close_session(self, turn: Turn, decoder: ExecDecoder) -> None:
        if turn.session and decoder.started:
            self.marks.mark(turn.session)


def _hidden(prepared: Prepared, turn: Turn) -> tuple[str, ...]:
    """Every secret the harness handled for this turn: the credential and the MCP servers' headers."""
    values = list(prepared.secrets)
    for server in turn.mcp_servers.values():
        headers = server.get("headers") if isinstance(server, Mapping) else None
        if isinstance(headers, Mapping):
            values += [str(v) for v in headers.values()]
    return tuple(v for v in values if v)


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
