"""The core's sub-packages form layers: every import of ours points down, never up or around."""

from __future__ import annotations

import ast
from pathlib import Path

import crucible_core

PACKAGE = Path(crucible_core.__file__).parent
INFRASTRUCTURE = {
    "errors",
    "durations",
    "process",
    "shell",
    "session_log",
    "redact",
    "protocols",
    "registry",
    "plugins",
    "hookspecs",
}
# What each layer may import besides itself (docs/architecture.md, "Core layers").
ALLOWED = {
    "contract": set(),
    "manifest": {"contract"} | INFRASTRUCTURE,
    "services": {"contract", "manifest"} | INFRASTRUCTURE,
    "plan": {"contract", "manifest"} | INFRASTRUCTURE,
    "workflow": {"contract", "manifest", "plan"} | INFRASTRUCTURE,
    "control": {"contract", "manifest"} | INFRASTRUCTURE,
    "flow": {"contract"} | INFRASTRUCTURE,
}


def imported_parts(path: Path) -> set[str]:
    """The first component below crucible_core of every import in a module (type-only included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("crucible_core"):
            rest = node.module.split(".")[1:]
            found.update([rest[0]] if rest else [alias.name for alias in node.names])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "crucible_core" and len(parts) > 1:
                    found.add(parts[1])
    return found


def test_every_layer_imports_only_what_lies_below_it() -> None:
    breaches = []
    for layer, allowed in ALLOWED.items():
        for module in sorted((PACKAGE / layer).rglob("*.py")):
            for part in imported_parts(module) - allowed - {layer}:
                breaches.append(f"{module.relative_to(PACKAGE)} imports crucible_core.{part}")
    assert breaches == []


def test_the_checker_sees_a_breach() -> None:
    # run/ imports the contract, the plan-free loop, and control: it must show up as imports.
    parts = set()
    for module in (PACKAGE / "run").rglob("*.py"):
        parts |= imported_parts(module)
    assert {"contract", "control", "manifest"} <= parts
