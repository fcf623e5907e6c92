"""Compiling a pack's workflow.star in a supervised child, and reading its launch parameters.

The child gets a deadline and an address-space limit; whatever it does (an endless loop, a
runaway allocation, a native crash) the engine receives diagnostics, never a hang or a death.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from crucible_core.api import run_process
from crucible_workflow_starlark import params as params_mod
from crucible_workflow_starlark.bounds import Bounds
from crucible_workflow_starlark.diagnostics import Diagnostic, WorkflowError
from crucible_workflow_starlark.sources import PackSources, SourceRefused

SOURCE_NAME = "workflow.star"


def read_source(pack: Path, entry: str = SOURCE_NAME, bounds: Bounds | None = None) -> str:
    try:
        return PackSources(pack, bounds or Bounds()).read(
            entry, limit=(bounds or Bounds()).source_bytes, what="workflow source"
        )
    except SourceRefused as exc:
        raise WorkflowError([Diagnostic(entry, 1, 1, str(exc))]) from None


def declared_params(pack: Path, entry: str = SOURCE_NAME) -> dict[str, params_mod.Param]:
    """The params block, read without evaluating the source."""
    return params_mod.read_block(read_source(pack, entry), entry)


def compile_workflow(
    pack: Path,
    supplied: Mapping[str, str] | None = None,
    *,
    entry: str = SOURCE_NAME,
    bounds: Bounds | None = None,
) -> dict[str, Any]:
    """The `[workflow]` table ({"type", "result"?, "task": [...]}) or WorkflowError."""
    bounds = bounds or Bounds()
    declared = declared_params(pack, entry)
    values = params_mod.bind(declared, dict(supplied or {}))
    request = {
        "pack": str(pack.resolve()),
        "entry": entry,
        "params": values,
        "supplied": sorted(supplied or {}),  # values from outside the pack are fenced in prompts
        "bounds": bounds.to_json(),
    }
    done = run_process(
        [sys.executable, "-m", "crucible_workflow_starlark.child"],
        cwd=pack,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(p for p in sys.path if p)},
        timeout=bounds.seconds,
        stdin_data=json.dumps(request).encode(),
        capture_bytes=4 << 20,
    )
    if done.timed_out:
        raise WorkflowError(
            [
                Diagnostic(
                    entry, 1, 1, f"compilation passed its {bounds.seconds:g}-second deadline and was stopped"
                )
            ]
        )
    try:
        answer = json.loads(done.stdout)
    except json.JSONDecodeError:
        why = (
            "its memory bound"
            if done.exit_code < 0 or "memory" in done.stderr.lower()
            else "a resource bound"
        )
        raise WorkflowError(
            [
                Diagnostic(
                    entry, 1, 1, f"compilation was stopped after exceeding {why} ({done.describe_failure()})"
                )
            ]
        ) from None
    if not answer.get("ok"):
        raise WorkflowError([Diagnostic.from_json(d) for d in answer.get("diagnostics", [])])
    workflow: dict[str, Any] = answer["workflow"]
    return workflow
