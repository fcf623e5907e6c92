"""The draft pull request's body, rendered from session-log events: what it shows, and that nothing
an agent or a measure wrote can turn into a link, HTML or a broken table in it."""

from __future__ import annotations

from typing import Any

from crucible_publish_github.body import (
    ARTIFACT_BYTES,
    MAX_BODY_CHARS,
    EmbeddedArtifact,
    RunStory,
    render_body,
)


def row(
    iteration: int, decision: str, score: float | None, note: str = "", sha: str | None = None
) -> dict[str, Any]:
    return {
        "kind": "row",
        "row": {
            "iter": iteration,
            "decision": decision,
            "score": score,
            "note": note,
            "sha": sha,
            "baseline": 10.0,
        },
    }


def test_a_run_with_an_epilogue_marks_its_failures_and_links_its_record() -> None:
    events = [
        {"kind": "start", "goal": "Make it faster."},
        row(0, "baseline", 10.0),
        row(1, "keep", 12.5, "faster", "a" * 40),
        {
            "kind": "plan_admitted",
            "tasks": [
                {"name": "report", "kind": "command", "stage": "epilogue"},
                {"name": "lint", "kind": "command", "stage": "epilogue"},
                {"name": "measure", "kind": "command", "stage": "iteration"},
            ],
        },
        {"kind": "task_result", "task": "report", "status": "pass"},
        {"kind": "task_result", "task": "lint", "status": "fail"},
        {"kind": "task_result", "task": "measure", "status": "fail"},
    ]
    body = render_body(RunStory.from_events("r1", events), record_uri="s3://bucket/runs/r1")
    assert "| 1 | 12.5 | +2.5 (+25.0%) | `faster` |" in body
    assert "### Epilogue (advisory)" in body
    assert "- ❌ **failed** `lint` (`fail`)" in body and "- ✅ `report` (`pass`)" in body
    assert "`measure`" not in body  # an iteration task is not part of the epilogue
    assert "`s3://bucket/runs/r1`" in body
    assert "xychart-beta" in body  # two measured iterations: the baseline and the keep


def test_one_measured_iteration_draws_no_chart_and_without_a_record_no_record_section() -> None:
    body = render_body(RunStory.from_events("r1", [row(1, "keep", 3.0, "", "b" * 40)]))
    assert "xychart" not in body and "Run record" not in body and "Epilogue" not in body


def test_hostile_notes_and_artifacts_stay_text() -> None:
    note = "x | [click](https://evil.test) <img src=x> `code`\nnext line"
    events = [row(0, "baseline", 1.0), row(1, "keep", 2.0, note, "c" * 40)]
    artifact = "```\n</details><script>alert(1)</script>\n" + "y" * (ARTIFACT_BYTES + 100)
    body = render_body(
        RunStory.from_events("r1", events), artifacts=[EmbeddedArtifact("Runtime <b>notes</b>", artifact)]
    )
    kept_line = next(line for line in body.splitlines() if line.startswith("| 1 |"))
    assert kept_line.count("|") == 5  # the note's pipe did not add a column
    assert "`x ¦ [click](https://evil.test) <img src=x> 'code' next line`" in kept_line  # one code span
    # the artifact: collapsed, fenced by a fence longer than any run of backticks in it, capped
    assert "<summary>Runtime &lt;b&gt;notes&lt;/b&gt;</summary>" in body
    assert "````text\n```\n</details><script>" in body
    assert body.count("y") < ARTIFACT_BYTES + 100 and "cut at 16 KiB" in body


def test_without_artifacts_the_body_has_no_artifact_section() -> None:
    body = render_body(RunStory.from_events("r1", [row(1, "keep", 3.0, "", "d" * 40)]))
    assert "<details>" not in body


def test_a_body_stays_within_what_the_forge_accepts() -> None:
    artifacts = [EmbeddedArtifact(f"part {n}", "z" * ARTIFACT_BYTES) for n in range(8)]
    body = render_body(RunStory.from_events("r1", [row(1, "keep", 3.0, "", "e" * 40)]), artifacts=artifacts)
    assert len(body) < 65_536 and len(body) <= MAX_BODY_CHARS + 100
    assert body.rstrip().endswith("the run record holds everything)")
