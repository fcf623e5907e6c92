"""Operator commands for a live run: each sends one request over the run's control bridge."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from crucible_core.cli.options import budget_cap, manifest_option, state_dir_option
from crucible_core.control.orders import ORDERS, Payload

if TYPE_CHECKING:
    from crucible_core.flow.model import FlowModel

Handler = Callable[..., dict[str, Any]]


def _send(
    manifest: Path, state_dir: Path | None, request: dict[str, Any], name: str | None = None
) -> dict[str, Any]:
    from crucible_core.control.client import send, state_dir_for

    return send(state_dir_for(manifest, state_dir), request, name=name)


def _echo_reply(name: str, reply: dict[str, Any], as_json: bool) -> None:
    """The bridge's reply in the words of the command the operator typed (`unpause`, not `resume`)."""
    if as_json:
        click.echo(json.dumps(reply))
        return
    parts = [f"{name}: accepted"]
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
            reply = _send(manifest, state_dir, request, name)
        except RunUnreachable as exc:
            if offline is None:
                raise
            raise RunUnreachable(exc.message, hint=offline) from None
        _echo_reply(name, reply, as_json)

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

_PAYLOAD_OPTIONS: dict[Payload, tuple[Any, ...]] = {
    Payload.REASON: (_reason,),
    Payload.TEXT: (click.argument("text"),),
    Payload.REGIME: (click.argument("regime"),),
    Payload.BUDGET: (
        click.option(
            "--iterations",
            metavar="N",
            callback=budget_cap("iterations"),
            default=None,
            help="Total agent turns.",
        ),
        click.option("--max-cost", metavar="USD", callback=budget_cap("max_cost"), default=None, help="USD."),
        click.option("--max-time", default=None, help="Active wall-clock (90s, 15m, 2h)."),
    ),
}
# One command per operator order, from the table every part of the core reads (control/orders.py).
OPERATOR_COMMANDS = {
    order.command: _control_command(
        order.command, order.name, order.help, *_PAYLOAD_OPTIONS[order.payload], offline=order.offline
    )
    for order in ORDERS
}
steer = OPERATOR_COMMANDS["steer"]
stop = OPERATOR_COMMANDS["stop"]
abort = OPERATOR_COMMANDS["abort"]
pause = OPERATOR_COMMANDS["pause"]
unpause = OPERATOR_COMMANDS["unpause"]
approve = OPERATOR_COMMANDS["approve"]
deny = OPERATOR_COMMANDS["deny"]
rescope = OPERATOR_COMMANDS["rescope"]
budget = OPERATOR_COMMANDS["budget"]


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
    model = _task_run(manifest, state_dir)
    if as_json:
        from crucible_core.flow.task_view import task_document

        # a playbook or a plan file: what its log says so far rides along, under `log`
        click.echo(json.dumps(st if model is None else {**st, "log": task_document(model)}))
        return
    from crucible_core.contract.plain_text import plain

    for line in status_lines(st) if model is None else task_status_lines(st, model):
        click.echo(plain(line))  # the regime and the approval handle are the agent's words
    approval = st.get("approval") or {}
    if approval.get("handle") == "distress":
        from crucible_core.control.client import state_dir_for

        marker = state_dir_for(manifest, state_dir) / "distress" / "distress"
        click.echo(f"read {marker}, then delete it (or `crucible approve`) to resume, or `crucible stop`")


def _task_run(manifest: Path, state_dir: Path | None) -> FlowModel | None:
    """The live run's log folded, when it is a playbook's or a plan file's (None for a loop)."""
    from crucible_core.cli.show_cmd import session_path
    from crucible_core.contract.run_kind import RunKind
    from crucible_core.flow.decode import read_kind, read_session
    from crucible_core.flow.fold import fold_flow

    log = session_path(manifest, state_dir, None)
    try:
        if not log.is_file() or read_kind(log) is RunKind.LOOP:
            return None
        return fold_flow(read_session(log))
    except OSError:
        return None  # the bridge answered; a log we cannot read leaves the loop's words


_STEP_WORDS = {
    "propose": "the agent is proposing a change",
    "apply": "applying the candidate",
    "measure": "measuring the candidate",
    "decide": "deciding keep or discard",
}


def _score(value: Any) -> str:
    if value is None:
        return "none yet"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def where_line(st: dict[str, Any]) -> str:
    """Where the run is, in words: the phase, the iteration and what it is doing."""
    phase, it = st.get("phase"), st.get("iter", 0)
    total = (st.get("budget") or {}).get("iterations")
    of = f" of {total}" if total else ""
    if st.get("paused"):
        return f"paused by the operator after iteration {it}{of}; `crucible unpause` continues"
    if phase == "iteration":
        doing = _STEP_WORDS.get(st.get("step") or "", "starting the turn")
        return f"running iteration {it}{of}: {doing}"
    if phase == "baseline":
        return "measuring the baseline" + (f" again at iteration {it} (a new segment)" if it else "")
    if phase == "parked":
        return f"waiting for an approval after iteration {it}{of}"
    if phase == "distressed":
        return f"suspended by the agent's distress call after iteration {it}{of}"
    if phase == "finished":
        return f"finished after iteration {it}"
    if phase == "starting":
        return f"starting: resuming after iteration {it}" if it else "starting: setting up the workspace"
    return f"{phase} at iteration {it}"


def status_lines(st: dict[str, Any]) -> list[str]:
    """`crucible status` for a person: where the run is, how it is doing, what it may still spend."""
    from crucible_core.run.budget import describe_caps

    lines = [where_line(st)]
    best = f"best {_score(st.get('best'))} (baseline {_score(st.get('baseline'))})"
    lines.append(f"{best}; {st.get('kept', 0)} kept, {st.get('discarded', 0)} discarded")
    lines.append(f"spent ${float(st.get('spent') or 0):.4f}; budget {describe_caps(st.get('budget') or {})}")
    if st.get("regime"):
        lines.append(f"segment {st.get('segment')}, regime {st.get('regime')}")
    return lines + _approval_lines(st)


def _approval_lines(st: dict[str, Any]) -> list[str]:
    approval = st.get("approval") or {}
    if not approval or approval.get("handle") == "distress":
        return []
    return [
        f"approval pending ({approval.get('mode')}): {approval.get('handle') or approval.get('trace_id')}; "
        "`crucible approve` or `crucible deny` answers it"
    ]


def task_status_lines(st: dict[str, Any], model: FlowModel) -> list[str]:
    """`crucible status` for a live playbook or plan: how far its graph is, its spend, and every
    task as its log has it so far (flow/task_view.py), in place of a loop's iterations and scores."""
    from crucible_core.flow.task_view import task_table
    from crucible_core.run.budget import describe_caps

    kind = model.header.kind
    settled = sum(1 for task in model.plan if task.status != "pending")
    progress = f"{settled} of {len(model.plan)} tasks settled"
    if st.get("paused"):
        where = f"{kind} paused by the operator ({progress}); `crucible unpause` continues"
    else:
        phase = st.get("phase")
        where = f"{kind} {phase if phase not in (None, '', 'iteration') else 'running'}: {progress}"
    spent = float(st["spent"]) if isinstance(st.get("spent"), int | float) else model.header.spent_usd
    budget = f"; budget {describe_caps(st['budget'])}" if st.get("budget") else ""
    return [where, f"spent ${spent:.4f}{budget}", *_approval_lines(st), *task_table(model)]
