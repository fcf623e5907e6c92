"""Operator commands for a live run: each sends one request over the run's control bridge."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from crucible_core.cli.options import manifest_option, state_dir_option

Handler = Callable[..., dict[str, Any]]


def _send(manifest: Path, state_dir: Path | None, request: dict[str, Any]) -> dict[str, Any]:
    from crucible_core.control.client import send, state_dir_for

    return send(state_dir_for(manifest, state_dir), request)


def _echo_reply(reply: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(reply))
        return
    parts = [f"{reply.get('cmd')}: accepted"]
    if reply.get("key"):
        parts.append(f"key {reply['key']}")
    if reply.get("dup"):
        parts.append("already admitted" + (f", {reply['outcome']}" if reply.get("outcome") else ""))
    if reply.get("unrecorded"):
        parts.append("NOT recorded in the ledger (the run still obeys it)")
    click.echo("; ".join(parts))


def _control_command(
    name: str, cmd: str, doc: str, *extra: Callable[[Any], Any], offline: str | None = None
) -> click.Command:
    """A command that sends `cmd` with its options as the payload, plus --id for idempotency.

    `offline`, when given, replaces the hint of "no run is reachable" with what to do instead.
    """

    def callback(
        manifest: Path, state_dir: Path | None, as_json: bool, id_: str | None, **fields: Any
    ) -> None:
        from crucible_core.control.client import RunUnreachable

        request = {"cmd": cmd, **{k: v for k, v in fields.items() if v is not None}}
        if id_ is not None:
            request["id"] = id_
        try:
            reply = _send(manifest, state_dir, request)
        except RunUnreachable as exc:
            if offline is None:
                raise
            raise RunUnreachable(exc.message, hint=offline) from None
        _echo_reply(reply, as_json)

    callback.__doc__ = doc
    command: Any = callback
    for decorate in reversed(extra):
        command = decorate(command)
    command = click.option("--id", "id_", default=None, help="Idempotency key: redelivery is acted on once.")(
        command
    )
    command = click.option("--json", "as_json", is_flag=True, help="Print the bridge's reply as JSON.")(
        command
    )
    command = state_dir_option(command)
    command = manifest_option(command)
    return click.command(name, help=doc)(command)


_reason = click.option("--reason", default=None, help="Why (recorded in the admission ledger).")

steer = _control_command(
    "steer",
    "steer",
    "Deliver TEXT into the live run's next agent prompt ({{STEER}}).",
    click.argument("text"),
    offline=(
        "no run is live to steer: put the text in STEER.md next to the manifest, and the next "
        "`crucible run --resume` (or a fresh run) delivers it with its first prompt"
    ),
)
stop = _control_command(
    "stop",
    "stop",
    "Stop the live run at its next iteration head (the running turn is finished and judged).",
    _reason,
)
abort = _control_command(
    "abort",
    "abort",
    "Stop the live run now: kill the running turn or measure and restore the last kept state.",
    _reason,
)
pause = _control_command(
    "pause",
    "pause",
    "Park the live run at its next iteration head; the budget clock stops while parked.",
    _reason,
)
unpause = _control_command("unpause", "resume", "Let a paused run continue.", _reason)
approve = _control_command(
    "approve", "approve", "Grant the pending approval: re-baseline in the asked-for regime.", _reason
)
deny = _control_command(
    "deny", "deny", "Refuse the pending approval (a block-mode wait then escalates).", _reason
)
rescope = _control_command(
    "rescope",
    "rescope",
    "Move the live run to REGIME: a new segment with its own baseline.",
    click.argument("regime"),
)
budget = _control_command(
    "budget",
    "set-budget",
    "Change the live run's budget; iterations count from the start of the run.",
    click.option("--iterations", type=click.IntRange(min=0), default=None, help="Total agent turns."),
    click.option("--max-cost", type=click.FloatRange(min=0), default=None, help="USD."),
    click.option("--max-time", default=None, help="Active wall-clock (90s, 15m, 2h)."),
)


@click.command("status")
@manifest_option
@state_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status(manifest: Path, state_dir: Path | None, as_json: bool) -> None:
    """Show where the live run stands; with no live run, what its session log says (`crucible show`)."""
    from crucible_core.errors import ControlError

    try:
        reply = _send(manifest, state_dir, {"cmd": "status"})
    except ControlError as exc:
        from crucible_core.cli.show_cmd import session_path, show_log

        log = session_path(manifest, state_dir, None)
        if not log.is_file():
            raise
        if not as_json:
            click.echo(f"no live run answers ({exc.message}); from the session log {log}:")
        show_log(log, as_json)
        return
    st = reply.get("status") or {}
    if as_json:
        click.echo(json.dumps(st))
        return
    budget_wire = st.get("budget") or {}
    click.echo(
        f"phase {st.get('phase')} at iteration {st.get('iter')}"
        + (f" ({st['step']})" if st.get("step") else "")
    )
    click.echo(
        f"best {st.get('best')} (baseline {st.get('baseline')}); {st.get('kept', 0)} kept, {st.get('discarded', 0)} discarded"
    )
    click.echo(f"spent ${st.get('spent', 0)}; budget {budget_wire}")
    if st.get("regime"):
        click.echo(f"segment {st.get('segment')} regime {st.get('regime')}")
    if st.get("paused"):
        click.echo("paused by the operator (`crucible unpause` continues)")
    if st.get("approval"):
        a = st["approval"]
        if a.get("handle") == "distress":
            from crucible_core.control.client import state_dir_for

            marker = state_dir_for(manifest, state_dir) / "distress" / "distress"
            click.echo(f"suspended by the agent's distress call: read {marker}, then delete it")
            click.echo("  (or `crucible approve`) to resume, or `crucible stop`")
        else:
            click.echo(f"approval pending ({a.get('mode')}): {a.get('trace_id')} {a.get('handle')}")
