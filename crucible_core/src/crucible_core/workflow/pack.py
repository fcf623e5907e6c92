"""A manifest's effective workflow: compiled from workflow.star beside it, else its own [workflow].

The compiled document is the `[workflow]` table ({"type", "result"?, "task": [...]}); its
TOML rendering is the frozen artifact a run hashes and the runtime authority it executes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from crucible_core.errors import ManifestError
from crucible_core.manifest.loader import LoadedManifest
from crucible_core.workflow.compile import SOURCE_NAME

ARTIFACT_NAME = "workflow.toml"


def source_path(loaded: LoadedManifest) -> Path | None:
    path = loaded.dir / SOURCE_NAME
    return path if path.is_file() else None


def declared_lane(loaded: LoadedManifest) -> str | None:
    """The lane without evaluating anything: the manifest's type, or the source's literal one."""
    from crucible_core.workflow.compile import read_source
    from crucible_core.workflow.compiler import CompileFailed, read_lane
    from crucible_core.workflow.diagnostics import WorkflowError

    lane = loaded.manifest.workflow.type if loaded.manifest.workflow is not None else None
    path = source_path(loaded)
    if path is None:
        return lane
    try:
        source_lane = read_lane(read_source(loaded.dir), SOURCE_NAME)
    except CompileFailed as exc:
        raise WorkflowError(exc.diagnostics) from None
    if lane is not None and lane != source_lane:
        raise ManifestError(
            f"{loaded.path}: [workflow].type is {lane!r} but {SOURCE_NAME} declares {source_lane!r}",
            hint="make them agree, or drop [workflow] and let workflow.star decide",
        )
    return source_lane


def effective_workflow(
    loaded: LoadedManifest, supplied: Mapping[str, str] | None = None
) -> dict[str, Any] | None:
    from crucible_core.workflow.compile import compile_workflow

    section = loaded.manifest.workflow
    if source_path(loaded) is not None:
        if section is not None and section.task:
            raise ManifestError(
                f"{loaded.path}: both {SOURCE_NAME} and [[workflow.task]] define the graph",
                hint="keep one: the source compiles to the tables",
            )
        declared_lane(loaded)
        return compile_workflow(loaded.dir, supplied)
    if section is None:
        return None
    if supplied:
        raise ManifestError(f"{loaded.path}: --param needs a {SOURCE_NAME} that declares params")
    document: dict[str, Any] = {"type": section.type}
    if section.result is not None:
        document["result"] = section.result
    document["task"] = [dict(t) for t in section.task]
    return document


def plan_data(document: Mapping[str, Any], usd: float) -> dict[str, Any]:
    """The plan-file shape the executor's loader reads, for one run under a cost ceiling."""
    return {"version": 1, "budget": {"usd": usd}, "task": list(document["task"])}


def to_json(document: Mapping[str, Any]) -> str:
    return json.dumps(
        {"type": document["type"], "result": document.get("result"), "task": document["task"]},
        indent=2,
        sort_keys=False,
    )


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items()) + "}"
    return json.dumps(str(value))


def to_toml(document: Mapping[str, Any]) -> str:
    lines = ["# generated from workflow.star by `crucible workflow compile`; do not edit", "[workflow]"]
    lines.append(f"type = {_toml_value(document['type'])}")
    if document.get("result") is not None:
        lines.append(f"result = {_toml_value(document['result'])}")
    for task in document["task"]:
        lines += ["", "[[workflow.task]]"]
        lines += [f"{key} = {_toml_value(value)}" for key, value in task.items()]
    return "\n".join(lines) + "\n"


def artifact_hash(document: Mapping[str, Any]) -> str:
    return hashlib.sha256(to_toml(document).encode()).hexdigest()
