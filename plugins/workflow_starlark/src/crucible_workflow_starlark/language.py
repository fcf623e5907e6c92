"""workflow.star as a crucible workflow language: the lane, the launch schema and the compile, for core's seam."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from crucible_workflow_starlark.bounds import Bounds


@attrs.frozen
class StarlarkLanguage:
    """Reads and compiles a workflow.star; the source's directory is the pack its load() and
    prompt_file() calls are confined to."""

    bounds: Bounds = Bounds()

    def lane(self, source: Path) -> str:
        from crucible_workflow_starlark.compile import read_source
        from crucible_workflow_starlark.compiler import CompileFailed, read_lane
        from crucible_workflow_starlark.diagnostics import WorkflowError

        try:
            return read_lane(read_source(source.parent, source.name, self.bounds), source.name)
        except CompileFailed as exc:
            raise WorkflowError(exc.diagnostics) from None

    def params(self, source: Path) -> dict[str, Any]:
        from crucible_workflow_starlark.compile import declared_params
        from crucible_workflow_starlark.params import json_schema

        return json_schema(declared_params(source.parent, source.name))

    def compile(self, source: Path, supplied: Mapping[str, str]) -> dict[str, Any]:
        from crucible_workflow_starlark.compile import compile_workflow

        return compile_workflow(source.parent, supplied, entry=source.name, bounds=self.bounds)
