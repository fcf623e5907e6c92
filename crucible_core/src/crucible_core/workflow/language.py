"""The seam through which an authoring language compiles a workflow source to the `[workflow]` IR.

A language plugin registers itself under a file suffix (`crucible_register_workflow_languages`);
its source is the file `workflow<suffix>` beside the manifest. Core never evaluates a source: it
asks the language for the lane and the launch parameters (both read without evaluating anything)
and for the compiled document, which the plan loader then validates like any `[workflow]` table.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.errors import ManifestError, PluginError
from crucible_core.registry import PROVIDERS

if TYPE_CHECKING:
    from crucible_core.plugins import Plugins

SOURCE_STEM = "workflow"
REGISTRY = "workflow language"
_SUFFIX = re.compile(r"\.[A-Za-z0-9_]{1,16}")


class WorkflowLanguage(Protocol):
    """An authoring language. Each method may raise a CrucibleError; a source that does not
    compile is a ManifestError (exit 10) listing every problem at file:line:col."""

    def lane(self, source: Path) -> str:
        """The workflow type the source declares, read without evaluating it."""

    def params(self, source: Path) -> dict[str, Any]:
        """The source's launch parameters as a JSON Schema object, read without evaluating it."""

    def compile(self, source: Path, supplied: Mapping[str, str]) -> dict[str, Any]:
        """The `[workflow]` document ({"type", "result"?, "task": [...]}) for these `--param` values."""


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class WorkflowSource:
    """A workflow source beside a manifest and the installed language that compiles it."""

    path: Path
    language: WorkflowLanguage


def no_params() -> dict[str, Any]:
    """The launch-parameter schema of a workflow that declares none."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def find_source(plugins: Plugins, directory: Path) -> WorkflowSource | None:
    """The workflow source in `directory` with its language, or None when there is none.

    A source whose language no installed plugin provides is refused (PluginError, exit 12),
    naming the distribution to install, rather than silently running without its graph.
    """
    languages = plugins.registry(REGISTRY)
    for entry in languages:
        if not _SUFFIX.fullmatch(entry.name):
            raise PluginError(
                f"plugin {entry.plugin} registered workflow language {entry.name!r}, "
                "which is not a file suffix such as '.star'",
                hint="fix or uninstall the plugin, or leave it out with CRUCIBLE_LOAD_PLUGINS",
            )
    # The standard set's languages are looked for even when not installed, so that their source
    # says what to install instead of being ignored; a third-party language's source is looked
    # for only while its plugin is installed.
    standard = {name for kind, name in PROVIDERS if kind == REGISTRY}
    suffixes = sorted(set(languages.names()) | standard)
    found = [directory / f"{SOURCE_STEM}{suffix}" for suffix in suffixes]
    found = [path for path in found if path.is_file()]
    if not found:
        return None
    if len(found) > 1:
        raise ManifestError(
            f"{directory}: {' and '.join(path.name for path in found)} both define the workflow",
            hint="keep one source beside the manifest",
        )
    path = found[0]
    language = languages.entries.get(path.suffix)
    if language is None:
        unloaded = f"; failed to load: {', '.join(languages.unloaded)}" if languages.unloaded else ""
        raise PluginError(
            f"{path} is a {path.suffix} workflow, and no installed plugin compiles {path.suffix} "
            f"sources{unloaded}",
            hint=f"`pip install {PROVIDERS[(REGISTRY, path.suffix)]}`; `crucible plugins` lists what is installed",
        )
    return WorkflowSource(path, language.value)
