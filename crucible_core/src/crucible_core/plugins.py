"""Finding plugins (stevedore over the `crucible` entry-point group) and calling them (pluggy)."""

from __future__ import annotations

import contextvars
import functools
import importlib
import os
import sys
import time
import types
from collections.abc import Iterable
from importlib.machinery import PathFinder
from typing import TYPE_CHECKING, Any, NamedTuple

import pluggy

from crucible_core import hookspecs, plugin_index
from crucible_core.errors import CrucibleError, PluginError
from crucible_core.plugin_index import IndexedEntryPoint
from crucible_core.registry import Registry

if TYPE_CHECKING:
    from crucible_core.protocols import DomainPacks

ENTRY_POINT_GROUP = "crucible"
LOAD_ENV = "CRUCIBLE_LOAD_PLUGINS"
TRACE_ENV = "CRUCIBLE_TRACE_PLUGINS"
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
    "service transport": "crucible_register_service_transports",
    "command": "crucible_register_commands",
    "reporter": "crucible_register_reporters",
    "pack": "crucible_register_packs",
    "task kind": "crucible_register_task_kinds",
    "publisher": "crucible_register_publishers",
    "task runner": "crucible_register_task_runners",
    "flow renderer": "crucible_register_flow_renderers",
    "workspace memory": "crucible_register_workspace_memories",
    "init template": "crucible_register_init_templates",
    "workflow language": "crucible_register_workflow_languages",
    "lane": "crucible_register_lanes",
    "round strategy": "crucible_register_round_strategies",
    "remote measure": "crucible_register_remote_measures",
}


class PluginInfo(NamedTuple):
    name: str  # the entry-point name
    distribution: str
    version: str
    module: str
    hooks: tuple[str, ...]


class LoadFailure(NamedTuple):
    name: str
    distribution: str
    error: str


class Plugins:
    """One plugin manager with its loaded plugins; build a fresh one per test."""

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self.pm = pm
        self.infos: list[PluginInfo] = []
        self.failures: list[LoadFailure] = []
        self._registries: dict[str, Registry[Any]] = {}
        # Per observing hook: the implementations pluggy had when the plan was made, and the plan
        # (see `_direct`): what to call, in pluggy's order, and the arguments they take.
        self._direct_plans: dict[str, tuple[list[Any], tuple[Any, ...] | None, frozenset[str]]] = {}

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

        The registration hook is called through pluggy one plugin at a time (pluggy's order), so
        each registration is credited to its plugin and a duplicate names both.
        strict (what a run wants) raises when two plugins registered one name; a listing asks
        for strict=False and shows the conflicts instead.
        """
        registry = self._registries.get(kind)
        if registry is None:
            registry = Registry(kind, unloaded=tuple(sorted({f.distribution for f in self.failures})))
            hook = REGISTRATION_HOOKS[kind]
            everyone = self.pm.get_plugins()
            for impl in reversed(getattr(self.pm.hook, hook).get_hookimpls()):
                if _is_wrapper(impl):
                    continue
                owner = self.distribution_of(impl.plugin)
                alone = self.pm.subset_hook_caller(hook, remove_plugins=everyone - {impl.plugin})
                try:
                    alone(register=functools.partial(_register_into, registry, owner))
                except CrucibleError:
                    raise
                except Exception as exc:
                    raise PluginError(
                        f"plugin {owner}: {hook} raised {type(exc).__name__}: {exc}",
                        hint="fix or uninstall the plugin, or leave it out with CRUCIBLE_LOAD_PLUGINS",
                    ) from exc
            self._registries[kind] = registry
        if strict:
            registry.check()
        return registry

    def domain_packs(self) -> DomainPacks:
        """What carries out `--pack NAME` (crucible_domain_packs); none installed names its distribution."""
        found: DomainPacks | None = self.pm.hook.crucible_domain_packs()
        if found is None:
            from crucible_core.registry import provider_of

            provider = provider_of("hook", "crucible_domain_packs")
            raise PluginError(
                f"--pack runs an installed domain pack, which {provider} does and is not installed",
                hint=f"pip install {provider}, or pass --manifest",
            )
        return found

    def register_module(self, module: object, *, name: str, distribution: str, version: str) -> None:
        """Register one plugin module (or, in a test, any object with @hookimpl methods); raise
        PluginValidationError when it is not a valid plugin.

        A function marked @hookimpl whose name is no crucible hook (a misspelling such as
        `crucible_register_world`) and a hook-named function missing its @hookimpl mark would
        otherwise be silent no-ops, so both refuse the whole module.
        """
        _refuse_unmarked_hooks(module)
        self.pm.register(module, name=name)
        # pluggy finds a plugin's callers by walking every hook's implementations: asked once
        callers = self.pm.get_hookcallers(module) or ()
        unknown = [caller.name for caller in callers if not caller.has_spec()]
        if unknown:
            self.pm.unregister(module)
            raise pluggy.PluginValidationError(module, "; ".join(_unknown_hook_message(n) for n in unknown))
        self.pm.check_pending()
        hooks = tuple(sorted(caller.name for caller in callers))
        where = getattr(module, "__name__", None) or type(module).__qualname__
        self.infos.append(PluginInfo(name, distribution, version, where, hooks))
        self._registries.clear()

    def call(self, hook: str, **kwargs: Any) -> list[Any]:
        """Call `hook` through pluggy (argument pruning, wrappers, tracing); its non-None results.

        An implementation that raises ends the call as HookFailed, which names its plugin.
        """
        caller = getattr(self.pm.hook, hook)
        token = _CALLING.set((self, _implementation_codes(caller)))
        try:
            results: list[Any] = caller(**kwargs)
        except Exception as exc:
            raise HookFailed(self.owner_of(exc, hook), hook, exc) from exc
        finally:
            _CALLING.reset(token)
        return results

    def observe(self, hook: str, *, mute: set[object] | None = None, **kwargs: Any) -> list[str]:
        """Call an observing hook so that every implementation hears it, whatever another one does.

        pluggy stops a call at the first exception; here the plugins after the one that raised
        are called again on their own (through pluggy, in its order). Returns one line per fault
        for the caller to record once the event is delivered. With `mute`, a plugin that raised
        is added to it and skipped from then on (an observer of every event, disabled after one
        fault); without it, every call asks every plugin again.
        """
        direct = self._direct(hook, kwargs)
        if direct is not None:
            return self._observe_directly(hook, direct, mute, kwargs)
        faults: list[str] = []
        skipped: set[object] = set(mute or ())
        while True:
            caller = (
                self.pm.subset_hook_caller(hook, remove_plugins=skipped)
                if skipped
                else getattr(self.pm.hook, hook)
            )
            try:
                caller(**kwargs)
                return faults
            except Exception as exc:
                # pluggy's call order, worked out only once one raised (an observer hears every event)
                order = [impl.plugin for impl in reversed(caller.get_hookimpls()) if not _is_wrapper(impl)]
                impl = _implementation_in(exc, _implementation_codes(caller))
                owner = self.distribution_of(impl.plugin) if impl is not None else "a plugin"
                faults.append(f"plugin {owner}: {hook} raised {type(exc).__name__}: {exc} (ignored)")
                if impl is None or impl.plugin not in order:
                    return faults  # a wrapper or pluggy itself: every implementation was reached
                if mute is not None:
                    mute.add(impl.plugin)
                skipped.update(order[: order.index(impl.plugin) + 1])

    def _direct(self, hook: str, kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
        """The implementations of an observing hook to call one by one, in pluggy's order, or None
        to go through pluggy: a wrapper wraps them, a monitor traces the call, the hook is
        firstresult or historic, or an argument is missing (pluggy says which). An observer hears
        every session-log line, and pluggy's call machinery cost more than the three observers a
        counter run has (about 3 us a line here).
        """
        pm = self.pm
        if not isinstance(pm, _Manager) or pm.monitored:
            return None
        caller = getattr(pm.hook, hook)
        impls = caller.get_hookimpls()
        known = self._direct_plans.get(hook)
        if known is None or known[0] != impls:  # a plugin registered or left since
            spec = caller.spec
            # pluggy stops a firstresult hook at the first answer, and keeps a historic call
            # for plugins registered later: neither is a plain call of each implementation
            special = spec is not None and bool(spec.opts.get("firstresult") or spec.opts.get("historic"))
            plan = None if special or any(_is_wrapper(impl) for impl in impls) else tuple(reversed(impls))
            takes = frozenset(name for impl in impls for name in impl.argnames)
            known = self._direct_plans[hook] = (impls, plan, takes)
        _, plan, takes = known
        return plan if plan is not None and takes <= kwargs.keys() else None

    def _observe_directly(
        self, hook: str, impls: tuple[Any, ...], mute: set[object] | None, kwargs: dict[str, Any]
    ) -> list[str]:
        """`observe` without pluggy's machinery: each implementation called as pluggy calls it
        (its arguments by position), the one that raises named and, with `mute`, muted."""
        faults: list[str] = []
        for impl in impls:
            if mute and impl.plugin in mute:
                continue
            try:
                impl.function(*[kwargs[name] for name in impl.argnames])
            except Exception as exc:
                owner = self.distribution_of(impl.plugin)
                faults.append(f"plugin {owner}: {hook} raised {type(exc).__name__}: {exc} (ignored)")
                if mute is not None:
                    mute.add(impl.plugin)
        return faults

    def owner_of(self, exc: BaseException, hook: str) -> str:
        """The distribution whose implementation of `hook` raised `exc` (found on its traceback)."""
        impl = _implementation_in(exc, _implementation_codes(getattr(self.pm.hook, hook)))
        return self.distribution_of(impl.plugin) if impl is not None else "?"


# The hook call under way on this thread (Plugins.call), so a value a plugin builds during it can
# say which plugin built it (implementer()): pluggy returns results without their owners.
_CALLING: contextvars.ContextVar[tuple[Plugins, dict[types.CodeType, Any]] | None] = contextvars.ContextVar(
    "crucible_hook_call", default=None
)


def implementer() -> str | None:
    """The distribution whose hook implementation is running now, inside Plugins.call; else None."""
    calling = _CALLING.get()
    if calling is None:
        return None
    plugins, codes = calling
    impl = _implementation_on_stack(codes)
    return plugins.distribution_of(impl.plugin) if impl is not None else None


class HookFailed(Exception):
    """A plugin's implementation raised during a hook call; `owner` names its distribution."""

    def __init__(self, owner: str, hook: str, error: Exception) -> None:
        super().__init__(f"plugin {owner}: {hook} raised {type(error).__name__}: {error}")
        self.owner = owner
        self.hook = hook
        self.error = error


def _is_wrapper(impl: Any) -> bool:
    return bool(impl.wrapper or impl.hookwrapper)


def _implementation_codes(caller: Any) -> dict[types.CodeType, Any]:
    """Each implementation's code object -> the implementation, or None where several plugins share
    one code object (one function registered twice): a frame of it cannot say whose it is."""
    found: dict[types.CodeType, Any] = {}
    for impl in caller.get_hookimpls():
        code = getattr(impl.function, "__code__", None)
        if isinstance(code, types.CodeType):
            found[code] = None if code in found else impl
    return found


def _implementation_in(exc: BaseException, codes: dict[types.CodeType, Any]) -> Any:
    """The implementation pluggy called on the way to `exc`: the outermost of its traceback frames."""
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code in codes:
            return codes[code]  # None when it cannot be told whose
        tb = tb.tb_next
    return None


def _implementation_on_stack(codes: dict[types.CodeType, Any]) -> Any:
    """The implementation now running below the caller (a register callback's caller), or None."""
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None:
        if frame.f_code in codes:
            return codes[frame.f_code]  # None when it cannot be told whose
        frame = frame.f_back
    return None


@functools.cache
def _hook_names() -> tuple[str, ...]:
    return tuple(sorted(name for name in vars(hookspecs) if name.startswith("crucible_")))


def _unknown_hook_message(name: str) -> str:
    message = f"{name} is marked @hookimpl but crucible has no such hook"
    import difflib  # for a hint only, so not imported at start-up

    close = difflib.get_close_matches(name, _hook_names(), n=1, cutoff=0.8)
    return message + (f" (did you mean {close[0]}?)" if close else "")


def _refuse_unmarked_hooks(module: object) -> None:
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
    settings: type | str | None = None,
    **traits: Any,
) -> None:
    registry.add(name, value, owner, settings=settings, traits=traits)


# What pluggy takes as an implementation: anything else it passes over (see parse_hookimpl_opts).
_HOOKABLE = (types.FunctionType, types.MethodType, staticmethod, classmethod)
# Names a module's type defines itself (`__dict__`, `__annotations__`...): pluggy's static look
# would find the type's attribute first, so a plugin function of such a name is left to pluggy.
_MODULE_DESCRIPTORS = frozenset(vars(types.ModuleType)) | frozenset(vars(object))


def _mark_of(function: Any, attribute: str) -> Any:
    for holder in (function, getattr(function, "__func__", None)):
        opts = getattr(holder, attribute, None) if holder is not None else None
        if opts is not None:
            return opts if isinstance(opts, dict) else None
    return None


class _Manager(pluggy.PluginManager):
    """pluggy's manager, with a quicker look at a plugin module's names.

    pluggy looks at every name in a registered module (its imports included: some 670 names over
    the 29 standard plugins, 3 ms of every start) through `inspect.getattr_static`. In a module,
    that finds the module's own value, and only a function, a method or a class- or static
    method can carry an implementation mark: any other value is passed over here without the
    look, a module's own plain function has its mark read here as pluggy reads it, and the rest
    are left to pluggy, so what registers is unchanged.
    """

    monitored = False  # a monitor (tracing) sees every hook call: observers go through pluggy then

    def add_hookcall_monitoring(self, before: Any, after: Any) -> Any:
        self.monitored = True
        return super().add_hookcall_monitoring(before, after)

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        if isinstance(plugin, types.ModuleType):
            value = vars(plugin).get(name)
            if not isinstance(value, _HOOKABLE):
                return None
            if type(value) is types.FunctionType and name not in _MODULE_DESCRIPTORS:
                # What pluggy's static look finds for a module's own plain function is that
                # function, and its mark is the `crucible_impl` attribute (a dict): pluggy's
                # reading of it, without the look (about 40 us a function; 114 at every start).
                return _mark_of(value, self.project_name + "_impl")
        return super().parse_hookimpl_opts(plugin, name)


def new_manager(environ: dict[str, str] | None = None) -> pluggy.PluginManager:
    pm = _Manager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    if (environ if environ is not None else os.environ).get(TRACE_ENV, "") not in ("", "0"):
        trace_hook_calls(pm, sys.stderr)
    return pm


def trace_hook_calls(pm: pluggy.PluginManager, stream: Any) -> None:
    """Print each hook call with the plugins it reached and how long it took (CRUCIBLE_TRACE_PLUGINS=1)."""
    started: list[float] = []

    def before(hook: str, impls: Any, kwargs: Any) -> None:
        started.append(time.perf_counter())

    def after(outcome: Any, hook: str, impls: Any, kwargs: Any) -> None:
        elapsed = (time.perf_counter() - started.pop()) * 1000
        names = ", ".join(pm.get_name(impl.plugin) or "?" for impl in reversed(impls))
        failed = f" raised {type(outcome.exception).__name__}" if outcome.exception is not None else ""
        try:
            stream.write(f"crucible: hook {hook} [{names or 'no implementation'}] {elapsed:.2f} ms{failed}\n")
            stream.flush()
        except (OSError, ValueError):  # nobody reads stderr any more: tracing must not break a run
            pass

    pm.add_hookcall_monitoring(before, after)


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
    """Discover and register installed plugins; a plugin that fails to import is listed, not fatal.

    stevedore discovers the entry points; what it found is kept in the plugin index
    (plugin_index.py), and while the installation is unchanged the next process imports the
    indexed modules directly, without `importlib.metadata` and without scanning distributions.
    """
    plugins = Plugins(new_manager())
    if not discover:
        return plugins
    wanted = list(names) if names is not None else requested_names()
    key = plugin_index.fingerprint()
    indexed = plugin_index.read(ENTRY_POINT_GROUP, key)
    if indexed is None:
        found = _discover(plugins, wanted)
        plugin_index.keep(ENTRY_POINT_GROUP, key, found, _locations(found))
        return plugins
    loaded: list[tuple[IndexedEntryPoint, object]] = []
    finder = _IndexedLocations(indexed.locations)
    sys.meta_path.insert(0, finder)
    try:
        for entry_point in indexed.entry_points:
            if wanted is not None and entry_point.name not in wanted:
                continue
            try:
                loaded.append((entry_point, _load_entry_point(entry_point.value)))
            except Exception as exc:  # what stevedore's failure callback receives, listed the same way
                plugins.failures.append(
                    LoadFailure(entry_point.name, entry_point.distribution, f"{type(exc).__name__}: {exc}")
                )
    finally:
        sys.meta_path.remove(finder)
    if wanted is not None:  # in the order asked for, as stevedore's NamedExtensionManager(name_order=True)
        loaded.sort(key=lambda item: wanted.index(item[0].name))
    for entry_point, module in loaded:
        _register_loaded(plugins, module, entry_point.name, entry_point.distribution, entry_point.version)
    return plugins


class _IndexedLocations:
    """A meta path finder, while the indexed plugins load: each plugin's top-level module is
    looked for first in the import path entry the index found it in.

    Python looks for a top-level module in each import path entry in turn; a development
    install (one entry per editable member, 36 here) put most plugins 10 to 35 entries down,
    some 0.15 ms each to find, 30 of them at every start (issue 27, docs/performance.md). Found
    there by Python's own path finder, it is the module Python would import, unless another
    entry earlier on the path came to hold a module of that name without any distribution being
    installed (which changes the index's fingerprint); not found there, the whole path is searched.
    """

    def __init__(self, locations: dict[str, str]) -> None:
        self.locations = locations

    def find_spec(self, name: str, path: Any, target: types.ModuleType | None = None) -> Any:
        entry = self.locations.get(name) if path is None else None
        spec = PathFinder.find_spec(name, [entry], target) if entry is not None else None
        # A namespace package's portions may span entries: only the whole path finds them all.
        return spec if spec is not None and spec.loader is not None else None


def _locations(found: list[IndexedEntryPoint]) -> dict[str, str]:
    """Where each entry point's top-level module was imported from (those that loaded)."""
    locations: dict[str, str] = {}
    for entry_point in found:
        top = entry_point.value.split("[")[0].partition(":")[0].strip().split(".")[0]
        entry = plugin_index.location_of(sys.modules.get(top))
        if entry is not None:
            locations[top] = entry
    return locations


def _load_entry_point(value: str) -> object:
    """What an entry point's value (`module`, `module:attribute`, maybe with `[extras]`) names."""
    module, _, attribute = value.split("[")[0].partition(":")
    found: object = importlib.import_module(module.strip())
    for part in attribute.strip().split(".") if attribute.strip() else ():
        found = getattr(found, part)
    return found


def _register_loaded(plugins: Plugins, module: object, name: str, dist: str, version: str) -> None:
    if not isinstance(module, types.ModuleType):  # whatever the entry point named: checked here
        plugins.failures.append(
            LoadFailure(name, dist, "entry point must name a module of @hookimpl functions")
        )
        return
    try:
        plugins.register_module(module, name=name, distribution=dist, version=version)
    except (ValueError, pluggy.PluginValidationError) as exc:
        plugins.failures.append(LoadFailure(name, dist, f"{type(exc).__name__}: {exc}"))


def _discover(plugins: Plugins, wanted: list[str] | None) -> list[IndexedEntryPoint]:
    """Load plugins through stevedore; every entry point of the group, for the index."""
    from stevedore import ExtensionManager, NamedExtensionManager  # deferred: keeps --version fast

    def on_failure(_manager: Any, entry_point: Any, exc: BaseException) -> None:
        dist, _ = _distribution(entry_point)
        plugins.failures.append(LoadFailure(entry_point.name, dist, f"{type(exc).__name__}: {exc}"))

    manager: ExtensionManager[Any]
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
        _register_loaded(plugins, extension.plugin, extension.name, dist, version)
    return [
        IndexedEntryPoint(entry_point.name, entry_point.value, *_distribution(entry_point))
        for entry_point in manager.list_entry_points()
    ]
