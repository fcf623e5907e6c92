"""crucible's Starlark workflow language: compiles a pack's workflow.star to the `[workflow]` IR.

The compiler (starlark-pyo3) runs in a supervised child with a deadline and memory bounds; this
module only registers the language, so `crucible --help` never imports the interpreter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:
    from crucible_core.api import Register, WorkflowLanguage


@hookimpl
def crucible_register_workflow_languages(register: Register[WorkflowLanguage]) -> None:
    from crucible_workflow_starlark.language import StarlarkLanguage

    register(".star", StarlarkLanguage())
