"""docs/plugins.md gives every hook its own section with a Python example that compiles and imports
core only through crucible_core.api (as datasette's test_plugin_hooks_are_documented does)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from crucible_core import api, hookspecs
from tests.cli_support import ROOT

GUIDE = ROOT / "docs" / "plugins.md"
HEADING = re.compile(r"^(#{1,6}) +(.+?) *$", re.MULTILINE)
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def hook_names() -> list[str]:
    """Every function of hookspecs.py marked @hookspec, in the order it declares them."""
    tree = ast.parse(Path(hookspecs.__file__).read_text())
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any(ast.unparse(decorator).startswith("hookspec") for decorator in node.decorator_list)
    ]


def sections(text: str) -> dict[str, str]:
    """`### title` -> the text up to the next heading of level 3 or higher."""
    found: dict[str, str] = {}
    headings = list(HEADING.finditer(text))
    for index, heading in enumerate(headings):
        if len(heading.group(1)) != 3:
            continue
        end = next((h.start() for h in headings[index + 1 :] if len(h.group(1)) <= 3), len(text))
        found[heading.group(2).strip("`")] = text[heading.end() : end]
    return found


def problems(text: str, hooks: list[str]) -> list[str]:
    """What the guide `text` lacks for `hooks`: a section, a Python example, one that compiles."""
    found = sections(text)
    out = []
    for hook in hooks:
        body = found.get(hook)
        if body is None:
            out.append(f"{hook}: no `### {hook}` section")
            continue
        examples = PYTHON_BLOCK.findall(body)
        if not examples:
            out.append(f"{hook}: its section has no ```python example")
        for example in examples:
            try:
                tree = compile(example, f"<docs/plugins.md: {hook}>", "exec", flags=ast.PyCF_ONLY_AST)
            except SyntaxError as exc:
                out.append(f"{hook}: its example does not compile: {exc}")
                continue
            for node in ast.walk(tree):
                module = node.module if isinstance(node, ast.ImportFrom) else None
                if module and module.startswith("crucible_core") and module != "crucible_core.api":
                    out.append(f"{hook}: its example imports {module} (use crucible_core.api)")
    return out


def test_the_hooks_are_found() -> None:
    hooks = hook_names()
    assert {"crucible_register_worlds", "crucible_session_event", "crucible_run_end"} <= set(hooks)
    assert len(hooks) == len(set(hooks)) >= 18


def test_every_hook_has_a_section_with_a_python_example_that_compiles() -> None:
    assert problems(GUIDE.read_text(), hook_names()) == []


def test_every_python_example_in_the_guide_compiles() -> None:
    text = GUIDE.read_text()
    examples = PYTHON_BLOCK.findall(text)
    assert len(examples) > len(hook_names())
    for example in examples:
        compile(example, "<docs/plugins.md>", "exec")


@pytest.mark.parametrize(
    ("guide", "expected"),
    [
        ("## Hooks\n\nno sections at all\n", "crucible_x: no `### crucible_x` section"),
        (
            "### crucible_x\n\nA paragraph only.\n\n### other\n\n```python\nx = 1\n```\n",
            "no ```python example",
        ),
        ("### crucible_x\n\n```python\ndef crucible_x(:\n```\n", "does not compile"),
        (
            "### crucible_x\n\n```python\nfrom crucible_core.hookspecs import hookimpl\n```\n",
            "imports crucible_core.hookspecs",
        ),
    ],
)
def test_the_check_fails_for_a_missing_section_example_or_syntax(guide: str, expected: str) -> None:
    found = problems(guide, ["crucible_x"])
    assert len(found) == 1 and expected in found[0], found


def test_a_good_section_passes_the_check() -> None:
    guide = "### crucible_x\n\nCalled once.\n\n```python\nfrom crucible_core.api import hookimpl\n```\n\n## Next\n"
    assert problems(guide, ["crucible_x"]) == []


def test_the_public_api_section_names_every_public_name() -> None:
    text = GUIDE.read_text()
    start = text.index("\n## The public API\n")
    section = text[start : text.index("\n## ", start + 1)]
    missing = [name for name in api.__all__ if name != "API_VERSION" and f"`{name}`" not in section]
    assert missing == [], "add them to the table in docs/plugins.md, 'The public API'"
    assert "API_VERSION" in section
