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
    "agent_files",
    "workspace_files",
    "sealed_git",
    "toml_text",
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
    # The broker decides (vocabulary, declaration, mediation, grants); the run hands it the
    # tools that write the run's markers, so it never reaches up into run/.
    "broker": {"contract", "manifest", "services"} | INFRASTRUCTURE,
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


def runtime_imports(path: Path, package: str) -> set[str]:
    """The modules of `crucible_core.<package>` a module imports when it runs.

    Imports under `if TYPE_CHECKING:` are left out: they exist for annotations only (the
    modules use `from __future__ import annotations`), are never executed, and so cannot make
    an import circle at run time. Imports inside functions count: they run.
    """
    tree = ast.parse(path.read_text(), str(path))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    prefix = f"crucible_core.{package}"
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith(prefix + "."):
                found.add(node.module.split(".")[2])
            elif node.module == prefix:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(prefix + "."):
                    found.add(alias.name.split(".")[2])
    return found


def import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle in `graph` (module -> modules it imports), or None."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (found := visit(target)):
                return found
        state[module] = 2
        path.pop()
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_the_run_shell_has_no_import_cycle() -> None:
    """engine, gates and loop used to import each other; the Run context (run/context.py), the
    shared steps (run/steps.py) and gates that take the loop's operations as functions keep the
    run/ modules a tree at run time (type-only imports under TYPE_CHECKING are exempt)."""
    graph = {
        module.stem: runtime_imports(module, "run") - {module.stem}
        for module in (PACKAGE / "run").glob("*.py")
        if module.stem != "__init__"
    }
    assert {"engine", "gates", "loop"} <= graph.keys()
    assert import_cycle(graph) is None


def test_the_cycle_check_finds_a_circle() -> None:
    assert import_cycle({"engine": {"gates"}, "gates": {"loop"}, "loop": {"engine"}}) == [
        "engine",
        "gates",
        "loop",
        "engine",
    ]
    assert import_cycle({"engine": {"context"}, "loop": {"context"}, "context": set()}) is None
