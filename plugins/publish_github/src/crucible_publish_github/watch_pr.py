"""`crucible watch-pr`: review comments on a run's draft pull requests steer the live run or reseed the next one.

Each poll reads every comment of every `--pr` (review_comments.py), judges each one
(review_steering.py) and acts on the allowed ones exactly once: `--control-addr` sends a steer
to the live run's control bridge under the comment's idempotency key, so even a watcher that
lost its memory cannot steer twice; `--reseed PATH` appends the comment to a file the next run's
first turn reads (the run's STEER.md: the loop reads that file into its first prompt and clears
what it delivered). What was acted on and what was refused is kept in a state file
(watch_state.py), written after each comment.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Protocol

import attrs
import click

from crucible_core.api import (
    AgentFileRefused,
    ControlError,
    RunUnreachable,
    UsageError,
    WorkspaceError,
    manifest_option,
    plain,
    read_control,
    read_regular,
    send_control,
    state_dir_for,
)
from crucible_publish_github.review_comments import Forge, ForgeError, PullRef, parse_pull_ref
from crucible_publish_github.review_steering import Verdict, comment_key, judge, steer_text
from crucible_publish_github.watch_state import WatchState, held

TOKEN_ENV = "CRUCIBLE_CONTROL_TOKEN"
DEFAULT_POLL_SECONDS = 20.0
STATE_FILE_NAME = "watch-pr.json"
# The loop reads at most this much of STEER.md and ignores a longer file (run/gates.py's
# MAX_STEER_BYTES): the reseed file is never grown past it.
MAX_RESEED_BYTES = 256 * 1024

Echo = Callable[[str], None]


class Sink(Protocol):
    """Where an allowed comment's text goes; `deliver` says what happened, in words."""

    name: str

    def deliver(self, key: str, text: str) -> str: ...


@attrs.define
class BridgeSink:
    """A live run's control bridge: one steer per comment, the comment's key as the bridge's `id`."""

    address: tuple[str, int]
    token: Callable[[], str]
    name: str = "steer"

    def deliver(self, key: str, text: str) -> str:
        try:
            reply = send_control(
                self.address, self.token(), {"cmd": "steer", "text": text, "id": key}, "steer"
            )
        except RunUnreachable:
            raise
        except ControlError as exc:
            if "idempotency conflict" in exc.message:
                # the comment was edited after an earlier watcher steered with its first text
                return "already steered (with the comment's earlier text)"
            raise
        if reply.get("dup"):
            return "already admitted by the run" + (f", {reply['outcome']}" if reply.get("outcome") else "")
        return f"steered the live run (key {plain(reply.get('key', key))[:300]})"


@attrs.define
class ReseedSink:
    """A file the next run's first turn reads: each comment appended once, under a marker naming its key."""

    path: Path
    name: str = "reseed"

    def deliver(self, key: str, text: str) -> str:
        marker = f"<!-- crucible watch-pr {key} -->"
        current = self._read()
        if marker in current:  # appended before a crash kept the state file from saying so
            return f"already in {self.path}"
        lead = "" if not current else ("\n" if current.endswith("\n") else "\n\n")
        entry = f"{lead}{marker}\n{text}\n".encode()
        if len(current.encode()) + len(entry) > MAX_RESEED_BYTES:
            raise WorkspaceError(
                f"{self.path} would grow past {MAX_RESEED_BYTES} bytes, more than a run reads",
                hint="start the next run to deliver what it holds, then restart the watcher",
            )
        # appended in one write, through no link, never waiting on a FIFO: the file is the next
        # run's to read and clear
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            fd = os.open(self.path, flags, 0o600)
        except OSError as exc:
            raise WorkspaceError(f"cannot append to the reseed file {self.path}: {exc}") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise WorkspaceError(f"the reseed file {self.path} is not a regular file")
            os.write(fd, entry)
        finally:
            os.close(fd)
        return f"appended to {self.path}"

    def _read(self) -> str:
        try:
            return read_regular(self.path, MAX_RESEED_BYTES).decode("utf-8", "replace")
        except FileNotFoundError:
            return ""
        except AgentFileRefused as exc:
            raise WorkspaceError(
                f"the reseed file {self.path} cannot be appended to: {exc}",
                hint="point --reseed at a regular file (the next run's STEER.md)",
            ) from None


@attrs.frozen
class Policy:
    bot: str
    allowed: frozenset[str]  # lower-cased


@attrs.define
class Tally:
    acted: int = 0
    refused: int = 0
    skipped: int = 0


def parse_address(text: str) -> tuple[str, int]:
    """`HOST:PORT` (or `[::1]:PORT`) on this machine: the bridge listens on loopback only, and its
    token must not cross a network; a remote run's bridge is reached through a port forward."""
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or not host:
        raise UsageError(
            f"--control-addr {text[:100]!r} is not HOST:PORT", hint="for example 127.0.0.1:41234"
        )
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise UsageError(
            f"--control-addr {host[:100]!r} is not this machine",
            hint="a run's bridge listens on 127.0.0.1; reach a remote one through a port forward",
        )
    return host, int(port)


def bridge_token(state_dir: Path, env: Mapping[str, str]) -> Callable[[], str]:
    """The bridge's token: $CRUCIBLE_CONTROL_TOKEN, else the run's control.json, read at each steer
    (a resumed run has a new one)."""

    def token() -> str:
        if env.get(TOKEN_ENV):
            return env[TOKEN_ENV]
        found = read_control(state_dir).get("token")
        if not isinstance(found, str) or not found:
            raise ControlError(f"{state_dir / 'control.json'} holds no token", hint=f"set {TOKEN_ENV}")
        return found

    return token


def poll_once(
    forge: Forge, pulls: list[PullRef], sink: Sink, state: WatchState, policy: Policy, echo: Echo
) -> Tally:
    """One pass over every pull request's comments; raises ForgeError or ControlError for the caller."""
    tally = Tally()
    for pull in pulls:
        for comment in forge.comments(pull):
            key = comment_key(pull, comment)
            verdict, why = judge(comment, key, acted=state.acted, bot=policy.bot, allowed=policy.allowed)
            who = f"@{plain(comment.login)[:60] or '(unknown)'}"
            if verdict is Verdict.DONE:
                continue
            if verdict is Verdict.SKIP:
                tally.skipped += 1
                continue
            if verdict is Verdict.REFUSE:
                tally.refused += 1
                if key not in state.refused:
                    state.record_refused(key, user=comment.login[:100], why=why)
                    echo(f"watch-pr: refused {key} from {who}: {why}")
                continue
            outcome = sink.deliver(key, steer_text(pull, comment))
            state.record_acted(key, user=comment.login, sink=sink.name)
            tally.acted += 1
            echo(f"watch-pr: {key} from {who}: {outcome}")
    return tally


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM ends a polling watcher as Ctrl-C does: between comments, with its state saved.

    SIGINT gets the same handler explicitly: a process started from a background job inherits
    SIGINT ignored, and Python then never raises KeyboardInterrupt for it."""

    def interrupt(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    try:
        previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    except ValueError:  # not the main thread: Ctrl-C is the only way out
        yield
        return
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def watch(
    forge: Forge,
    pulls: list[PullRef],
    sink: Sink,
    state: WatchState,
    policy: Policy,
    *,
    once: bool,
    poll_seconds: float,
    echo: Echo,
) -> None:
    """Poll until interrupted (or once). A forge or a run that is away is asked again at the next
    poll; a refusal that asking again cannot change ends the watcher with its exit code."""
    while True:
        try:
            tally = poll_once(forge, pulls, sink, state, policy, echo)
        except ForgeError as exc:
            if once or exc.lasting:
                raise
            echo(f"watch-pr: {exc.render()}; asking again in {poll_seconds:g}s")
        except RunUnreachable as exc:
            if once:
                raise
            echo(f"watch-pr: {exc.message}; asking again in {poll_seconds:g}s")
        else:
            if once:
                echo(
                    f"watch-pr: {tally.acted} acted on, {tally.refused} refused, "
                    f"{tally.skipped} skipped; state in {state.path}"
                )
                return
        time.sleep(poll_seconds)


@click.command("watch-pr")
@click.option(
    "--pr",
    "prs",
    multiple=True,
    required=True,
    metavar="URL",
    help="A draft pull request to watch (repeatable).",
)
@click.option("--control-addr", metavar="HOST:PORT", help="Steer the live run whose control bridge is here.")
@click.option(
    "--reseed",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Append to this file instead (the next run's STEER.md), for its first turn.",
)
@click.option("--once", is_flag=True, help="Read the comments once and exit instead of polling.")
@click.option(
    "--poll-secs",
    type=click.FloatRange(min=0.1),
    default=DEFAULT_POLL_SECONDS,
    show_default=True,
    help="Seconds between reads.",
)
@click.option(
    "--bot-user", metavar="LOGIN", default="", help="The publisher's login: its comments are skipped."
)
@click.option(
    "--allow-user",
    "allow_users",
    multiple=True,
    metavar="LOGIN",
    help="Only these logins steer (repeatable); without it, those GitHub says have write access.",
)
@click.option(
    "--state-file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help=f"What was acted on and refused (default: {STATE_FILE_NAME} beside the manifest).",
)
@manifest_option
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help=f"The run's state directory, whose control.json holds the bridge's token (unless ${TOKEN_ENV} is set).",
)
def command(
    prs: tuple[str, ...],
    control_addr: str | None,
    reseed: Path | None,
    once: bool,
    poll_secs: float,
    bot_user: str,
    allow_users: tuple[str, ...],
    state_file: Path | None,
    manifest: Path,
    state_dir: Path | None,
) -> None:
    """Act on review comments on a run's draft pull requests.

    Each comment from an allowed user is acted on once: with --control-addr it steers the live
    run (its next prompt carries it, fenced as a reviewer's suggestion); with --reseed it is
    appended to a file the next run's first turn reads. The bot's own comments are skipped;
    everyone else's are refused and recorded. The forge is $CRUCIBLE_GITHUB_API, else
    $GITHUB_API_URL, else api.github.com; the token is $GITHUB_TOKEN or $GH_TOKEN.
    """
    if (control_addr is None) == (reseed is None):
        raise UsageError(
            "give exactly one of --control-addr and --reseed", hint="see `crucible watch-pr --help`"
        )
    pulls = list(dict.fromkeys(parse_pull_ref(pr) for pr in prs))
    env = dict(os.environ)
    sink: Sink
    if control_addr is not None:
        sink = BridgeSink(parse_address(control_addr), bridge_token(state_dir_for(manifest, state_dir), env))
    else:
        assert reseed is not None
        sink = ReseedSink(reseed)
    path = state_file or manifest.resolve().parent / STATE_FILE_NAME
    policy = Policy(bot_user, frozenset(login.lower() for login in allow_users))
    with held(path):
        state = WatchState.load(path)
        if not once:
            where = f"the run at {control_addr}" if control_addr else str(reseed)
            click.echo(f"watch-pr: watching {', '.join(map(str, pulls))} for {where}; Ctrl-C stops")
        try:
            with _terminate_as_interrupt():
                watch(
                    Forge(env), pulls, sink, state, policy, once=once, poll_seconds=poll_secs, echo=click.echo
                )
        except KeyboardInterrupt:
            click.echo(f"watch-pr: stopped; state in {path}")
