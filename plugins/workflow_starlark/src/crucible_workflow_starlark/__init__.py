"""crucible's Starlark workflow language: workflow.star compiled to the `[workflow]` IR, and `init --template playbook`.

The compiler (starlark-pyo3) runs in a supervised child with a deadline and memory bounds; this
module only registers the language and the template, so `crucible --help` never imports the
interpreter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import Deferred, hookimpl

if TYPE_CHECKING:  # type-only: naming them here loads nothing of core when plugins are listed
    from crucible_core.api import InitTemplate, Register, WorkflowLanguage


@hookimpl
def crucible_register_workflow_languages(register: Register[WorkflowLanguage]) -> None:
    register(".star", Deferred(_starlark))  # its module loads attrs classes and pathlib: on first use


def _starlark() -> WorkflowLanguage:
    from crucible_workflow_starlark.language import StarlarkLanguage

    return StarlarkLanguage()


@hookimpl
def crucible_register_init_templates(register: Register[InitTemplate]) -> None:
    register("playbook", Deferred(_playbook_template))


def _playbook_template() -> InitTemplate:
    from crucible_core.api import InitTemplate
    from crucible_workflow_starlark import init_template

    return InitTemplate(
        "playbook",
        "a graph of steps that runs once, with no judge: no agent, no credentials",
        init_template.FILES,
        frozenset({"gather.sh", "agent.sh"}),
        "`crucible check`, then `crucible run --max-cost 0.5 --max-time 5m`; then make workflow.star yours",
    )
