"""Compile diagnostics: a message at file:line:col, with an optional did-you-mean."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

import attrs

from crucible_core.api import ManifestError


@attrs.frozen
class Diagnostic:
    file: str
    line: int
    col: int
    message: str
    hint: str | None = None

    def render(self) -> str:
        text = f"{self.file}:{self.line}:{self.col}: {self.message}"
        return f"{text} ({self.hint})" if self.hint else text

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Diagnostic:
        return cls(
            str(data.get("file", "?")),
            int(data.get("line", 0)),
            int(data.get("col", 0)),
            str(data.get("message", "")),
            data.get("hint"),
        )


class WorkflowError(ManifestError):
    """workflow.star did not compile; every diagnostic is listed (exit 10, like a bad manifest)."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        lines = [d.render() for d in diagnostics] or ["workflow.star did not compile"]
        super().__init__(
            "workflow did not compile:\n  " + "\n  ".join(lines),
            hint="fix the source and run `crucible workflow compile` again",
        )


def did_you_mean(name: str, candidates: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None
