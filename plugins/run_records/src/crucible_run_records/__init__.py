"""crucible-plugin-run-records: a run's record (its log, summary, diffs and artifacts) written to
`s3://bucket[/prefix]` or `file:///abs/path`, and `crucible fetch` to read one back.

The destination is `crucible run --results-bucket URI` (core passes it on as the engine
environment's RESULTS_ENV) or, failing that, `[publish].record`. At `crucible_run_start` the run's
one `run-record` write is asked of the mediation point (the broker's mediator, as publish-on-keep
asks for its draft-pr), then a RecordWriter (writer.py) follows the session log's events: each
`crucible_commit_kept` asks for a write, `crucible_run_end` for the end-of-run write (bounded),
and the log's `shutdown` line for the last one, so the recorded log is the whole log. The layout
is layout.py's, the same for both schemes (destination.py). A destination that fails or hangs
costs a warning note, never the run.

Other plugins add files to the record through `add_artifact` and link to it through
`record_address` (both keyed by run id; both answer for a run without a record, too).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from crucible_core.api import Deferred, hookimpl

if TYPE_CHECKING:
    import click

    from crucible_core.api import Collected, KeptCommit, OutputKindSpec, Register, RunContext, RunEnd
    from crucible_run_records.writer import RecordWriter

# The engine-environment variable `crucible run --results-bucket` sets (and a user may export).
RESULTS_ENV = "CRUCIBLE_RESULTS_BUCKET"
OUTPUT_KIND = "run-record"
BY = "run-records"  # the admission event's `tool`: who asked for the write

# One record per loop run this process drives, keyed by run id (tests drive several).
_writers: dict[str, RecordWriter] = {}
# The run whose session events the writer follows: one run at a time per process, as the log's
# observers are (the start line of the next run replaces it).
_following: list[RecordWriter] = []


def add_artifact(run_id: str, name: str, data: bytes) -> bool:
    """Add `data` to run `run_id`'s record as `artifacts/<name>` (a plain relative name, nested
    folders allowed), written with the record's next write. False when the run has no record."""
    writer = _writers.get(run_id)
    if writer is None:
        return False
    writer.add_artifact(name, data)
    return True


def record_address(run_id: str) -> str | None:
    """The address of run `run_id`'s record folder (`s3://...`, `file:///...`), or None without one."""
    writer = _writers.get(run_id)
    return str(writer.address) if writer is not None else None


def _record_kind() -> OutputKindSpec:
    from crucible_core.api import OutputKindSpec

    return OutputKindSpec(
        OUTPUT_KIND,
        "the run's record (session log, summary, diffs, artifacts) written to its results destination",
        default_count=1,
        default_target_env=RESULTS_ENV,
    )


@hookimpl
def crucible_register_output_kinds(register: Register[OutputKindSpec]) -> None:
    register(OUTPUT_KIND, Deferred(_record_kind))


@hookimpl
def crucible_engine_credentials() -> tuple[str, ...]:
    """The record store's keys boto3 reads: the engine writes the record, an agent turn never sees them."""
    return ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")


@hookimpl
def crucible_register_commands(register: Register[click.Command]) -> None:
    register("fetch", Deferred("crucible_run_records.fetch:command"))


def destination_text(context: RunContext) -> str | None:
    """The results destination this run names: the run flag's, else `[publish].record`."""
    flag = (context.engine_env.get(RESULTS_ENV) or "").strip()
    if flag:
        return flag
    publish = context.manifest.manifest.publish if context.manifest is not None else None
    record = getattr(publish, "record", None)
    return record.strip() if isinstance(record, str) and record.strip() else None


@hookimpl
def crucible_run_start(context: RunContext) -> None:
    _following.clear()
    text = destination_text(context)
    if text is None:
        return
    from crucible_core.api import OutputRefused, read_events
    from crucible_run_records.destination import open_store, parse_address
    from crucible_run_records.writer import RecordWriter

    destination = parse_address(text)  # a malformed address refuses the run before any turn
    if context.broker is None:
        context.note(
            f"the run record for {text} is not written: a write leaving the machine needs the "
            "broker's mediation point (crucible-plugin-broker-mcp), which this run has not",
            "warn",
        )
        return
    recorded = list(read_events(context.session_log))  # a resumed run's earlier rows, and the start
    if not _admitted_before(recorded, text):  # a resume keeps the destination its run was granted
        try:
            admitted = context.broker.admit(OUTPUT_KIND, text, by=BY)
        except OutputRefused as exc:
            context.note(f"the run record is not written: {exc.violation.message}", "warn")
            return
        if admitted is not None and admitted != text:
            destination = parse_address(admitted)
    env = dict(context.engine_env)
    writer = RecordWriter(
        destination.child(context.run_id),
        functools.partial(open_store, destination.child(context.run_id), env),
        context.session_log,
    )
    for event in recorded:
        writer.add(event)
    _writers[context.run_id] = writer
    _following.append(writer)
    context.note(f"run record: {writer.address}", "info")


def _admitted_before(events: list[dict[str, Any]], text: str) -> bool:
    """Whether the recorded run was already granted its record at `text` (its log says so)."""
    return any(
        e.get("kind") == "output_admitted"
        and e.get("output_kind") == OUTPUT_KIND
        and e.get("tool") == BY
        and e.get("target") == text
        for e in events
    )


@hookimpl
def crucible_session_event(event: Mapping[str, Any]) -> None:
    if not _following:
        return
    writer = _following[0]
    writer.add(event)
    if event.get("kind") == "shutdown":
        _following.clear()
        _last_write(writer)


@hookimpl
def crucible_commit_kept(kept: KeptCommit) -> None:
    writer = _writers.get(kept.run.run_id)
    if writer is None:
        return
    if kept.artifacts is not None:
        _add_artifacts(writer, kept.artifacts)
    writer.request(with_log=True)  # written by the writer's thread: the loop goes on at once
    for text in writer.take_warnings():
        kept.run.note(text, "warn")


def _add_artifacts(writer: RecordWriter, collected: Collected) -> None:
    """The declared artifacts' staged copies (never the agent's own files) into `artifacts/`."""
    from crucible_core.api import record_files

    for name, staged in record_files(collected):
        try:
            writer.add_artifact(name, staged.read_bytes())
        except OSError as exc:
            writer.warn(f"artifact {name} could not be read for the run record: {exc}")


@hookimpl
def crucible_run_end(end: RunEnd) -> None:
    writer = _writers.get(end.run.run_id)
    if writer is None:
        return
    if end.artifacts is not None:
        _add_artifacts(writer, end.artifacts)
    writer.add({"kind": "shutdown", "outcome": end.outcome, "reason": end.reason})
    from crucible_run_records import writer as writer_module

    writer.final_pending = writer.wait(writer.request(with_log=True), writer_module.END_SECONDS)
    if not writer.final_pending:
        writer.warn(
            f"the run record at {writer.address} was not written within {writer_module.END_SECONDS:g} s; "
            "the run goes on without it"
        )
    for text in writer.take_warnings():
        end.run.note(text, "warn")


def _last_write(writer: RecordWriter) -> None:
    """After the log's last line: the record's log becomes the whole log (when the end write went
    through; a destination that failed it is not waited for twice)."""
    _writers.pop(next((k for k, w in _writers.items() if w is writer), ""), None)
    if writer.final_pending:
        writer.finish()
    else:
        writer.close()
    for text in writer.take_warnings():  # the log is closed: a person reads these on stderr
        print(f"crucible: warning: {text}", file=sys.stderr)
