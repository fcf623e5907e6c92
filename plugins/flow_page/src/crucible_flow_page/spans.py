"""Optional wall-clock from an exported trace (`crucible flow --spans FILE`).

Accepts the shapes trace exports commonly take: a JSON list of spans, or an object holding
one under ``spans``/``data``; each span with a start and a duration (or an end), in
nanoseconds, and its iteration in ``iter``, ``crucible.iter`` or ``iteration``, directly or
under ``meta``/``attributes``/``tags``. Spans with no iteration are ignored.

Also reads an OTLP JSON export (the protobuf JSON mapping: ``resourceSpans`` holding
``scopeSpans`` holding ``spans``, times in ``startTimeUnixNano``/``endTimeUnixNano`` and
attributes as key/value pairs), the form crucible-plugin-telemetry-otlp's spans take when a
collector's file exporter writes them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from crucible_core.api import FlowModel, UsageError

_ITER_KEYS = ("crucible.iter", "iter", "iteration", "crucible.iteration")
_NANOS = 1e9


def load_spans(path: Path) -> list[Mapping[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(
            f"--spans {path}: not a readable JSON file ({exc})", hint="pass a trace export"
        ) from exc
    if isinstance(data, Mapping) and "resourceSpans" in data:
        data = _otlp_spans(data)
    elif isinstance(data, Mapping):
        data = data.get("spans", data.get("data", []))
    if not isinstance(data, list):
        raise UsageError(f"--spans {path}: no list of spans found", hint="pass a trace export")
    return [
        s.get("attributes", s) if isinstance(s.get("attributes"), Mapping) and "start" not in s else s
        for s in data
        if isinstance(s, Mapping)
    ]


def _otlp_value(value: Any) -> Any:
    """An OTLP JSON AnyValue as a plain value (64-bit integers arrive as strings)."""
    if not isinstance(value, Mapping):
        return None
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    try:
        return int(value["intValue"]) if "intValue" in value else None
    except (TypeError, ValueError, OverflowError):
        return None


def _otlp_nanos(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _members(holder: Any, key: str) -> list[Mapping[str, Any]]:
    """The mappings in holder[key] when that is a list; anything else in a hand-edited export is skipped."""
    items = holder.get(key) if isinstance(holder, Mapping) else None
    return [item for item in items if isinstance(item, Mapping)] if isinstance(items, list) else []


def _otlp_spans(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The spans of an OTLP JSON export, each as a start, an end and an attributes mapping."""
    spans: list[Mapping[str, Any]] = []
    for resource in _members(data, "resourceSpans"):
        for scope in _members(resource, "scopeSpans"):
            for span in _members(scope, "spans"):
                pairs = _members(span, "attributes")
                attributes = {str(p.get("key")): _otlp_value(p.get("value")) for p in pairs}
                spans.append(
                    {
                        "start": _otlp_nanos(span.get("startTimeUnixNano")),
                        "end": _otlp_nanos(span.get("endTimeUnixNano")),
                        "attributes": attributes,
                    }
                )
    return spans


def _iter_of(span: Mapping[str, Any]) -> int | None:
    for holder in (span, span.get("meta"), span.get("attributes"), span.get("tags")):
        if isinstance(holder, Mapping):
            for key in _ITER_KEYS:
                value = holder.get(key)
                if value is None:
                    continue
                try:
                    return int(value)
                except (TypeError, ValueError):
                    continue
    return None


def _window(span: Mapping[str, Any]) -> tuple[float, float] | None:
    start = span.get("start")
    duration = span.get("duration")
    end = span.get("end")
    if not isinstance(start, int | float):
        return None
    if isinstance(duration, int | float):
        return float(start), float(start) + float(duration)
    if isinstance(end, int | float):
        return float(start), float(end)
    return None


def apply_spans(model: FlowModel, spans: list[Mapping[str, Any]]) -> int:
    """Set each iteration's wall_secs from the spans that name it; returns how many iterations got one."""
    windows: dict[int, tuple[float, float]] = {}
    for span in spans:
        number, window = _iter_of(span), _window(span)
        if number is None or window is None:
            continue
        lo, hi = windows.get(number, window)
        windows[number] = (min(lo, window[0]), max(hi, window[1]))
    count = 0
    for it in model.iterations:
        if it.iter in windows:
            lo, hi = windows[it.iter]
            it.wall_secs = round((hi - lo) / _NANOS, 3)
            count += 1
    return count
