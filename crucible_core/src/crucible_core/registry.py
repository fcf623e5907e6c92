"""Named registries of drivers: duplicate names fail naming both plugins, unknown names suggest."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from crucible_core.errors import PluginError

# No attrs here nor in plugins.py: every command that loads plugins imports both, and importing
# attrs and building a class per record was a tenth of what `crucible plugins` cost.

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)


# "package.module:Attribute" (dots allowed after the colon): where a deferred value or a
# settings class lives.
_IMPORT_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


def import_path(path: str) -> Any:
    """The object `path` ("package.module:Attribute") names, importing its module."""
    module, _, attribute = path.partition(":")
    value: Any = importlib.import_module(module)
    for part in attribute.split("."):
        value = getattr(value, part)
    return value


class Deferred:
    """A registered value that is built when first used, not when it is registered.

    Registration hooks run whenever a registry is needed, `crucible plugins` included, so a value
    costly to build (a click command, a spec full of attrs classes) is registered as
    `Deferred("package.module:NAME")` or `Deferred(loader)`; the registry's entry loads it on the
    first read of its value and keeps it.
    """

    __slots__ = ("_loaded", "target")

    def __init__(self, target: str | Callable[[], Any]) -> None:
        if isinstance(target, str) and not _IMPORT_PATH.fullmatch(target):
            raise ValueError(f"{target!r} is not an import path such as 'package.module:NAME'")
        self.target = target
        self._loaded: list[Any] = []

    def __repr__(self) -> str:
        return f"Deferred({self.target!r})"

    def load(self) -> Any:
        if not self._loaded:
            target = self.target
            self._loaded.append(import_path(target) if isinstance(target, str) else target())
        return self._loaded[0]


class Register(Protocol[T_contra]):
    """The callback a registration hook receives.

    `register(name, value)` adds a driver, or `register(name, Deferred(...))` one built on first
    use; `settings=` names the attrs class that validates the driver's own manifest keys (see
    `crucible_core.manifest.driver_settings`), preferably by import path
    (`settings="package.settings:MySettings"`, imported only when a manifest is converted);
    keyword traits describe the driver to core without core knowing the plugin:
    `runs_harness=True` for a backend that runs the selected harness, `spared=(".claude/",)` for
    workspace paths a harness keeps there that a restore must leave alone.
    """

    def __call__(
        self, name: str, value: T_contra | Deferred, /, *, settings: type | str | None = None, **traits: Any
    ) -> None: ...


# What to do about a name no installed plugin registers. Core knows no plugin by name: which
# distribution provides a driver is the plugins' business, so the hint points at the standard
# set (the `crucible` meta-distribution) and at the listing of what is installed.
MISSING_DRIVER_HINT = (
    "no installed plugin provides it: `pip install crucible` installs the standard plugin set, "
    "`crucible plugins` lists what is installed"
)

# The standard broker's tools and output kinds (crucible-plugin-broker-mcp registers them).
_BROKER_TOOLS = ("request_approval", "steer_inbox")  # distress and escalate: crucible-plugin-distress
_BROKER_KINDS = ("tracker-comment", "chat-message", "image-push", "deploy", "gpu-capture")

# Drivers the standard set ships in a distribution of their own, which an installation may leave
# out: a name missing from its registry then says which distribution to install. Names only, so
# that the message can say it; core imports none of them.
PROVIDERS: dict[tuple[str, str], str] = {
    ("world", "git"): "crucible-plugin-world-git",
    ("world", "command"): "crucible-plugin-world-git",
    ("judge", "command"): "crucible-plugin-judge-command",
    ("judge", "task"): "crucible-plugin-judge-command",
    ("backend", "command"): "crucible-plugin-backend-local",
    ("backend", "local"): "crucible-plugin-backend-local",
    ("backend", "openshell"): "crucible-plugin-backend-openshell",
    ("harness", "claude"): "crucible-plugin-harness-claude",
    ("harness", "anthropic"): "crucible-plugin-harness-claude",
    ("harness", "codex"): "crucible-plugin-harness-codex",
    ("harness", "acp"): "crucible-plugin-harness-acp",
    ("harness", "opencode"): "crucible-plugin-harness-opencode",
    ("harness", "pi"): "crucible-plugin-harness-pi",
    ("service", "oubliette-cluster"): "crucible-plugin-service-oubliette",
    ("service transport", "mcp-http"): "crucible-plugin-service-transports",
    ("service transport", "mcp-stdio"): "crucible-plugin-service-transports",
    ("service transport", "http"): "crucible-plugin-service-transports",
    ("command", "deploy"): "crucible-plugin-deploy-kubernetes",
    ("command", "ps"): "crucible-plugin-deploy-kubernetes",
    ("command", "view"): "crucible-plugin-deploy-kubernetes",
    ("command", "remote"): "crucible-plugin-deploy-kubernetes",
    ("reporter", "rich"): "crucible-plugin-console-rich",
    ("flow renderer", "html"): "crucible-plugin-flow-page",
    ("flow renderer", "json"): "crucible-plugin-flow-page",
    ("flow renderer", "dot"): "crucible-plugin-flow-page",
    ("flow renderer", "mmd"): "crucible-plugin-flow-page",
    ("command", "flow"): "crucible-plugin-flow-page",
    ("publisher", "github"): "crucible-plugin-publish-github",
    ("command", "watch-pr"): "crucible-plugin-publish-github",
    ("workspace memory", "git"): "crucible-plugin-world-git",
    ("command", "diff"): "crucible-plugin-world-git",
    ("init template", "claude"): "crucible-plugin-harness-claude",
    ("init template", "python-speed"): "crucible-plugin-harness-claude",
    ("init template", "playbook"): "crucible-plugin-workflow-starlark",
    ("task runner", "kubernetes"): "crucible-plugin-deploy-kubernetes",
    ("workflow language", ".star"): "crucible-plugin-workflow-starlark",
    ("lane", "playbook"): "crucible-plugin-lane-playbook",
    ("round strategy", "wide"): "crucible-plugin-search-wide",
    ("world", "composite"): "crucible-plugin-world-composite",
    ("task kind", "agent"): "crucible-plugin-task-agent",
    ("task kind", "evaluate"): "crucible-plugin-task-agent",
    ("task kind", "top_k"): "crucible-plugin-task-agent",
    ("remote measure", "task-runner"): "crucible-plugin-judge-command",
    ("init template", "command"): "crucible-plugin-packs",
    ("command", "init"): "crucible-plugin-packs",
    ("command", "distress"): "crucible-plugin-distress",
    ("command", "escalate"): "crucible-plugin-distress",
    ("broker tool", "distress"): "crucible-plugin-distress",
    ("broker tool", "escalate"): "crucible-plugin-distress",
    # not a registry: the one plugin answering crucible_domain_packs carries out `--pack NAME`
    ("hook", "crucible_domain_packs"): "crucible-plugin-packs",
    ("command", "plan run"): "crucible-plugin-lane-plan",
    ("command", "plan show"): "crucible-plugin-lane-plan",
    ("command", "scope"): "crucible-plugin-scope",
    **{("broker tool", name): "crucible-plugin-broker-mcp" for name in _BROKER_TOOLS},
    **{("output kind", name): "crucible-plugin-broker-mcp" for name in _BROKER_KINDS},
    ("output kind", "draft-pr"): "crucible-plugin-publish-github",
    ("output kind", "workflow-dispatch"): "crucible-plugin-publish-github",
    ("output kind", "run-record"): "crucible-plugin-run-records",
    ("command", "fetch"): "crucible-plugin-run-records",
}


def provider_of(kind: str, name: str) -> str | None:
    """The distribution of the standard set that registers `name` in the `kind` registry, if one does."""
    return PROVIDERS.get((kind, name))


def _is_attrs_class(value: object) -> bool:
    import attrs  # only for a class a plugin hands over: registering by import path needs no attrs

    return isinstance(value, type) and attrs.has(value)


class Entry(NamedTuple, Generic[T]):
    name: str
    registered: T | Deferred  # what the plugin passed; `value` is what it stands for
    plugin: str  # the distribution (or plugin name) that registered it
    # the attrs class for this driver's manifest keys (or its import path), if it has any
    settings_ref: type | str | None = None
    traits: Mapping[str, Any] = {}  # never mutated: Registry.add passes a dict of its own

    @property
    def value(self) -> T:
        if not isinstance(self.registered, Deferred):
            return self.registered
        try:
            loaded: T = self.registered.load()
        except Exception as exc:
            raise self._unloadable(self.registered.target, exc) from exc
        return loaded

    @property
    def settings(self) -> type | None:
        """The settings class, imported on first use when it was registered by import path."""
        if not isinstance(self.settings_ref, str):
            return self.settings_ref
        try:
            found: type = import_path(self.settings_ref)  # checked below
        except Exception as exc:
            raise self._unloadable(self.settings_ref, exc) from exc
        if not _is_attrs_class(found):
            raise PluginError(
                f"plugin {self.plugin} registered {self.name!r} with settings={self.settings_ref!r}, "
                "which is not an attrs class",
                hint="fix or uninstall the plugin, or leave it out with CRUCIBLE_LOAD_PLUGINS",
            )
        return found

    def trait(self, name: str, default: Any = None) -> Any:
        return self.traits.get(name, default)

    def _unloadable(self, target: object, exc: Exception) -> PluginError:
        where = target if isinstance(target, str) else getattr(target, "__qualname__", repr(target))
        return PluginError(
            f"plugin {self.plugin} registered {self.name!r} from {where}, "
            f"which failed to load: {type(exc).__name__}: {exc}",
            hint="fix or uninstall the plugin, or leave it out with CRUCIBLE_LOAD_PLUGINS",
        )


class Conflict(NamedTuple):
    """One name claimed by more than one plugin: which plugins, in registration order."""

    kind: str
    name: str
    plugins: tuple[str, ...]

    def error(self) -> PluginError:
        return PluginError(
            f"{self.kind} {self.name!r} is registered by both {' and '.join(self.plugins)}",
            hint="uninstall one of them, or narrow the set with CRUCIBLE_LOAD_PLUGINS",
        )


class Registry(Generic[T]):
    """All drivers of one kind ("world", "judge", ...) keyed by name.

    A name two plugins register is kept as a conflict rather than raised at once, so a listing
    can still show everything; `check()` (what a run calls) turns the first conflict into an error.
    """

    def __init__(self, kind: str, *, unloaded: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self.entries: dict[str, Entry[T]] = {}
        self.conflicts: dict[str, Conflict] = {}
        # Installed plugin distributions that failed to load: one of them may be what a name lacks.
        self.unloaded = unloaded

    def add(
        self,
        name: str,
        value: T | Deferred,
        plugin: str,
        *,
        settings: type | str | None = None,
        traits: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise PluginError(f"plugin {plugin} registered a {self.kind} with an empty or non-string name")
        if isinstance(settings, str):
            if not _IMPORT_PATH.fullmatch(settings):
                raise PluginError(
                    f"plugin {plugin} registered {self.kind} {name!r} with settings={settings!r}, "
                    "which is not an import path such as 'package.settings:MySettings'"
                )
        elif settings is not None and not _is_attrs_class(settings):
            raise PluginError(
                f"plugin {plugin} registered {self.kind} {name!r} with settings={settings!r}, "
                "which is not an attrs class"
            )
        existing = self.entries.get(name)
        if existing is not None:
            earlier = self.conflicts.get(name)
            owners = earlier.plugins if earlier else (existing.plugin,)
            self.conflicts[name] = Conflict(self.kind, name, (*owners, plugin))
            return
        self.entries[name] = Entry(name, value, plugin, settings, dict(traits or {}))

    def check(self) -> None:
        """Raise for the first name more than one plugin registered."""
        for conflict in self.conflicts.values():
            raise conflict.error()

    def names(self) -> list[str]:
        return sorted(self.entries)

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def __iter__(self) -> Iterator[Entry[T]]:
        return iter(self.entries.values())

    def get(self, name: str, *, where: str) -> T:
        return self.entry(name, where=where).value

    def entry(self, name: str, *, where: str) -> Entry[T]:
        entry = self.entries.get(name)
        if entry is not None:
            return entry
        raise PluginError(self.unknown_message(name, where))

    def unknown_message(self, name: str, where: str) -> str:
        installed = self.names()
        parts = [f"unknown {self.kind} {name!r} in {where}"]
        parts.append(f"installed: {', '.join(installed) if installed else 'none'}")
        provider = provider_of(self.kind, name)
        import difflib  # for a hint only, so not imported at start-up

        close = [] if provider else difflib.get_close_matches(name, installed, n=1, cutoff=0.6)
        if close:
            parts.append(f"did you mean {close[0]!r}?")
        if self.unloaded:
            parts.append(f"failed to load: {', '.join(self.unloaded)} (`crucible plugins` says why)")
        if provider:
            parts.append(f"`pip install {provider}` provides it")
        elif not close:
            parts.append(MISSING_DRIVER_HINT)
        return "; ".join(parts)
