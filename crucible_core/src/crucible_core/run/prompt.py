"""Rendering the agent's prompt: the method template with {{GOAL}}, {{STATUS}}, {{STEER}} and {{CAPABILITIES}} filled."""

from __future__ import annotations

DEFAULT_METHOD = """You are improving the code in this workspace against a frozen objective.

Goal:
{{GOAL}}

Where the run stands:
{{STATUS}}

Operator steering (follow it when present):
{{STEER}}

Make one focused change per turn, toward the goal. After your turn a judge measures the
workspace once; the change is kept only if it is strictly better. The measure's files that
sit in the workspace (measure.sh, say) are frozen: you may read them to learn what is
measured, but edits to them are undone before every measure and cannot change the score.
RESULTS.md holds the history of earlier turns.
"""


CAPABILITIES_HEADING = "What this run lets you reach (tools, output bounds, capabilities):"


def render(template: str, *, goal: str, status: str, steer: str, capabilities: str = "") -> str:
    """Fill the template. The capabilities statement (from the run's resolved declaration) goes
    where {{CAPABILITIES}} stands, or after the method when a custom template lacks it: the
    agent is always told exactly what it has."""
    # Plain replacement, not str.format: prompts are full of braces (code, JSON).
    text = (
        template.replace("{{GOAL}}", goal.strip())
        .replace("{{STATUS}}", status.strip())
        .replace("{{STEER}}", steer.strip() or "(none)")
    )
    statement = f"{CAPABILITIES_HEADING}\n{capabilities.strip()}" if capabilities.strip() else ""
    if "{{CAPABILITIES}}" in text:
        return text.replace("{{CAPABILITIES}}", statement)
    return f"{text.rstrip()}\n\n{statement}\n" if statement else text
