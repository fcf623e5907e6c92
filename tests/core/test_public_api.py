"""The public plugin API: plugins and examples import core only through crucible_core.api, every
name it lists resolves, its typed view and its lazy table agree, and importing it loads nothing."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from crucible_core import api
from tests.cli_support import ROOT, crucible_env

API_SOURCE = Path(api.__file__)


def checked_files(root: Path) -> Iterator[Path]:
    """Every Python file a plugin or an example ships or tests itself with."""
    for folder in [
        *sorted(root.glob("plugins/*/src")),
        *sorted(root.glob("plugins/*/tests")),
        root / "examples",
    ]:
        yield from sorted(folder.rglob("*.py"))


def private_imports(path: Path, root: Path) -> list[str]:
    """`file:line: import` for each import of a core module other than crucible_core.api."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "crucible_core":
                names = [alias.name for alias in node.names if alias.name != "api"]
                modules = [f"crucible_core.{name}" for name in names]
            else:
                modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        for module in modules:
            if module.partition(".")[0] == "crucible_core" and module != "crucible_core.api":
                found.append(f"{path.relative_to(root)}:{node.lineno}: imports {module}")
    return found


def offenders(root: Path) -> list[str]:
    return [line for path in checked_files(root) for line in private_imports(path, root)]


def test_plugins_and_examples_import_core_only_through_the_public_api() -> None:
    scanned = {path.relative_to(ROOT).as_posix() for path in checked_files(ROOT)}
    # the scan reaches the standard plugins and the example plugins
    assert "plugins/world_git/src/crucible_world_git/__init__.py" in scanned
    assert "examples/plugin_judge_pytest/src/crucible_judge_pytest/judge.py" in scanned
    assert offenders(ROOT) == []


def test_the_scan_names_every_private_import_by_file_and_line(tmp_path: Path) -> None:
    plugin = tmp_path / "plugins" / "world_x" / "src" / "crucible_world_x"
    plugin.mkdir(parents=True)
    (plugin / "__init__.py").write_text(
        textwrap.dedent(
            """\
            from crucible_core.api import hookimpl
            from crucible_core import api
            from crucible_core.errors import RunFailed
            import crucible_core.process
            from crucible_core import api, protocols


            def later():
                import crucible_core
            """
        )
    )
    tests = tmp_path / "plugins" / "world_x" / "tests"
    tests.mkdir()
    (tests / "test_x.py").write_text("import crucible_core.api\nfrom crucible_core.contract import wire\n")
    example = tmp_path / "examples" / "judge" / "src" / "crucible_judge"
    example.mkdir(parents=True)
    (example / "judge.py").write_text("from crucible_core.protocols import JudgeContext\n")

    assert offenders(tmp_path) == [
        "plugins/world_x/src/crucible_world_x/__init__.py:3: imports crucible_core.errors",
        "plugins/world_x/src/crucible_world_x/__init__.py:4: imports crucible_core.process",
        "plugins/world_x/src/crucible_world_x/__init__.py:5: imports crucible_core.protocols",
        "plugins/world_x/src/crucible_world_x/__init__.py:9: imports crucible_core",
        "plugins/world_x/tests/test_x.py:2: imports crucible_core.contract",
        "examples/judge/src/crucible_judge/judge.py:1: imports crucible_core.protocols",
    ]


def typed_names() -> dict[str, tuple[str, str]]:
    """public name -> (module, attribute) as api.py's `if TYPE_CHECKING:` block imports it."""
    tree = ast.parse(API_SOURCE.read_text())
    block = next(
        node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    names: dict[str, tuple[str, str]] = {}
    modules: dict[str, str] = {}  # a module imported only to spell a renamed export
    for node in block.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if alias.asname is None:
                    modules[alias.name] = f"{node.module}.{alias.name}"
                    continue
                # mypy --strict re-exports `X as X`, never `X as Y` (ruff then drops it as unused)
                assert alias.asname == alias.name, f"{ast.unparse(node)}: rename by assignment"
                assert alias.asname not in names, f"{alias.asname} is imported twice"
                names[alias.asname] = (node.module, alias.name)
        elif isinstance(node, ast.Assign):  # `run_process = process.run`
            [target] = node.targets
            value = node.value
            assert isinstance(target, ast.Name) and isinstance(value, ast.Attribute), ast.unparse(node)
            assert isinstance(value.value, ast.Name) and value.value.id in modules, ast.unparse(node)
            names[target.id] = (modules[value.value.id], value.attr)
        else:
            raise AssertionError(f"unexpected in the TYPE_CHECKING block: {ast.unparse(node)}")
    return names


def exported_names() -> dict[str, tuple[str, str]]:
    """public name -> (module, attribute) as api.py's `_export(...)` calls list it."""
    names: dict[str, tuple[str, str]] = {}
    for node in ast.walk(ast.parse(API_SOURCE.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_export":
            module, *listed = (ast.literal_eval(arg) for arg in node.args)
            for entry in listed:
                public, _, attribute = entry.partition("=")
                assert public not in names, f"{public} is exported twice"
                names[public] = (module, attribute or public)
    return names


def test_the_typed_view_and_the_lazy_table_name_the_same_things() -> None:
    exported = exported_names()
    assert len(exported) > 50  # the parse found the table
    assert typed_names() == exported
    assert set(api.__all__) == {"API_VERSION", *exported}
    assert sorted(dir(api)) == sorted(api.__all__)


def test_every_public_name_resolves_to_the_object_core_defines() -> None:
    import importlib

    for name, (module, attribute) in exported_names().items():
        value = getattr(api, name)
        owner = importlib.import_module(module)
        expected = getattr(owner, attribute, None) or importlib.import_module(f"{module}.{attribute}")
        assert value is expected, name
    with pytest.raises(AttributeError, match="no attribute 'process'"):
        api.process  # noqa: B018 (the module itself is not part of the API)


def test_a_deprecated_name_still_resolves_and_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(api._WHERE, "OldError", ("crucible_core.errors", "UsageError"))
    monkeypatch.setitem(api._DEPRECATED, "OldError", "raise UsageError instead")
    for _ in range(2):  # at every use, not only the first
        with pytest.warns(DeprecationWarning, match=r"api\.OldError is deprecated .*UsageError instead"):
            assert api.OldError is api.UsageError
    assert "OldError" not in vars(api)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert api.UsageError.__name__ == "UsageError"  # a current name does not warn


def test_importing_the_api_loads_no_module_it_exports_until_a_name_is_used() -> None:
    code = textwrap.dedent(
        """\
        import json, sys
        before = set(sys.modules)
        import crucible_core.api as api
        on_import = sorted(set(sys.modules) - before)
        api.Reading
        print(json.dumps({"on_import": on_import, "after_use": sorted(sys.modules)}))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=crucible_env())
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    ours = [name for name in seen["on_import"] if name.startswith("crucible_core")]
    assert ours == ["crucible_core", "crucible_core.api"]
    exported_modules = {module for module, _ in exported_names().values()}
    assert exported_modules.isdisjoint(seen["on_import"])
    assert {"attrs", "cattrs", "click", "pluggy"}.isdisjoint(seen["on_import"])
    # the check can see a load: using a name imports the module that defines it
    assert "crucible_core.contract.reading" in seen["after_use"]
