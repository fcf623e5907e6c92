"""Hostile workflow sources compile to diagnostics, in a supervised child, never hanging or killing us."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from crucible_workflow_starlark import params
from crucible_workflow_starlark.bounds import Bounds
from crucible_workflow_starlark.compile import compile_workflow
from crucible_workflow_starlark.diagnostics import WorkflowError

CORPUS = Path(__file__).parent / "hostile"

# What each diagnostic must say (a fragment), so a bound that silently stopped working fails.
EXPECTED = {
    "endless_loop.star": ("slices", "memory"),
    "deep_recursion.star": ("call stack",),
    "huge_string.star": ("memory", "too big"),
    "huge_list.star": ("memory", "too big"),
    "growing_list.star": ("memory", "slices"),
    "deep_nesting.star": ("nest deeper",),
    "deep_blocks.star": ("nest deeper",),
    "load_parent.star": ("'..'",),
    "load_absolute.star": ("relative path",),
    "load_link.star": ("link",),
    "prompt_escape.star": ("'..'",),
    "thousands_of_loads.star": ("loaded modules",),
    "huge_argument.star": ("bytes",),
    "big_builtin.star": ("memory",),  # one call allocating about 1.2 GB (see the peak test below)
    "load_fifo.star": ("not a regular file",),  # refused at once, not at the deadline
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_hostile_source_is_a_diagnostic(tmp_path: Path, name: str) -> None:
    pack = tmp_path / "pack"
    pack.mkdir()
    shutil.copyfile(CORPUS / name, pack / "workflow.star")
    (tmp_path / "outside.star").write_text("x = 1\n")
    os.symlink(tmp_path / "outside.star", pack / "link.star")
    os.mkfifo(pack / "fifo.star")
    for i in range(40):
        (pack / f"lib{i}.star").write_text("v = 1\n")
    with pytest.raises(WorkflowError) as caught:
        compile_workflow(pack, bounds=Bounds(seconds=10))
    diagnostics = caught.value.diagnostics
    assert diagnostics and all(d.file and d.line >= 1 and d.col >= 1 for d in diagnostics)
    text = " ".join(d.message for d in diagnostics)
    assert any(fragment in text for fragment in EXPECTED[name]), text


def test_corpus_is_covered() -> None:
    assert sorted(p.name for p in CORPUS.glob("*.star")) == sorted(EXPECTED)


def test_one_builtin_call_cannot_take_the_compile_past_its_memory_bound(tmp_path: Path) -> None:
    """The child's data limit is the documented bound: a single call never gets to allocate past it."""
    pack = tmp_path / "pack"
    pack.mkdir()
    shutil.copyfile(CORPUS / "big_builtin.star", pack / "workflow.star")
    probe = (
        "import json, resource, sys\n"
        "from pathlib import Path\n"
        "from crucible_workflow_starlark.compile import compile_workflow\n"
        "from crucible_workflow_starlark.diagnostics import WorkflowError\n"
        "try:\n"
        "    compile_workflow(Path(sys.argv[1]))\n"
        "    message = ''\n"
        "except WorkflowError as exc:\n"
        "    message = str(exc)\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024\n"
        "print(json.dumps({'message': message, 'peak': peak}))\n"
    )
    # a fresh process, so the children's peak is the compile child's alone
    done = subprocess.run(
        [sys.executable, "-c", probe, str(pack)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert "memory" in answer["message"]
    assert answer["peak"] < Bounds().heap_bytes


def test_reading_params_parses_the_block_once_whatever_follows_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long params block followed by lines Python cannot parse: one parse, not one per line."""
    declared = [f'    "p{i}": {{"type": "string", "default": "v"}},' for i in range(1990)]
    text = "\n".join(["params = {", *declared, "}", "x = = 1  # Python rejects this line", ""])
    calls = []
    real = ast.parse

    def counting(source: str, *args: object, **kwargs: object) -> ast.Module:
        calls.append(len(source))
        return real(source, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ast, "parse", counting)
    block = params.read_block(text, "workflow.star")
    assert len(block) == 1990 and block["p7"].default == "v"
    assert len(calls) <= 2, f"{len(calls)} parses"
