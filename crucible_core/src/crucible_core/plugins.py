"""Finding plugins (stevedore over the `crucible` entry-point group) and calling them (pluggy)."""

from __future__ import annotations

import difflib
import functools
import os
import types
from collections.abc import Callable, Iterable
from typing import Any

import attrs
import pluggy

from crucible_core import hookspecs
from crucible_core.errors import CrucibleError, PluginError
from crucible_core.registry import Registry

ENTRY_POINT_GROUP = "crucible"
LOAD_ENV = "CRUCIBLE_LOAD_PLUGINS"
CORE_PLUGIN = "core"

# registry kind -> the registration hook that fills it
REGISTRATION_HOOKS: dict[str, str] = {
    "world": "crucible_register_worlds",
    "judge": "crucible_register_judges",
    "backend": "crucible_register_backends",
    "harness": "crucible_register_harnesses",
    "output kind": "crucible_register_output_kinds",
    "broker tool": "crucible_register_broker_tools",
    "service": "crucible_register_services",
    "command": "crucible_register_commands",
    "reporter": "crucible_register_reporters",
    "pack": "crucible_register_packs",
    "task kind": "crucible_register_task_kinds",
    "publisher": "crucible_register_publishers",
    "task runner": "crucible_register_task_runners",
}


@attrs.frozen
class PluginInfo:
    name: str  # the entry-point name
    distribution: str
    version: str
    module: str
    hooks: tuple[str, ...]


@attrs.frozen
class LoadFailure:
    name: str
    distribution: str
    error: str


@attrs.define
class Plugins:
    """One plugin manager with its loaded plugins; build a fresh one per test."""

    pm: pluggy.PluginManager
    infos: list[PluginInfo] = attrs.field(factory=list)
    failures: list[LoadFailure] = attrs.field(factory=list)
    _registries: dict[str, Registry[Any]] = attrs.field(factory=dict)

    @property
    def hook(self) -> Any:
        return self.pm.hook

    def distribution_of(self, plugin: object) -> str:
        name = self.pm.get_name(plugin) or "?"
        for info in self.infos:
            if info.name == name:
                return info.distribution
        return name

    def registry(self, kind: str, *, strict: bool = True) -> Registry[Any]:
        """The named drivers of one kind, collected from every plugin on first use.

        strict (what a run wants) raises when two plugins registered one name; a listing asks
        for strict=False and shows the conflicts instead.
        """
        registry = self._registries.get(kind)
        if registry is None:
            registry = Registry(kind, unloaded=tuple(sorted({f.distribution for f in self.failures})))
            caller = getattr(self.pm.hook, REGISTRATION_HOOKS[kind])
            # Call each implementation ourselves so every registration knows whose it is.
            for impl in reversed(caller.get_hookimpls()):
                owner = self.distribution_of(impl.plugin)
                try:
                    impl.function(register=functools.partial(_register_into, registry, owner))
                except CrucibleError:
                    raise
                except Exception as exc:
                    raise PluginError(
                        f"plugin {owner}: {caller.name} raised {type(exc).__name__}: {exc}",
                        hint="fix or uninstall the plugin, or leave it out with CRUCIBLE_LOAD_PLUGINS",
                    ) from exc
            self._registries[kind] = registry
        if strict:
            registry.check()
        return registry

    def register_module(
        self, module: types.ModuleType, *, name: str, distribution: str, version: str
    ) -> None:
        """Register one plugin module; raise PluginValidationError when it is not a valid plugin.

        A function marked @hookimpl whose name is no crucible hook (a misspelling such as
        `crucible_register_world`) and a hook-named function missing its @hookimpl mark would
        otherwise be silent no-ops, so both refuse the whole module.
        """
        _refuse_unmarked_hooks(module)
        self.pm.register(module, name=name)
        unknown = [caller.name for caller in self.pm.get_hookcallers(module) or () if not caller.has_spec()]
        if unknown:
            self.pm.unregister(module)
            raise pluggy.PluginValidationError(module, "; ".join(_unknown_hook_message(n) for n in unknown))
        self.pm.check_pending()
        hooks = tuple(sorted(h.name for h in self.pm.get_hookcallers(module) or ()))
        self.infos.append(PluginInfo(name, distribution, version, module.__name__, hooks))
        self._registries.clear()

    def implementations(self, hook: str) -> list[tuple[str, Callable[..., Any]]]:
        """One hook's implementations in pluggy's call order, each named by its distribution.

        Callers that must survive a faulty plugin call these one by one instead of through
        `self.hook`, which stops at the first exception and cannot say whose it was.
        """
        caller = getattr(self.pm.hook, hook)
        return [
            (self.distribution_of(impl.plugin), impl.function) for impl in reversed(caller.get_hookimpls())
        ]


def _hook_names() -> list[str]:
    return sorted(name for name in vars(hookspecs) if name.startswith("crucible_"))


def _unknown_hook_message(name: str) -> str:
    message = f"{name} is marked @hookimpl but crucible has no such hook"
    close = difflib.get_close_matches(name, _hook_names(), n=1, cutoff=0.8)
    return message + (f" (did you mean {close[0]}?)" if close else "")


def _refuse_unmarked_hooks(module: types.ModuleType) -> None:
    marker = f"{hookspecs.PROJECT}_impl"
    for name in _hook_names():
        function = getattr(module, name, None)
        if callable(function) and not hasattr(function, marker):
            raise pluggy.PluginValidationError(
                module, f"{name} is not marked with @hookimpl (crucible_core.hookspecs.hookimpl)"
            )


def _register_into(
    registry: Registry[Any],
    owner: str,
    name: str,
    value: Any,
    /,
    *,
    settings: type | None = None,
    **traits: Any,
) -> None:
    registry.add(name, value, owner, settings=settings, traits=traits)


def new_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    return pm


def requested_names(environ: dict[str, str] | None = None) -> list[str] | None:
    """The entry-point names CRUCIBLE_LOAD_PLUGINS narrows to (core always loads), or None for all."""
    raw = (environ if environ is not None else os.environ).get(LOAD_ENV)
    if raw is None:
        return None
    names = [part.strip() for part in raw.split(",") if part.strip()]
    return sorted(set(names) | {CORE_PLUGIN})


@functools.cache
def _distributions_by_entry_point() -> dict[str, tuple[str, str]]:
    # stevedore's cache keeps no distribution; importlib's group lookup is cheap (~2 ms).
    from importlib.metadata import entry_points

    found: dict[str, tuple[str, str]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        if dist is not None:
            found[ep.name] = (dist.metadata["Name"], dist.version)
    return found


def _distribution(entry_point: Any) -> tuple[str, str]:
    dist = getattr(entry_point, "dist", None)
    if dist is not None:
        return dist.metadata["Name"], dist.version
    return _distributions_by_entry_point().get(entry_point.name, (entry_point.name, "?"))


def load_plugins(*, names: Iterable[str] | None = None, discover: bool = True) -> Plugins:
    """Discover and register installed plugins; a plugin that fails to import is listed, not fatal."""
    from stevedore import ExtensionManager, NamedExtensionManager  # deferred: keeps --version fast

    plugins = Plugins(new_manager())
    if not discover:
        return plugins
    wanted = list(names) if names is not None else requested_names()

    def on_failure(_manager: Any, entry_point: Any, exc: BaseException) -> None:
        dist, _ = _distribution(entry_point)
        plugins.failures.append(LoadFailure(entry_point.name, dist, f"{type(exc).__name__}: {exc}"))

    if wanted is None:
        manager = ExtensionManager(
            ENTRY_POINT_GROUP, invoke_on_load=False, on_load_failure_callback=on_failure
        )
    else:
        manager = NamedExtensionManager(
            ENTRY_POINT_GROUP,
            names=wanted,
            invoke_on_load=False,
            on_load_failure_callback=on_failure,
            name_order=True,
        )
    for extension in manager:
        dist, version = _distribution(extension.entry_point)
        module: object = extension.plugin  # whatever the entry point named: checked below
        if not isinstance(module, types.ModuleType):
            plugins.failures.append(
                LoadFailure(extension.name, dist, "entry point must name a module of @hookimpl functions")
            )
            continue
        try:
            plugins.register_module(module, name=extension.name, distribution=dist, version=version)
        except (ValueError, pluggy.PluginValidationError) as exc:
            plugins.failures.append(LoadFailure(extension.name, dist, f"{type(exc).__name__}: {exc}"))
    return plugins
