"""A playbook's or a plan file's run for the terminal and for scripts: its tasks, verdict and outcome.

`crucible show`, `crucible results` and `crucible status` print these for a task run instead of
a loop's scores (which such a run has none of). Everything here is the log's words: the lines
go through `plain` (no escape sequence a task wrote reaches the terminal) and are bounded; the
JSON carries the log's text as it was written (redacted then), outputs cut at OUTPUT_CHARS.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from crucible_core.contract.plain_text import plain
from crucible_core.contract.run_kind import EPILOGUE, verdict_word

if TYPE_CHECKING:  # the console uses these functions without defining the model's records
    from crucible_core.flow.model import FlowModel, PlanTask

NAME_WIDTH = 32  # a longer task name is cut in the table (the JSON carries it whole)
TEXT_CHARS = 100  # of a note, and of an output, on a task's line
NO_SHUTDOWN = "none yet (the run is live, or died without a shutdown line)"


def task_time(secs: float) -> str:
    """How long a task's attempts ran: `0.01s`, `3m05s`, `1h02m`."""
    if secs < 60:
        return f"{secs:.2f}s"
    minutes, seconds = divmod(int(secs), 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m{seconds:02d}s"


def _cut(text: str, chars: int) -> str:
    text = plain(text)
    return text if len(text) <= chars else text[: chars - 1] + "…"


def headline(model: FlowModel) -> str:
    """`playbook valid; outcome finished (passed: ...)`: the verdict, then how dispatch stopped."""
    h = model.header
    verdict = verdict_word(h.kind, h.verdict)
    if h.outcome == "unfinished":
        return f"{h.kind}: verdict {verdict}; outcome {NO_SHUTDOWN}"
    reason = f" ({_cut(h.reason, 200)})" if h.reason else ""
    return f"{h.kind} {verdict}; outcome {plain(h.outcome)}{reason}"


def counted(statuses: Iterable[str]) -> str:
    """`5 pass, 1 fail`: each status and how many hold it, in the order they first appear."""
    counts: dict[str, int] = {}
    for status in statuses:
        counts[status] = counts.get(status, 0) + 1
    return ", ".join(f"{count} {status}" for status, count in counts.items())


def tally(statuses: Sequence[str]) -> str:
    """`6 tasks: 5 pass, 1 fail`."""
    shown = counted(plain(status) for status in statuses)
    return f"{len(statuses)} task{'s' if len(statuses) != 1 else ''}" + (f": {shown}" if shown else "")


def run_tally(model: FlowModel) -> str:
    """The tally of a task run's tasks."""
    return tally([task.status for task in model.plan])


def roles_of(stage: str, required: bool) -> list[str]:
    """What sets a task apart from a required main-graph one: `epilogue`, `advisory`."""
    return (["epilogue"] if stage == EPILOGUE else []) + ([] if required else ["advisory"])


def task_roles(task: PlanTask) -> list[str]:
    return roles_of(task.stage, task.required)


def _task_line(task: PlanTask, width: int) -> str:
    secs = task_time(task.secs) if task.attempts else "-"  # blocked, truncated or pending: it never ran
    tries = f"{task.attempts}x" if task.attempts else "-"
    tags = "".join(f"[{tag}] " for tag in task_roles(task))
    words = [_cut(task.note, TEXT_CHARS)] if task.note else []
    if task.output:
        words.append("out " + _cut(task.output, TEXT_CHARS))
    name = _cut(task.name, width)
    return (
        f"{name:<{width}}  {plain(task.status):<12} {secs:>8} {tries:>3}  ${task.cost_usd:.4f}  "
        f"{tags}{'; '.join(words)}"
    ).rstrip()


def task_lines(model: FlowModel) -> list[str]:
    """The run for a person: the verdict and outcome, one line per task in graph order, the spend."""
    return [headline(model), *task_table(model)]


def task_table(model: FlowModel) -> list[str]:
    """One line per task in graph order (under a header line), then the tally, the spend and resumes."""
    width = min(max((len(plain(t.name)) for t in model.plan), default=4), NAME_WIDTH)
    lines = []
    if model.plan:
        lines.append(f"{'task':<{width}}  {'status':<12} {'time':>8} {'try':>3}  {'cost':<7}  note; output")
    lines += [_task_line(task, width) for task in model.plan]
    resumes = [r.recovery for r in model.resumes]
    lines.append(
        f"{run_tally(model)}; spent ${model.header.spent_usd:.4f}; resumed {len(resumes)} time(s)"
        + (": " + ", ".join(plain(r) for r in resumes if r) if any(resumes) else "")
    )
    return lines


def task_document(model: FlowModel) -> dict[str, Any]:
    """The stable JSON shape `results --json` and `show --json` print for a task run (docs/cli.md)."""
    h = model.header
    return {
        "kind": h.kind,
        "objective": h.gate or None,
        "verdict": h.verdict,
        "outcome": h.outcome,
        "reason": h.reason,
        "spent_usd": h.spent_usd,
        "identity": h.identity or None,
        "resumes": len(model.resumes),
        "tasks": [
            {
                "name": t.name,
                "kind": t.kind,
                "status": t.status,
                "required": t.required,
                "stage": t.stage,
                "depends_on": t.depends_on,
                "attempts": t.attempts,
                "secs": t.secs,
                "cost_usd": t.cost_usd,
                "note": t.note,
                "output": t.output,
            }
            for t in model.plan
        ],
    }
