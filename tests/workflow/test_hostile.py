"""Hostile workflow sources compile to diagnostics, in a supervised child, never hanging or killing us."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from crucible_core.workflow.compile import compile_workflow
from crucible_core.workflow.diagnostics import WorkflowError

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
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_hostile_source_is_a_diagnostic(tmp_path: Path, name: str) -> None:
    pack = tmp_path / "pack"
    pack.mkdir()
    shutil.copyfile(CORPUS / name, pack / "workflow.star")
    (tmp_path / "outside.star").write_text("x = 1\n")
    os.symlink(tmp_path / "outside.star", pack / "link.star")
    for i in range(40):
        (pack / f"lib{i}.star").write_text("v = 1\n")
    with pytest.raises(WorkflowError) as caught:
        compile_workflow(pack)
    diagnostics = caught.value.diagnostics
    assert diagnostics and all(d.file and d.line >= 1 and d.col >= 1 for d in diagnostics)
    text = " ".join(d.message for d in diagnostics)
    assert any(fragment in text for fragment in EXPECTED[name]), text


def test_corpus_is_covered() -> None:
    assert sorted(p.name for p in CORPUS.glob("*.star")) == sorted(EXPECTED)
