"""The console's words: fixed-width progress lines, operator actions, and the end summary (pure).

Every string from the log passes through `plain` (agent and measure text must not drive a
terminal) and is cut at a word boundary. Columns are sized from the run's iteration total, so
they hold still from the first iteration to the last.
"""

from __future__ import annotations

import codecs
from typing import Any

from crucible_core.contract import wire
from crucible_core.contract.noise import note_with_margin
from crucible_core.contract.plain_text import plain
from crucible_core.contract.run_kind import verdict_word
from crucible_core.durations import short_duration
from crucible_core.flow.figures import improvement_pct, output_text
from crucible_core.flow.task_view import NAME_WIDTH, roles_of, tally, task_time
from crucible_core.reporters.console_view import ConsoleView, row_label
from crucible_core.reporters.sparkline import sparkline
from crucible_core.run.budget import describe_caps

NOTE_WIDTH = 60  # characters of a row's note
MESSAGE_WIDTH = 160  # characters of a note event
DECISION_WIDTH = 8  # "baseline", the longest decision the loop writes
SCORE_WIDTH = 10
ELAPSED_WIDTH = 6  # "59m59s"
SPARK_WIDTH = 40


def unicode_ok(stream: Any) -> bool:
    """Whether `stream` can print the sparkline's blocks and the ellipsis."""
    encoding = getattr(stream, "encoding", None)
    if encoding is None:  # a text buffer in memory holds any character
        return True
    try:
        codecs.encode("▁█…", encoding)
    except (UnicodeError, LookupError):
        return False
    return True


def show_number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def shorten(text: str, width: int, *, ellipsis: str = "…") -> str:
    """`text` on one line, at most `width` characters, cut at a word boundary when it is cut."""
    flat = " ".join(plain(text).split())
    if len(flat) <= width:
        return flat
    room = max(1, width - len(ellipsis))
    cut = flat[: room + 1]
    space = cut.rfind(" ")
    # a single word longer than the room is cut where it must be
    head = cut[:space] if space > 0 else flat[:room]
    return head.rstrip(" ,;:.-") + ellipsis


def stamp(view: ConsoleView, at: float) -> str:
    """The run's active time at `at`, in a column of fixed width (blank while it is not known)."""
    shown = short_duration(view.elapsed(at)) if view.clock_known else ""
    return f"[{shown:>{ELAPSED_WIDTH}}]"


def iteration_column(view: ConsoleView, iteration: int) -> str:
    width = view.width
    total = f"/{view.total:<{width}}" if view.total else ""
    return f"iter {iteration:>{width}}{total}"


def row_line(view: ConsoleView, row: wire.RowWire, at: float, *, ellipsis: str = "…") -> str:
    label = row_label(row)
    note = row.note
    if label == "discard":
        note = note_with_margin(
            note, score=row.score, best=row.best, margin=row.margin, direction=view.direction or "higher"
        )
    note = shorten(note, NOTE_WIDTH, ellipsis=ellipsis)
    if row.phase:
        note = f"[{row.phase}] {note}".rstrip()
    line = (
        f"{stamp(view, at)} {iteration_column(view, row.iter)} {label:<{DECISION_WIDTH}} "
        f"score {show_number(row.score):<{SCORE_WIDTH}} best {show_number(view.best):<{SCORE_WIDTH}} {note}"
    )
    return line.rstrip()


def task_line(view: ConsoleView, ev: wire.TaskResult, at: float, *, ellipsis: str = "…") -> str:
    """One settled task of a playbook or a plan file: its status, time, note and output."""
    width = min(max((len(t.name) for t in view.tasks), default=4), NAME_WIDTH)
    admitted = next((t for t in view.tasks if t.name == ev.task), None)
    tags = "".join(f"[{tag}] " for tag in roles_of(admitted.stage, admitted.required)) if admitted else ""
    words = [shorten(ev.note, NOTE_WIDTH, ellipsis=ellipsis)] if ev.note else []
    if ev.output is not None:
        words.append("out " + shorten(output_text(ev.output), NOTE_WIDTH, ellipsis=ellipsis))
    time = task_time(ev.secs) if ev.attempts else "-"
    name = shorten(ev.task, width, ellipsis=ellipsis)
    line = (
        f"{stamp(view, at)} task {name:<{width}} {plain(ev.status):<12} {time:>7}  {tags}{'; '.join(words)}"
    )
    return line.rstrip()


def start_line(ev: wire.Start) -> str:
    backend = ev.backend or "?"
    if ev.harness:
        backend += f" ({ev.harness}{', ' + ev.model if ev.model else ''})"
    caps = (
        ev.budget
        if ev.budget is not None
        else {
            "iterations": ev.iters_total or None,
            "max_cost": ev.max_cost or None,
            "max_time": ev.max_secs or None,
        }
    )
    return (
        f"crucible {ev.version or ''}: {'resuming ' if ev.resumed else ''}{ev.gate} "
        f"({ev.direction or 'task lane'}), backend {backend}{f', world {ev.world}' if ev.world else ''}; "
        f"budget {describe_caps(caps)}"
    )


# The kinds `event_lines` can print a line for (the end's lines come from the view).
# The rare kinds by their wire names: naming their classes would define them all.
PRINTED_KINDS = frozenset(
    [
        *(cls.KIND for cls in (wire.Start, wire.Row, wire.Note, wire.Segment)),
        "task_result",
        "plan_admitted",
        "steer",
        "approval_wait",
        "approval_resolved",
        "escalation",
        "recovery",
    ]
)


def event_lines(view: ConsoleView, line: wire.Line, at: float, *, ellipsis: str = "…") -> list[str]:
    """What the console prints for one event, after `view` folded it. The end is `end_lines`."""
    ev = line.event

    def said(text: str) -> list[str]:
        return [f"{stamp(view, at)} {shorten(text, MESSAGE_WIDTH, ellipsis=ellipsis)}"]

    if isinstance(ev, wire.Start):
        return [start_line(ev)]
    if isinstance(ev, wire.Row):
        return [row_line(view, ev.row, at, ellipsis=ellipsis)]
    if isinstance(ev, wire.Note):
        level = ev.level or "info"
        return said(ev.msg if level == "info" else f"{level}: {ev.msg}")
    if isinstance(ev, wire.Segment) and ev.reason == "rescope":
        return said(
            f"re-scoped to regime {ev.regime or '(none)'}: segment {ev.index}, measuring its baseline"
        )
    if ev.KIND not in wire.RARE_KINDS:  # the checks below name rare classes: asked only of their events
        return []
    if isinstance(ev, wire.TaskResult) and view.is_task_run and ev.iter == 0:
        return [task_line(view, ev, at, ellipsis=ellipsis)]
    if isinstance(ev, wire.PlanAdmitted) and view.is_task_run:
        return said(f"{view.kind}: {len(ev.tasks)} task(s) admitted")
    if isinstance(ev, wire.Steer):
        return said(f"steer delivered to iteration {ev.iter}")
    if isinstance(ev, wire.ApprovalWait):
        if ev.handle == "distress":
            return said(f"suspended by the agent's distress call: {ev.reason or 'no reason given'}")
        return said(
            f"approval {ev.handle or ev.trace_id} requested ({ev.mode}): {ev.reason or ev.regime or ''}"
        )
    if isinstance(ev, wire.ApprovalResolved):
        return said(f"approval {ev.handle or ev.trace_id or ''} {ev.outcome}: {ev.reason}")
    if isinstance(ev, wire.Escalation):
        return said(f"escalated ({ev.category}): {ev.reason}")
    if isinstance(ev, wire.Recovery):
        if ev.cls is wire.RecoveryClass.CLEAN_EXIT:  # its iteration is always 0: say how it ended
            return said(f"the previous process ended cleanly: {ev.detail}")
        return said(f"the previous process ended: {ev.cls.value.replace('_', ' ')} (iteration {ev.iter})")
    return []


def summary_line(view: ConsoleView) -> str:
    """Best against baseline, the counts, spend and active time."""
    gain = improvement_pct(view.baseline, view.best, view.direction or "higher")
    versus = f"baseline {show_number(view.baseline)}" + (f", {gain:+.1f}%" if gain is not None else "")
    invalid = f" ({view.invalid} invalid)" if view.invalid else ""
    return (
        f"best {show_number(view.best)} ({versus}); {view.kept} kept, {view.discarded} discarded{invalid}; "
        f"${view.spent:.4f} spent; {short_duration(active_time(view))} active"
    )


def task_summary_line(view: ConsoleView) -> str:
    """A playbook's or a plan's summary: its verdict, its tasks' statuses, spend and active time."""
    active = (
        f"; {short_duration(active_time(view))} active" if view.started else ""
    )  # a plan file has no clock
    return (
        f"{view.kind} {verdict_word(view.kind, view.verdict())}: {tally(view.statuses())}; "
        f"${view.spent:.4f} spent{active}"
    )


def active_time(view: ConsoleView) -> float:
    """The run's active seconds at its end: the summary's own figure when it carries one."""
    if view.summary is not None and view.summary.active_s is not None:
        return view.summary.active_s
    return view.elapsed(view.last_ts if view.last_ts is not None else 0.0)


def spark_line(view: ConsoleView, *, ascii_only: bool = False) -> str | None:
    """The best score over the iterations as one line, or None before any valid best."""
    drawn = sparkline(view.best_history, width=SPARK_WIDTH, ascii_only=ascii_only)
    if not drawn.strip():
        return None
    first = next((v for v in view.best_history if v is not None), None)
    arrow = "->" if ascii_only else "→"
    return f"best by iteration  {drawn}  {show_number(first)} {arrow} {show_number(view.best)}"


def end_lines(view: ConsoleView, *, ascii_only: bool = False) -> list[str]:
    """The console's closing lines: the summary, the sparkline, how the run ended."""
    lines = []
    if view.is_task_run:
        lines.append(task_summary_line(view))
    elif view.summary is not None:
        lines.append(summary_line(view))
        spark = spark_line(view, ascii_only=ascii_only)
        if spark:
            lines.append(spark)
    if view.shutdown is not None:
        lines.append(f"run ended: {view.shutdown.outcome} ({view.shutdown.reason})")
    return lines


def headless_line(view: ConsoleView) -> str:
    """Headless runs end with exactly one line: the outcome, and the summary when there is one."""
    shutdown = view.shutdown
    outcome = f"run ended: {shutdown.outcome} ({shutdown.reason})" if shutdown else "run ended"
    if view.is_task_run:
        return f"{outcome}; {task_summary_line(view)}"
    return outcome + (f"; {summary_line(view)}" if view.summary is not None else "")
