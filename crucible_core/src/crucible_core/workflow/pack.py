"""A manifest's effective workflow: compiled from the source beside it, else its own [workflow].

The source (workflow.star, or another language's) is compiled by the installed language plugin
registered for its suffix (see `language.py`). The compiled document is the `[workflow]` table
({"type", "result"?, "task": [...]}); its TOML rendering is the frozen artifact a run hashes and
the runtime authority it executes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from crucible_core.errors import ManifestError, PluginError
from crucible_core.manifest.loader import LoadedManifest
from crucible_core.workflow.lanes import WORKFLOW_TYPES
from crucible_core.workflow.language import WorkflowSource, find_source, no_params

if TYPE_CHECKING:
    from crucible_core.plan.ir import ValidPlan
    from crucible_core.plugins import Plugins

ARTIFACT_NAME = "workflow.toml"


def declared_lane(plugins: Plugins, loaded: LoadedManifest) -> str | None:
    """The lane without evaluating anything: the manifest's type, or the one its source declares."""
    lane = loaded.manifest.workflow.type if loaded.manifest.workflow is not None else None
    source = find_source(plugins, loaded.dir)
    if source is None:
        return lane
    source_lane = _source_lane(source)
    if lane is not None and lane != source_lane:
        raise ManifestError(
            f"{loaded.path}: [workflow].type is {lane!r} but {source.path.name} declares {source_lane!r}",
            hint=f"make them agree, or drop [workflow] and let {source.path.name} decide",
        )
    return source_lane


def _source_lane(source: WorkflowSource) -> str:
    lane = source.language.lane(source.path)
    if lane not in WORKFLOW_TYPES:  # the language's own checks missed it: a plugin bug, said as one
        raise PluginError(
            f"the {source.path.suffix} workflow language read the lane {lane!r} from {source.path.name}; "
            f"a workflow type is one of {', '.join(WORKFLOW_TYPES)}",
            hint="report it to the language plugin's authors",
        )
    return lane


def declared_params(plugins: Plugins, loaded: LoadedManifest) -> dict[str, Any]:
    """The launch parameters as a JSON Schema object, read without evaluating the source."""
    source = find_source(plugins, loaded.dir)
    return source.language.params(source.path) if source is not None else no_params()


def effective_workflow(
    plugins: Plugins, loaded: LoadedManifest, supplied: Mapping[str, str] | None = None
) -> dict[str, Any] | None:
    section = loaded.manifest.workflow
    source = find_source(plugins, loaded.dir)
    if source is not None:
        if section is not None and section.task:
            raise ManifestError(
                f"{loaded.path}: both {source.path.name} and [[workflow.task]] define the graph",
                hint="keep one: the source compiles to the tables",
            )
        declared_lane(plugins, loaded)
        return source.language.compile(source.path, dict(supplied or {}))
    if section is None:
        return None
    if supplied:
        raise ManifestError(f"{loaded.path}: --param needs a workflow.star that declares params")
    document: dict[str, Any] = {"type": section.type}
    if section.result is not None:
        document["result"] = section.result
    document["task"] = [dict(t) for t in section.task]
    return document


def plan_data(document: Mapping[str, Any], usd: float) -> dict[str, Any]:
    """The plan-file shape the executor's loader reads, for one run under a cost ceiling."""
    return {"version": 1, "budget": {"usd": usd}, "task": list(document["task"])}


def validate_document(plugins: Plugins, document: Mapping[str, Any], *, source: str) -> ValidPlan:
    """The compiled workflow admitted as a plan of its lane (a playbook's tasks own no world or judge)."""
    from crucible_core.plan.load import plan_from_data
    from crucible_core.plan.validate import validate

    kinds = plugins.registry("task kind")
    scored = document["type"] != "playbook"
    plan = plan_from_data(plan_data(document, 1.0), kinds, source=source)
    return validate(plan, kinds, owns_world_and_judge=scored, source=source)


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
