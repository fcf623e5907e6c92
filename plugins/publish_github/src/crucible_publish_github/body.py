"""The draft pull request's body, rendered from a run's session log: a pure function of what it is given.

What it shows: the goal; a table of the kept iterations (score, against the baseline, the
measure's note); a mermaid `xychart-beta` of the measured scores once at least two iterations
measured; the advisory epilogue's task results with failures marked; the run record's address;
embedded artifacts, each collapsed and capped; and, for a composite, the sibling pull requests.

Everything here except the engine's own numbers was written by an agent or a measure, so it is
hostile: notes are bounded and set as code spans (no links, no HTML, no table breakouts), and
artifact text sits in a code fence longer than any run of backticks inside it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

NOTE_CHARS = 160  # a note in the table; the row's full note stays in the session log
GOAL_CHARS = 4000
ARTIFACT_BYTES = 16 * 1024  # an embedded artifact's cap in the body (spec: 16 KiB)
MAX_ROWS = 200  # kept iterations listed; the oldest beyond it are summarised in one line
MAX_POINTS = 400  # chart points (mermaid draws nothing useful past a few hundred)
MAX_BODY_CHARS = 60_000  # GitHub refuses a pull request body over 65,536 characters


@attrs.frozen
class KeptRow:
    iteration: int
    score: float | None
    note: str


@attrs.frozen
class EpilogueResult:
    task: str
    status: str  # pass, fail, transport, skipped, blocked, truncated


@attrs.frozen
class EmbeddedArtifact:
    """One artifact's text for the body (the artifact seam: whatever core passes, rendered as given)."""

    title: str
    text: str


@attrs.frozen
class RunStory:
    """What the body is rendered from; `from_events` reads it out of a session log's events."""

    run_id: str
    goal: str = ""
    baseline: float | None = None
    kept: tuple[KeptRow, ...] = ()
    measured: tuple[tuple[int, float], ...] = ()  # (iteration, score) of every measured row
    epilogue: tuple[EpilogueResult, ...] = ()
    last_kept_sha: str | None = None
    base_commit: str | None = None

    @classmethod
    def from_events(cls, run_id: str, events: Iterable[Mapping[str, Any]]) -> RunStory:
        goal = ""
        baseline: float | None = None
        kept: list[KeptRow] = []
        measured: dict[int, float] = {}
        epilogue_tasks: set[str] = set()
        results: dict[str, str] = {}
        last_sha: str | None = None
        base: str | None = None
        for event in events:
            kind = event.get("kind")
            if kind == "start" and isinstance(event.get("goal"), str):
                goal = event["goal"]
            elif kind == "identity" and isinstance(event.get("base_commit"), str):
                base = event["base_commit"] or base
            elif kind == "row" and isinstance(event.get("row"), Mapping):
                row = event["row"]
                if row.get("phase") is not None:
                    continue  # a wide round's candidate: its keep comes back as the round's row
                iteration = row.get("iter")
                score = _number(row.get("score"))
                if not isinstance(iteration, int):
                    continue
                if _number(row.get("baseline")) is not None:
                    baseline = _number(row.get("baseline"))
                if score is not None and row.get("valid") is not False:
                    measured[iteration] = score
                if row.get("decision") == "keep" and iteration > 0 and isinstance(row.get("sha"), str):
                    kept.append(KeptRow(iteration, score, str(row.get("note") or "")))
                    last_sha = row["sha"]
            elif kind == "plan_admitted" and isinstance(event.get("tasks"), list):
                for task in event["tasks"]:
                    if isinstance(task, Mapping) and task.get("stage") == "epilogue":
                        epilogue_tasks.add(str(task.get("name") or task.get("id") or ""))
            elif kind == "task_result" and isinstance(event.get("task"), str):
                results[event["task"]] = str(event.get("status") or "")
        epilogue = tuple(EpilogueResult(t, results[t]) for t in sorted(epilogue_tasks) if t in results)
        return cls(
            run_id=run_id,
            goal=goal,
            baseline=baseline,
            kept=tuple(kept),
            measured=tuple(sorted(measured.items())),
            epilogue=epilogue,
            last_kept_sha=last_sha,
            base_commit=base,
        )


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def code_span(text: str, limit: int = NOTE_CHARS) -> str:
    """Hostile text as one inline code span: one line, bounded, no backticks or pipes to break out."""
    flat = " ".join(text.split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    flat = flat.replace("`", "'").replace("|", "¦")
    return f"`{flat}`" if flat else ""


def fenced(text: str) -> str:
    """Hostile text in a code fence no backtick run inside it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _score(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"


def _versus(score: float | None, baseline: float | None) -> str:
    if score is None or baseline is None:
        return "—"
    delta = score - baseline
    text = f"{delta:+g}"
    if baseline != 0:
        text += f" ({delta / abs(baseline) * 100:+.1f}%)"
    return text


def chart(measured: Sequence[tuple[int, float]]) -> str:
    """A mermaid xychart-beta of the measured scores by iteration; empty below two points."""
    points = list(measured)[-MAX_POINTS:]
    if len(points) < 2:
        return ""
    low = min(score for _, score in points)
    high = max(score for _, score in points)
    if low == high:
        low, high = low - 1, high + 1
    axis = ", ".join(str(iteration) for iteration, _ in points)
    line = ", ".join(f"{score:g}" for _, score in points)
    return "\n".join(
        [
            "```mermaid",
            "xychart-beta",
            '    title "Score by iteration"',
            f"    x-axis [{axis}]",
            f'    y-axis "score" {low:g} --> {high:g}',
            f"    line [{line}]",
            "```",
        ]
    )


def _truncated(text: str) -> str:
    data = text.encode("utf-8")
    if len(data) <= ARTIFACT_BYTES:
        return text
    cut = data[:ARTIFACT_BYTES].decode("utf-8", "ignore")
    return f"{cut}\n… (cut at {ARTIFACT_BYTES // 1024} KiB; the run record holds it whole)"


def render_body(
    story: RunStory,
    *,
    record_uri: str | None = None,
    artifacts: Sequence[EmbeddedArtifact] = (),
    siblings: Sequence[tuple[str, str]] = (),
    component: str = "",
) -> str:
    """The pull request's body (Markdown). `siblings` are (component, url) of a composite's other PRs."""
    lines = [
        f"Draft pull request of crucible run `{story.run_id}`"
        + (f", component `{component}`." if component else ".")
    ]
    if story.goal:
        lines += ["", "### Goal", "", fenced(story.goal[:GOAL_CHARS])]
    lines += ["", "### Kept iterations", ""]
    if story.kept:
        baseline = "—" if story.baseline is None else f"{story.baseline:g}"
        lines += [
            f"Baseline: {baseline}",
            "",
            "| iteration | score | vs baseline | note |",
            "|---:|---:|---:|---|",
        ]
        shown = story.kept[-MAX_ROWS:]
        if len(story.kept) > len(shown):
            lines.append(f"| … | | | {len(story.kept) - len(shown)} earlier kept iterations |")
        for row in shown:
            lines.append(
                f"| {row.iteration} | {_score(row.score)} | {_versus(row.score, story.baseline)} | "
                f"{code_span(row.note)} |"
            )
    else:
        lines.append("(none yet)")
    drawn = chart(story.measured)
    if drawn:
        lines += ["", "### Scores", "", drawn]
    if story.epilogue:
        lines += ["", "### Epilogue (advisory)", ""]
        for result in story.epilogue:
            mark = "✅" if result.status == "pass" else "❌ **failed**"
            lines.append(f"- {mark} {code_span(result.task, 80)} ({code_span(result.status, 20)})")
    for artifact in artifacts:
        title = " ".join(artifact.title.split())[:120].replace("<", "&lt;").replace(">", "&gt;")
        lines += [
            "",
            "<details>",
            f"<summary>{title}</summary>",
            "",
            fenced(_truncated(artifact.text)),
            "",
            "</details>",
        ]
    if record_uri:
        lines += ["", "### Run record", "", code_span(record_uri, 500)]
    if siblings:
        lines += ["", "### Linked pull requests (same run)", ""]
        lines += [f"- {code_span(name, 80)}: {url}" for name, url in siblings]
    body = "\n".join(lines) + "\n"
    if len(body) > MAX_BODY_CHARS:
        # cut, and say so: a body the forge refuses would cost the whole update
        body = (
            body[:MAX_BODY_CHARS] + "\n\n… (cut to fit the forge's limit; the run record holds everything)\n"
        )
    return body
