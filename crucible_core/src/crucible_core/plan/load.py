"""Loading a plan file (TOML `[[task]]`, or the same shape as JSON) into the IR, strictly.

Every key must be known: the shared keys every task has, plus the fields its kind declares.
Unknown keys are refused with the task and key named, as the manifest loader does.
"""

from __future__ import annotations

import enum
import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
from cattrs.errors import ClassValidationError

from crucible_core.contract.records import value_methods
from crucible_core.manifest.converter import ManifestValueError, describe_structure_error
from crucible_core.manifest.converter import converter as manifest_converter
from crucible_core.plan import ir
from crucible_core.plan.errors import PlanError
from crucible_core.plan.kinds import TaskKindSpec
from crucible_core.registry import Registry, provider_of

converter = manifest_converter.copy()


def _enum_hook(enum_type: type[enum.Enum]) -> Any:
    allowed = ", ".join(member.value for member in enum_type)

    def structure(value: Any, _type: Any) -> Any:
        try:
            return enum_type(value)
        except ValueError:
            raise ManifestValueError(f"{value!r} is not one of {allowed}") from None

    return structure


for _enum in (ir.Join, ir.Isolation, ir.Stage):
    converter.register_structure_hook(_enum, _enum_hook(_enum))


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class _Shared:
    """The keys every task may carry, whatever its kind."""

    name: str
    kind: str
    depends_on: list[str] = attrs.Factory(list)
    join: ir.Join = ir.Join.ALL
    required: bool = True
    needs: str = "any"
    isolation: ir.Isolation = ir.Isolation.SHARED
    session: str | None = None
    emits: list[str] = attrs.Factory(list)
    emits_files: list[str] = attrs.Factory(list)
    stage: ir.Stage = ir.Stage.MAIN
    retries: int = ir.DEFAULT_RETRIES
    timeout: float = ir.DEFAULT_TIMEOUT_SECONDS


SHARED_KEYS = frozenset(field.name for field in attrs.fields(_Shared))
# `service`: [[service]] declarations, read by crucible_core.services (environment, not graph).
TOP_KEYS = frozenset({"version", "reason", "budget", "task", "service"})


def read_plan_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanError([f"cannot read {path}: {exc}"], source=str(path)) from None
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise PlanError(
            [f"not valid {'JSON' if path.suffix == '.json' else 'TOML'}: {exc}"], source=str(path)
        ) from None
    if not isinstance(data, dict):
        raise PlanError(["the plan must be a table"], source=str(path))
    return data


def kind_label(table: Mapping[str, Any]) -> str:
    """`kind = "engine", op = "propose"` is labelled `engine_propose`, as on the wire."""
    kind = table.get("kind")
    if kind == "engine":
        return f"engine_{table.get('op')}"
    return kind if isinstance(kind, str) else ""


def plan_from_data(
    data: Mapping[str, Any], kinds: Registry[TaskKindSpec], *, source: str = "plan"
) -> ir.Plan:
    problems: list[str] = []
    unknown_top = sorted(set(data) - TOP_KEYS)
    if unknown_top:
        problems.append(f"unknown key(s) {', '.join(unknown_top)} at the top level")
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        problems.append("version is required and must be an integer (1)")
    elif version != ir.PLAN_VERSION:
        problems.append(f"version {version} is not supported; this crucible reads version {ir.PLAN_VERSION}")
    reason = data.get("reason", "")
    if not isinstance(reason, str):
        problems.append("reason must be a string")
        reason = ""
    budget = _budget(data.get("budget"), problems)
    raw_tasks = data.get("task", [])
    if not isinstance(raw_tasks, list) or not all(isinstance(t, dict) for t in raw_tasks):
        problems.append("[[task]] must be an array of tables")
        raw_tasks = []
    tasks = [t for t in (_task(i, raw, kinds, problems) for i, raw in enumerate(raw_tasks)) if t]
    if problems:
        raise PlanError(problems, source=source)
    # No problems means the version was exactly the one this crucible reads.
    return ir.Plan(version=ir.PLAN_VERSION, budget=budget, tasks=tuple(tasks), reason=reason)


def _budget(raw: Any, problems: list[str]) -> ir.Budget:
    if not isinstance(raw, dict) or "usd" not in raw:
        problems.append("[budget].usd is required (a positive number of US dollars)")
        return ir.Budget(0.0)
    unknown = sorted(set(raw) - {"usd"})
    if unknown:
        problems.append(f"unknown key(s) {', '.join(unknown)} in [budget]")
    usd = raw["usd"]
    if (
        isinstance(usd, bool)
        or not isinstance(usd, int | float)
        or not usd > 0
        or usd != usd
        or usd == float("inf")
    ):
        problems.append(f"[budget].usd must be a positive finite number, got {usd!r}")
        return ir.Budget(0.0)
    return ir.Budget(float(usd))


def _task(
    index: int, raw: dict[str, Any], kinds: Registry[TaskKindSpec], problems: list[str]
) -> ir.Task | None:
    name = raw.get("name")
    where = f"[[task]] #{index + 1}" + (f" ({name!r})" if isinstance(name, str) else "")
    label = kind_label(raw)
    if "kind" not in raw:
        problems.append(f"{where}: kind is required")
        return None
    if label not in kinds:
        problems.append(f"{where}: {_unknown_kind(raw, label, kinds)}")
        return None
    spec = kinds.get(label, where=where)
    field_names = {field.name for field in attrs.fields(spec.fields)}
    own = {key: value for key, value in raw.items() if key not in SHARED_KEYS or key in field_names}
    shared = {key: value for key, value in raw.items() if key in SHARED_KEYS}
    needs = shared.get("needs")
    if isinstance(needs, list):
        # `needs = ["gpu"]` reads as naturally as `needs = "gpu"`; a task needs one capability.
        if len(needs) != 1 or not isinstance(needs[0], str):
            problems.append(f"{where}: needs names one capability (a string, or a list of one string)")
            return None
        shared["needs"] = needs[0]
    try:
        common = converter.structure(shared, _Shared)
    except (ClassValidationError, ValueError, TypeError) as exc:
        problems.extend(f"{where}: {msg}" for msg in describe_structure_error(exc))
        return None
    unknown = sorted(set(own) - field_names)
    if unknown:
        import difflib  # for a hint only, so not imported at start-up

        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, sorted(field_names | SHARED_KEYS), n=1, cutoff=0.7)
            hints.append(f"{key} (did you mean {close[0]!r}?)" if close else key)
        allowed = ", ".join(sorted(field_names)) or "none"
        problems.append(
            f"{where}: unknown key(s) {', '.join(hints)} for kind {label!r} (its own keys: {allowed})"
        )
        return None
    try:
        fields: Any = converter.structure(own, spec.fields)
    except (ClassValidationError, ValueError, TypeError) as exc:
        problems.extend(f"{where}: {msg}" for msg in describe_structure_error(exc))
        return None
    return ir.Task(
        name=common.name,
        kind=label,
        fields=fields,
        depends_on=tuple(common.depends_on),
        join=common.join,
        required=common.required,
        needs=common.needs,
        isolation=common.isolation,
        session=common.session,
        emits=tuple(common.emits),
        emits_files=tuple(common.emits_files),
        stage=common.stage,
        retries=common.retries,
        timeout=common.timeout,
    )


def _unknown_kind(raw: Mapping[str, Any], label: str, kinds: Registry[TaskKindSpec]) -> str:
    if raw.get("kind") == "engine":
        ops = sorted(name.removeprefix("engine_") for name in kinds.names() if name.startswith("engine_"))
        return f"unknown engine op {raw.get('op')!r}; known ops: {', '.join(ops)}"
    authorable = sorted({("engine" if n.startswith("engine_") else n) for n in kinds.names()})
    message = f"unknown task kind {raw.get('kind')!r}; known kinds: {', '.join(authorable)}"
    provider = provider_of("task kind", label)
    if provider is not None:  # a standard plugin left out: say what to install
        return f"{message}; `pip install {provider}` provides it"
    import difflib  # for a hint only, so not imported at start-up

    close = difflib.get_close_matches(str(raw.get("kind")), authorable, n=1, cutoff=0.6)
    return message + (f"; did you mean {close[0]!r}?" if close else "")
