"""Launch parameters: the literal `params = {...}` block, its JSON Schema, and typed values.

The block must be the source's first statement and a pure literal, so it is read here with
Python's literal parser, without evaluating the Starlark source at all.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from collections.abc import Mapping
from typing import Any

import attrs

from crucible_core.api import UsageError
from crucible_workflow_starlark.diagnostics import Diagnostic, WorkflowError, did_you_mean

TYPES = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean", "list": "array"}
DECL_KEYS = frozenset(
    {"type", "description", "default", "required", "pattern", "minimum", "maximum", "choices"}
)


@attrs.frozen
class Param:
    name: str
    type: str
    description: str = ""
    default: Any = None
    required: bool = False
    pattern: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[Any, ...] | None = None


def read_block(text: str, file: str) -> dict[str, Param]:
    """The declared parameters ({} when the source declares none)."""
    statement = _first_statement(text)
    if statement is None:
        return {}
    node, line, col = statement
    where = (file, line, col)
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
        return {}
    target = node.targets[0]
    if not (isinstance(target, ast.Name) and target.id == "params"):
        return {}
    try:
        raw = ast.literal_eval(node.value)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        raise _error(where, "the params block must be a literal: no calls, names or interpolation") from None
    if not isinstance(raw, dict):
        raise _error(where, "params must be a dict of name -> declaration")
    declared: dict[str, Param] = {}
    for name, decl in raw.items():
        declared[name] = _declaration(name, decl, where)
    return declared


def _first_statement(text: str) -> tuple[ast.stmt, int, int] | None:
    """The source's first statement (a leading docstring skipped), parsed on its own.

    One pass of the tokenizer finds where the first statements end, and only their lines are
    parsed: the rest of the source may be Starlark that Python's parser rejects, and parsing
    it (or growing prefixes of it) would cost the engine time the compile's deadline does not bound.
    """
    lines = text.splitlines()
    for first, last in _leading_statements(text, 2):
        try:
            module = ast.parse("\n".join(lines[first - 1 : last]))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        if not module.body:
            return None
        statement = module.body[0]
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue  # a docstring: the block may follow it
        return statement, first + statement.lineno - 1, statement.col_offset + 1
    return None


def _leading_statements(text: str, count: int) -> list[tuple[int, int]]:
    """The (first, last) line numbers of the source's first `count` logical lines."""
    spans: list[tuple[int, int]] = []
    first: int | None = None
    skipped = (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.ENDMARKER:
                break
            if token.type in skipped:
                continue
            first = token.start[0] if first is None else first
            if token.type == tokenize.NEWLINE:
                spans.append((first, token.end[0]))
                first = None
                if len(spans) == count:
                    break
    except (tokenize.TokenError, SyntaxError):
        pass  # the compile reports a malformed source; what was read so far stands
    return spans


def _error(where: tuple[str, int, int], message: str, hint: str | None = None) -> WorkflowError:
    return WorkflowError([Diagnostic(where[0], where[1], where[2], message, hint)])


def _declaration(name: Any, decl: Any, where: tuple[str, int, int]) -> Param:
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", name):
        raise _error(where, f"parameter name {name!r} must be an identifier")
    if not isinstance(decl, dict):
        raise _error(where, f"parameter {name!r} must be declared as a dict")
    unknown = sorted(set(decl) - DECL_KEYS)
    if unknown:
        raise _error(
            where, f"parameter {name!r}: unknown key {unknown[0]!r}", did_you_mean(str(unknown[0]), DECL_KEYS)
        )
    kind = decl.get("type")
    if kind not in TYPES:
        raise _error(where, f"parameter {name!r}: type must be one of {', '.join(TYPES)}, got {kind!r}")
    required = decl.get("required", False)
    if not isinstance(required, bool):
        raise _error(where, f"parameter {name!r}: required must be True or False")
    if required and "default" in decl:
        raise _error(where, f"parameter {name!r} is required and so cannot declare a default")
    if "pattern" in decl and kind != "string":
        raise _error(where, f"parameter {name!r}: pattern applies only to a string")
    if ("minimum" in decl or "maximum" in decl) and kind not in ("integer", "number"):
        raise _error(where, f"parameter {name!r}: minimum/maximum apply only to integer and number")
    choices = decl.get("choices")
    if choices is not None and (not isinstance(choices, list) or not choices):
        raise _error(where, f"parameter {name!r}: choices must be a non-empty list")
    param = Param(
        name=name,
        type=kind,
        description=str(decl.get("description", "")),
        default=decl.get("default"),
        required=required,
        pattern=decl.get("pattern"),
        minimum=decl.get("minimum"),
        maximum=decl.get("maximum"),
        choices=tuple(choices) if choices is not None else None,
    )
    if "default" in decl:
        problem = check_value(param, param.default)
        if problem:
            raise _error(where, f"parameter {name!r}: its default {problem}")
    return param


def check_value(param: Param, value: Any) -> str | None:
    """Why a typed value violates its declaration, or None."""
    ok = {
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
        "list": isinstance(value, list) and all(isinstance(v, str) for v in value),
    }[param.type]
    if not ok:
        return f"must be a {param.type}" + (" of strings" if param.type == "list" else "")
    if param.pattern is not None and not re.fullmatch(param.pattern, value):
        return f"{value!r} does not match pattern {param.pattern!r}"
    if param.minimum is not None and value < param.minimum:
        return f"{value!r} is below the minimum {param.minimum!r}"
    if param.maximum is not None and value > param.maximum:
        return f"{value!r} is above the maximum {param.maximum!r}"
    if param.choices is not None and value not in param.choices:
        return f"{value!r} is not one of {', '.join(map(repr, param.choices))}"
    return None


def parse_value(param: Param, raw: str) -> Any:
    """A `--param k=v` string as the parameter's declared type."""
    if param.type == "string":
        return raw
    if param.type == "integer":
        return int(raw)
    if param.type == "number":
        return float(raw)
    if param.type == "boolean":
        lowered = raw.lower()
        if lowered not in ("true", "false"):
            raise ValueError("expected true or false")
        return lowered == "true"
    if raw.startswith("["):
        value = json.loads(raw)
        if not isinstance(value, list):
            raise ValueError("expected a JSON list of strings")
        return value
    return [part for part in raw.split(",") if part]


def bind(declared: Mapping[str, Param], supplied: Mapping[str, str]) -> dict[str, Any]:
    """Typed values for every declared parameter: supplied, else default; refused before compiling."""
    problems: list[str] = []
    for name in supplied:
        if name not in declared:
            hint = did_you_mean(name, declared)
            problems.append(f"--param {name}: not a declared parameter" + (f" ({hint})" if hint else ""))
    values: dict[str, Any] = {}
    for name, param in declared.items():
        if name in supplied:
            try:
                value = parse_value(param, supplied[name])
            except (ValueError, json.JSONDecodeError) as exc:
                problems.append(f"--param {name}: {supplied[name]!r} is not a {param.type} ({exc})")
                continue
            problem = check_value(param, value)
            if problem:
                problems.append(f"--param {name}: {problem}")
                continue
            values[name] = value
        elif param.required:
            problems.append(f"--param {name} is required ({param.description or param.type})")
        elif param.default is not None:
            values[name] = param.default
        else:
            values[name] = None
    if problems:
        raise UsageError("; ".join(problems), hint="`crucible workflow params` prints the schema")
    return values


def json_schema(declared: Mapping[str, Param]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for name, param in declared.items():
        prop: dict[str, Any] = {"type": TYPES[param.type]}
        if param.type == "list":
            prop["items"] = {"type": "string"}
        if param.description:
            prop["description"] = param.description
        if param.default is not None:
            prop["default"] = param.default
        if param.pattern is not None:
            prop["pattern"] = param.pattern
        if param.minimum is not None:
            prop["minimum"] = param.minimum
        if param.maximum is not None:
            prop["maximum"] = param.maximum
        if param.choices is not None:
            prop["enum"] = list(param.choices)
        properties[name] = prop
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": properties,
        "required": [name for name, param in declared.items() if param.required],
        "additionalProperties": False,
    }
