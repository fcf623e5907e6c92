"""Plugin-owned settings: each driver's own manifest keys, validated by the attrs class it registered.

Core's schema holds only the keys the engine itself reads. Whatever else a manifest writes in
`[world]`, `[judge]` or `[agent]` (including subtables such as `[agent.openshell]`) belongs to
the driver the manifest selects there, and is converted into that driver's settings class with
the same strict converter as the rest of the manifest: an unknown key is still refused with its
key path, and the refusal names the plugin whose schema refused it.

How the `[agent]` extras are split, so that flipping backends is configuration only:

1. keys the selected backend's settings class declares go to the backend;
2. keys the selected harness's settings class declares go to the harness (only when the
   backend runs a harness);
3. keys another installed backend or harness declares are validated by that driver's class and
   set aside (`crucible check` lists them as unused), so `[agent.openshell]` may stay in a
   manifest whose backend is switched to `local`;
4. anything left is handed to the selected backend, whose schema refuses it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.errors import ManifestError
from crucible_core.manifest.containment import escape_problem, text_problem
from crucible_core.manifest.converter import (
    ManifestValueError,
    _suggest,
    converter,
    describe_structure_error,
)
from crucible_core.manifest.models import AgentSection, JudgeSection, WorldSection
from crucible_core.registry import provider_of

if TYPE_CHECKING:
    from crucible_core.plugins import Plugins
    from crucible_core.registry import Entry, Registry

# `[search]` and `--wide` ask the round strategy registered under this name (run/rounds.py).
ROUND_STRATEGY = "round strategy"  # its registry's kind
WIDE = "wide"

# The keys core itself reads in each driver table; every other key belongs to a plugin.
CORE_KEYS: Mapping[str, frozenset[str]] = {
    "world": frozenset(f.name for f in attrs.fields(WorldSection)),
    "judge": frozenset(f.name for f in attrs.fields(JudgeSection)),
    "agent": frozenset(f.name for f in attrs.fields(AgentSection)),
}


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class DriverTables:
    """The manifest keys core does not read, per section, exactly as parsed (plugins validate them)."""

    world: Mapping[str, Any] = attrs.field(factory=dict)
    judge: Mapping[str, Any] = attrs.field(factory=dict)
    agent: Mapping[str, Any] = attrs.field(factory=dict)

    @classmethod
    def split(cls, raw: dict[str, Any]) -> tuple[dict[str, Any], DriverTables]:
        """The raw manifest with only core keys left in its driver sections, and the rest."""
        core = dict(raw)
        extras: dict[str, dict[str, Any]] = {}
        for section, keys in CORE_KEYS.items():
            table = raw.get(section)
            if not isinstance(table, dict):
                continue  # not a table: the core converter refuses it with its own message
            core[section] = {k: v for k, v in table.items() if k in keys}
            extras[section] = {k: v for k, v in table.items() if k not in keys}
        return core, cls(**extras)

    def near_misses(self, cutoff: float = 0.8) -> list[str]:
        """Plugin-bound keys that look like a misspelled core key, for a refused core table."""
        found = []
        for section in CORE_KEYS:
            for key in getattr(self, section):
                close = core_key_meant(section, key, cutoff=cutoff)
                if close:
                    found.append(f"unknown key {key!r} in [{section}] (did you mean {close}?)")
        return found


def core_key_meant(
    section: str, key: str, *, others: frozenset[str] = frozenset(), cutoff: float = 0.6
) -> str | None:
    """The core key of `section` that `key` is probably a misspelling of, or None.

    None as well when a key of `others` (the installed drivers' own) is at least as close: then
    the misspelling is the plugin's to name.
    """
    core = sorted(CORE_KEYS[section])
    import difflib  # for a hint only, so not imported at start-up

    close = difflib.get_close_matches(key, core + sorted(others - CORE_KEYS[section]), n=1, cutoff=cutoff)
    return close[0] if close and close[0] in CORE_KEYS[section] else None


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class DriverSettings:
    """One driver's resolved settings: which plugin owns them and what they resolved to."""

    role: str  # world, judge, backend, harness
    driver: str  # the registered name
    plugin: str | None  # the distribution that registered it (None: not installed)
    table: str  # where the keys live, for messages: "[judge]", "[agent]"
    value: Any = None  # an instance of the registered settings class, or None when it has none
    used: bool = True  # False: validated for a driver the manifest does not select

    def describe(self) -> str:
        body = render(self.value) if self.value is not None else "(no settings)"
        owner = self.plugin or "not installed"
        unused = "" if self.used else ", not used by this run"
        return f"{self.role} {self.driver} ({owner}{unused}) {self.table}: {body}"


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class ResolvedSettings:
    drivers: tuple[DriverSettings, ...] = ()

    def of(self, role: str) -> Any:
        """The settings object of the selected driver in `role` (None when it registered no class)."""
        for entry in self.drivers:
            if entry.role == role and entry.used:
                return entry.value
        return None

    def __iter__(self) -> Iterator[DriverSettings]:
        return iter(self.drivers)


def render(value: Any) -> str:
    """Settings as `key=value` pairs, nested tables flattened with dots, for `crucible check`."""
    pairs: list[str] = []

    def walk(item: Any, prefix: str) -> None:
        if attrs.has(type(item)):
            for field in attrs.fields(type(item)):
                walk(getattr(item, field.name), f"{prefix}{field.name}.")
            return
        pairs.append(f"{prefix.rstrip('.')}={_short(item)}")

    walk(value, "")
    return " ".join(pairs) if pairs else "(defaults)"


def _short(item: Any) -> str:
    if isinstance(item, tuple | list):
        return "[" + ", ".join(_short(i) for i in item) + "]"
    if isinstance(item, Mapping):
        return "{" + ", ".join(f"{k}" for k in item) + "}"  # values may be secrets: names only
    text = str(item)
    return text if len(text) <= 80 else text[:77] + "..."


def structure_settings(
    manifest_path: Path, cls: type, table: Mapping[str, Any], *, section: str, owner: str
) -> Any:
    """Convert one driver's keys into its settings class, or raise a ManifestError naming the plugin."""
    try:
        return converter.structure(dict(table), cls)
    except Exception as exc:  # cattrs raises several error types; a class may refuse with ValueError
        if isinstance(exc, ValueError | TypeError) and not isinstance(exc, ManifestValueError):
            problems = [f"[{section}]: {exc}"]  # the settings class refused a combination
        else:
            problems = describe_structure_error(_at(section, exc))
    raise ManifestError(
        f"{manifest_path}: {'; '.join(problems)} (checked by {owner})",
        hint=f"see `crucible help manifest`, and {owner.split(',')[0]}'s documentation for its keys",
    ) from None


def _at(section: str, exc: BaseException) -> BaseException:
    """Root a plugin schema's error at its manifest section, so key paths read `[agent.openshell].x`."""
    from crucible_core.manifest.converter import _At

    error: BaseException = exc
    for part in reversed(section.split(".")):
        error = _At(f".{part}", error)
    return error


def resolve_settings(
    plugins: Plugins,
    manifest_path: Path,
    tables: DriverTables,
    *,
    world: str,
    judge: str,
    backend: str,
    harness: str,
    deploy: Mapping[str, Any] | None = None,
    search: Mapping[str, Any] | None = None,
) -> ResolvedSettings:
    """Validate every driver table against its plugin's settings class (an uninstalled driver is
    skipped), `[deploy]` against the settings class of the task runner that reads it, and
    `[search]` against the round strategy's (run/rounds.py)."""
    resolved: list[DriverSettings] = []

    def one(role: str, registry: Registry[Any], name: str, section: str, table: Mapping[str, Any]) -> None:
        entry = registry.entries.get(name)
        if entry is None:
            resolved.append(DriverSettings(role, name, None, f"[{section}]"))
            return
        owner = f"{entry.plugin}, which registered {role} {name!r}"
        value = _structure_entry(manifest_path, entry, table, section=section, owner=owner)
        resolved.append(DriverSettings(role, name, entry.plugin, f"[{section}]", value))

    one("world", plugins.registry("world", strict=False), world, "world", tables.world)
    if judge != "task" or tables.judge:
        one("judge", plugins.registry("judge", strict=False), judge, "judge", tables.judge)

    backends = plugins.registry("backend", strict=False)
    harnesses = plugins.registry("harness", strict=False)
    agent = dict(tables.agent)
    chosen_backend = backends.entries.get(backend)
    runs_harness = chosen_backend is not None and bool(chosen_backend.trait("runs_harness"))
    backend_keys = _take(agent, _fields(chosen_backend))
    chosen_harness = harnesses.entries.get(harness) if runs_harness else None
    harness_keys = _take(agent, _fields(chosen_harness))
    set_aside: list[DriverSettings] = []
    for role, registry in (("backend", backends), ("harness", harnesses)):
        for entry in registry:
            if not agent:
                # Only keys the chosen drivers left over can belong to another driver: with none
                # left, the others' settings classes (a module each) are not imported at all.
                break
            if entry in (chosen_backend, chosen_harness):
                continue
            claimed = _take(agent, _fields(entry))
            if claimed:
                owner = f"{entry.plugin}, which registered {role} {entry.name!r}"
                value = _structure_entry(manifest_path, entry, claimed, section="agent", owner=owner)
                set_aside.append(DriverSettings(role, entry.name, entry.plugin, "[agent]", value, used=False))
    # What nobody claimed: the selected backend's schema refuses it, unless it is plainly a
    # misspelled core key, which is core's to name (the backend never saw that key's meaning).
    installed = frozenset().union(*(_fields(entry) for entry in (*backends, *harnesses) if agent))
    misspelled = {key: core_key_meant("agent", key, others=installed) for key in agent}
    problems = [
        f"unknown key {key!r} in [agent] (did you mean {meant}?)"
        for key, meant in misspelled.items()
        if meant
    ]
    if problems:
        raise ManifestError(
            f"{manifest_path}: {'; '.join(problems)}", hint="see `crucible help manifest` for every key"
        )
    backend_keys.update(agent)
    one("backend", backends, backend, "agent", backend_keys)
    if runs_harness:
        one("harness", harnesses, harness, "agent", harness_keys)
    if deploy is not None:
        resolved.append(_deploy_settings(plugins, manifest_path, deploy))
    if search is not None:
        resolved.append(_search_settings(plugins, manifest_path, search))
    return ResolvedSettings((*resolved, *set_aside))


def _deploy_settings(plugins: Plugins, manifest_path: Path, table: Mapping[str, Any]) -> DriverSettings:
    """`[deploy]` belongs to the task runner that registered a settings class (first in name order).

    Fields its registration names in `files=` are paths of files beside the manifest: checked
    here, as core checks its own, so a pod rendered with --pack carries them along.
    """
    owners = [entry for entry in plugins.registry("task runner", strict=False) if entry.settings is not None]
    if not owners:
        raise ManifestError(
            f"{manifest_path}: [deploy] configures where tasks run beyond this machine, and no "
            "installed task runner reads it",
            hint=f"pip install {provider_of('task runner', 'kubernetes')}, or remove [deploy]",
        )
    entry = min(owners, key=lambda owner: owner.name)
    assert entry.settings is not None
    owner = f"{entry.plugin}, which registered task runner {entry.name!r}"
    value = structure_settings(manifest_path, entry.settings, table, section="deploy", owner=owner)
    base = manifest_path.parent
    for field in entry.trait("files", ()):
        named = getattr(value, field)
        if named is None:
            continue
        problem = text_problem(named) or escape_problem(base, named)
        if problem:
            shown = repr(named if len(named) <= 60 else named[:60] + "...")
            raise ManifestError(f"{manifest_path}: [deploy].{field} = {shown} {problem}")
        if not (base / named).is_file():
            raise ManifestError(
                f"{manifest_path}: [deploy].{field} names {named!r}, which is not a file under {base}"
            )
    return DriverSettings("task runner", entry.name, entry.plugin, "[deploy]", value)


def _search_settings(plugins: Plugins, manifest_path: Path, table: Mapping[str, Any]) -> DriverSettings:
    """`[search]` belongs to the round strategy it asks for (`wide`), which registered its settings class."""
    entry = plugins.registry(ROUND_STRATEGY, strict=False).entries.get(WIDE)
    if entry is None or entry.settings is None:
        raise ManifestError(
            f"{manifest_path}: [search] asks for a wide round before the deep loop, and no installed "
            "plugin runs one",
            hint=f"pip install {provider_of(ROUND_STRATEGY, WIDE)}, or remove [search]",
        )
    owner = f"{entry.plugin}, which registered {ROUND_STRATEGY} {WIDE!r}"
    value = structure_settings(manifest_path, entry.settings, table, section="search", owner=owner)
    return DriverSettings(ROUND_STRATEGY, WIDE, entry.plugin, "[search]", value)


def _fields(entry: Entry[Any] | None) -> frozenset[str]:
    if entry is None or entry.settings is None:
        return frozenset()
    return frozenset(f.alias or f.name for f in attrs.fields(entry.settings))


def _take(table: dict[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    return {key: table.pop(key) for key in list(table) if key in keys}


def _structure_entry(
    manifest_path: Path, entry: Entry[Any], table: Mapping[str, Any], *, section: str, owner: str
) -> Any:
    if entry.settings is None:
        if table:
            core = sorted(CORE_KEYS[section.split(".")[0]])
            problems = [
                f"unknown key {key!r} in [{section}]{_suggest(key, core, f'[{section}]')}"
                for key in sorted(table)
            ]
            raise ManifestError(
                f"{manifest_path}: {'; '.join(problems)} ({owner} and takes no settings of its own)",
                hint="remove them, or select the driver they belong to (see `crucible help manifest`)",
            )
        return None
    return structure_settings(manifest_path, entry.settings, table, section=section, owner=owner)
