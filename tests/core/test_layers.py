"""The core's sub-packages form layers: every import of ours points down, never up or around,
and no module of core imports itself back through a circle."""

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
    "artifacts",
    "toml_text",
    "event_bounds",
    "protocols",
    "protocol_records",
    "registry",
    "plugins",
    "plugin_index",
    "generated_code",
    "imported_code",
    "start_up",
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


# Every part of core (a sub-package, or a module at the top), bottom to top, and what it may import
# when it runs (docs/architecture.md, "Core layers"). Imports under `if TYPE_CHECKING:` are left
# out: the stricter table above also holds them to the sub-packages' layers, and type-only
# imports never execute. A part missing from this table fails the test, so a new package has to
# be placed in a layer.
BELOW_RUN = {
    "contract",
    "manifest",
    "services",
    "plan",
    "workflow",
    "control",
    "broker",
    "flow",
}
RUNTIME_LAYERS: dict[str, set[str]] = {
    "contract": set(),
    **{name: {"contract"} | INFRASTRUCTURE | {"__init__", "mcp_config"} for name in INFRASTRUCTURE},
    "__init__": set(),
    "mcp_config": set(),
    **ALLOWED,
    "run": BELOW_RUN | INFRASTRUCTURE | {"__init__"},
    "reporters": {"contract", "flow", "run"} | INFRASTRUCTURE,
    # what differs between the kinds of run: the loop (run/), a playbook, a plan file
    "lanes": BELOW_RUN | {"run"} | INFRASTRUCTURE | {"__init__"},
    # the shell every kind of run goes through: prepare, log, hooks, bridge, signals, shutdown; it
    # chooses the reporter `--ui` names (reporters/console.py: a terminal's live console)
    "session": BELOW_RUN | {"run", "lanes", "reporters"} | INFRASTRUCTURE | {"__init__"},
    # the top: the commands, the built-in plugin and the init template type may use everything
    "cli": {"*"},
    "builtin_plugin": {"*"},
    "init_templates": {"*"},
    # the public plugin API names every module it re-exports only as a string, resolved on first
    # use, so importing it loads nothing of core (tests/core/test_public_api.py)
    "api": set(),
}


def _part(module: Path) -> str:
    rel = module.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def module_name(module: Path) -> str:
    parts = list(module.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def runtime_modules(path: Path) -> set[str]:
    """The modules of core a module imports when it runs (function-level imports included,
    `if TYPE_CHECKING:` imports left out), each named as precisely as the import allows."""
    tree = ast.parse(path.read_text(), str(path))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("crucible_core"):
            for alias in node.names:
                inner = f"{node.module}.{alias.name}"
                found.add(inner if inner in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("crucible_core"))
    return {name for name in found if name in MODULES}


def test_every_part_of_core_sits_in_a_layer_and_imports_only_below_it() -> None:
    parts = {_part(path) for path in MODULES.values()}
    assert parts - RUNTIME_LAYERS.keys() == set(), "place the new part in RUNTIME_LAYERS"
    assert {"run", "reporters", "cli", "plugins"} <= parts
    breaches = []
    for name, path in sorted(MODULES.items()):
        layer = _part(path)
        allowed = RUNTIME_LAYERS[layer]
        if "*" in allowed:
            continue
        for target in sorted(runtime_modules(path)):
            part = _part(MODULES[target])
            if part != layer and part not in allowed:
                breaches.append(f"{name} imports {target}")
    assert breaches == []


def test_no_module_of_core_imports_itself_back() -> None:
    """Over every module of core, the run shell, the session, the lanes, the reporters, the CLI
    and the top-level modules included: the imports that run form no circle."""
    graph = {name: runtime_modules(path) - {name} for name, path in MODULES.items()}
    assert {
        "crucible_core.run.engine",
        "crucible_core.reporters.console",
        "crucible_core.cli.main",
    } <= graph.keys()
    assert import_cycle(graph) is None


def test_the_module_graph_sees_function_level_imports() -> None:
    # results_cmd.py imports the flow model inside its command (it loads only when the command runs): it counts
    flow = runtime_modules(PACKAGE / "cli" / "results_cmd.py")
    assert "crucible_core.flow.fold" in flow
    assert "crucible_core.cli.options" in flow
