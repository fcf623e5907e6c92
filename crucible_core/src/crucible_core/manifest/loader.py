"""Loading a crucible.toml: parse, validate every rule, resolve paths, and freeze from the base commit."""

from __future__ import annotations

import glob
import hashlib
import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.errors import ManifestError, PluginError, UnsupportedSectionError
from crucible_core.manifest import broker_sections
from crucible_core.manifest.containment import escape_problem, is_within, text_problem, workspace_problem
from crucible_core.manifest.converter import converter, describe_structure_error, show
from crucible_core.manifest.driver_settings import DriverTables, ResolvedSettings, resolve_settings
from crucible_core.manifest.models import (
    REPO_STARTS,
    UNSUPPORTED_AGENT_KEYS,
    UNSUPPORTED_AGENT_TABLES,
    UNSUPPORTED_SECTIONS,
    UNSUPPORTED_WORKSPACE_KEYS,
    InjectEntry,
    Manifest,
)
from crucible_core.manifest.service_declaration import ServiceDeclaration, parse_declarations
from crucible_core.registry import import_path, provider_of

if TYPE_CHECKING:
    from crucible_core.plugins import Plugins

GLOB_CHARS = set("*?[")
# A self-test control is measured this many times at most: each run is a full measure.
MAX_SELFTEST_RUNS = 100
MAX_REPEATS = 100  # [judge].repeats: each repeat is a full measure
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
MAX_ARTIFACTS = 32  # [[workspace.artifact]] entries: each is walked after every keep
MAX_ARTIFACT_TITLE = 200  # a PR-body heading, not a paragraph
# The world an assembled manifest ([composite] with [[component]] tables) runs in. The plugin
# registering it names, in its `parts=` trait, the function that loads the components.
ASSEMBLED_WORLD = "composite"


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class ResolvedInject:
    source: Path  # absolute
    destination: str  # workspace-relative, posix
    frozen: bool


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class LoadedComponent:
    """One domain of an assembled manifest: its directory name in the shared workspace, its manifest."""

    name: str
    loaded: LoadedManifest


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class LoadedManifest:
    """A validated manifest with every path resolved against the manifest directory."""

    path: Path
    manifest: Manifest
    text: bytes  # the exact bytes parsed
    injects: tuple[ResolvedInject, ...]
    tables: DriverTables = DriverTables()  # the keys plugins own, as parsed
    settings: ResolvedSettings = ResolvedSettings()  # those keys, validated by each driver's plugin
    components: tuple[LoadedComponent, ...] = ()  # an assembled manifest's domains, in manifest order
    services: tuple[ServiceDeclaration, ...] = ()  # [[service]], checked before any workflow compiles

    @property
    def world_kind(self) -> str:
        if self.manifest.assembled:
            return ASSEMBLED_WORLD
        return self.manifest.world.resolved_kind(bool(self.tables.world))

    def resolve_settings(self, plugins: Plugins, *, harness: str | None = None) -> ResolvedSettings:
        """Each selected driver's settings (`harness` overrides [agent].harness, as `--harness` does)."""
        m = self.manifest
        return resolve_settings(
            plugins,
            self.path,
            self.tables,
            world=self.world_kind,
            judge=m.judge_kind(),
            backend=m.agent.backend,
            harness=harness or m.agent.harness,
            deploy=m.deploy,
            search=m.search,
        )

    @property
    def deploy_settings(self) -> Any:
        """`[deploy]` as the settings class of the task runner that owns it; None without one."""
        return self.settings.of("task runner")

    @property
    def dir(self) -> Path:
        return self.path.parent

    @property
    def workspace(self) -> Path:
        return (self.dir / self.manifest.workspace.dir).resolve()

    def resolve(self, relative: str) -> Path:
        return (self.dir / relative).resolve()

    @property
    def text_hash(self) -> str:
        return hashlib.sha256(self.text).hexdigest()

    def goal_text(self) -> str:
        agent = self.manifest.agent
        if agent.goal_file:
            return self.resolve(agent.goal_file).read_text(encoding="utf-8")
        return agent.goal or ""

    def inside_workspace(self) -> bool:
        return _is_within(self.path, self.workspace)


_is_within = is_within


def _quoted(value: str) -> str:
    return repr(value if len(value) <= 60 else value[:60] + "...")


def _fail(path: Path, message: str, *, hint: str | None = None) -> ManifestError:
    return ManifestError(f"{path}: {message}", hint=hint)


def parse_text(path: Path, data: bytes) -> dict[str, Any]:
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _fail(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message carries "(at line L, column C)".
        raise _fail(path, f"TOML syntax error: {exc}", hint="fix the syntax and run again") from None
    except RecursionError:
        raise _fail(
            path,
            f"arrays or tables are nested too deeply to read (from line {_deep_line(data)})",
            hint="no manifest key needs deep nesting",
        ) from None


def _deep_line(data: bytes, limit: int = 64) -> int:
    """The line where bracket nesting first passes `limit` (strings are not told apart: a hint only)."""
    depth, line = 0, 1
    for byte in data:
        if byte == 0x0A:
            line += 1
        elif byte in b"[{":
            depth += 1
            if depth > limit:
                return line
        elif byte in b"]}":
            depth -= 1
    return line


def _unsupported_names(raw: dict[str, Any]) -> list[str]:
    """Every section and key of `raw` this version does not execute, in the manifest's words."""

    def spelled(name: str, value: Any) -> str:
        return f"[[{name}]]" if isinstance(value, list) else f"[{name}]"

    names = [spelled(section, raw[section]) for section in UNSUPPORTED_SECTIONS if section in raw]
    agent = raw.get("agent")
    if isinstance(agent, dict):
        names += [spelled(f"agent.{t}", agent[t]) for t in UNSUPPORTED_AGENT_TABLES if t in agent]
        names += [f"[agent].{key} (image verification)" for key in UNSUPPORTED_AGENT_KEYS if key in agent]
    workspace = raw.get("workspace")
    if isinstance(workspace, dict):
        names += [
            spelled(f"workspace.{k}", workspace[k]) for k in UNSUPPORTED_WORKSPACE_KEYS if k in workspace
        ]
    return names


def _refuse_unsupported(path: Path, raw: dict[str, Any]) -> None:
    names = _unsupported_names(raw)
    if names:
        raise UnsupportedSectionError(
            f"{path}: not supported by this version of crucible: {', '.join(names)}",
            hint="remove them, or use a crucible release that executes them",
        )


def structure(path: Path, raw: dict[str, Any]) -> Manifest:
    return structure_with_tables(path, raw)[0]


def structure_with_tables(path: Path, raw: dict[str, Any]) -> tuple[Manifest, DriverTables]:
    """The core manifest, and the driver keys its plugins validate (manifest/driver_settings.py)."""
    _refuse_unsupported(path, raw)
    core, tables = DriverTables.split(raw)
    core.pop(
        "service", None
    )  # [[service]] tables: parse_services reads them (manifest/service_declaration.py)
    try:
        manifest = converter.structure(core, Manifest)
    except Exception as exc:  # cattrs raises several error types; all are manifest errors here
        problems = describe_structure_error(exc) + tables.near_misses()
        raise _fail(path, "; ".join(problems), hint="see `crucible help manifest` for every key") from None
    try:
        _validate_rules(path, manifest)
    except ManifestError as exc:
        # a core rule refused the table; a plugin-bound key spelled like a core key is likely why
        misses = tables.near_misses(cutoff=0.75)
        if misses:
            refused = exc.message.removeprefix(f"{path}: ")
            raise _fail(path, "; ".join([*misses, refused]), hint=exc.hint) from None
        raise
    return manifest, tables


def _plain_relative(value: str) -> bool:
    if not value or value.startswith("/"):
        return False
    # Split the raw text: Path("./x") would silently normalise the "." away.
    return all(part not in (".", "..") for part in value.split("/"))


def _check_carried(path: Path, where: str, entry: str) -> None:
    """A carried path is written into the repository's exclude file: it must be a plain relative
    path, which also keeps a '!' (negation) or '#' (comment) from changing what the file means."""
    problem = text_problem(entry)
    if problem:
        raise _fail(path, f"{where} {problem}")
    if not _plain_relative(entry.rstrip("/")) or entry[0] in "!#":
        raise _fail(
            path,
            f"{where} {entry!r} must be a plain relative path (no '.', '..', leading '/', '!' or '#')",
        )


def _validate_artifacts(path: Path, m: Manifest) -> None:
    declared = m.workspace.artifact
    if len(declared) > MAX_ARTIFACTS:
        raise _fail(path, f"[[workspace.artifact]]: at most {MAX_ARTIFACTS} entries (got {len(declared)})")
    for index, entry in enumerate(declared):
        where = f"[workspace].artifact[{index}]"
        _check_carried(path, f"{where}.path", entry.path)
        if entry.embed is None and entry.upload is None:
            raise _fail(
                path,
                f"{where} names neither embed nor upload: nothing would be published",
                hint="name the file to show (embed) or to keep in the run record (upload), "
                "or list the path in [workspace].carry_forward",
            )
        for key, pattern in (("embed", entry.embed), ("upload", entry.upload)):
            if pattern is None:
                continue
            problem = text_problem(pattern)
            if problem:
                raise _fail(path, f"{where}.{key} {problem}")
            parts = pattern.split("/")
            if any(part in ("", ".", "..") for part in parts) or "\\" in pattern:
                raise _fail(
                    path,
                    f"{where}.{key} {pattern!r} must be a file name (or a relative path of names) "
                    f"inside {entry.path!r}: no '.', '..', empty parts or a leading '/'",
                    hint='a glob is allowed, e.g. embed = "summary*.txt" or "V*/summary.txt"',
                )
        if entry.title is not None:
            if not entry.title.strip() or any(not ch.isprintable() for ch in entry.title):
                raise _fail(path, f"{where}.title must be a non-empty line of printable text")
            if len(entry.title) > MAX_ARTIFACT_TITLE:
                raise _fail(path, f"{where}.title is longer than {MAX_ARTIFACT_TITLE} characters")


def _validate_preflight(path: Path, m: Manifest) -> None:
    assert m.preflight is not None
    if m.judge is None:
        raise _fail(
            path, "[preflight] needs a [judge]: a task manifest has nothing to prove before a measure"
        )
    for index, cmd in enumerate(m.preflight.commands):
        if not cmd.strip():
            raise _fail(path, f"[preflight].commands[{index}] is empty")
    for index, rung in enumerate(m.preflight.rung):
        where = f"[[preflight.rung]][{index}]"
        if not rung.cmd.strip():
            raise _fail(path, f"{where}.cmd is empty")
        if rung.when not in ("start", "candidate"):
            raise _fail(path, f'{where}.when must be "start" or "candidate" (got {show(rung.when)})')


def _validate_search(path: Path, m: Manifest) -> None:
    """`[search]`'s own keys are its round strategy's (manifest/driver_settings.py); a round needs a judge."""
    if m.judge is None:
        raise _fail(path, "[search] needs a [judge]: a wide round ranks its candidates by the judge")


def _validate_rules(path: Path, m: Manifest) -> None:
    _workflow_rules(path, m)
    if m.repo is None:
        # Only a playbook may start empty (C-MANIFEST); an assembled manifest's components bring their own
        # repositories. A setup_cmd builds the workspace, but the run's identity and its record
        # name the repository it stands for, so it does not replace [repo].
        if not m.playbook and not m.assembled:
            raise _fail(
                path,
                "[repo] is required: only a playbook may leave it out",
                hint='add [repo] with path = "." or url = "..." (a setup_cmd still builds the '
                'workspace), or make the manifest a playbook ([workflow] type = "playbook", no [judge])',
            )
    elif (m.repo.url is None) == (m.repo.path is None):
        raise _fail(path, "[repo] must set exactly one of url and path")
    elif m.repo.start_from not in REPO_STARTS:
        raise _fail(
            path,
            f"[repo].start_from must be one of {', '.join(REPO_STARTS)}, not {show(m.repo.start_from)}",
        )
    elif m.repo.start_from == "worktree" and (m.repo.path is None or m.repo.ref is not None):
        raise _fail(
            path,
            '[repo].start_from = "worktree" needs [repo].path and no ref: only a local checkout has a '
            "working tree, and its working tree is the one state it can start from",
            hint='remove ref (or url), or use start_from = "head"',
        )
    if m.judge is not None:
        if m.judge.selftest is not None and not 1 <= m.judge.selftest.runs <= MAX_SELFTEST_RUNS:
            raise _fail(
                path,
                f"[judge.selftest].runs must be at least 1 and at most {MAX_SELFTEST_RUNS} "
                f"(got {show(m.judge.selftest.runs)})",
            )
        if not 1 <= m.judge.repeats <= MAX_REPEATS:
            raise _fail(
                path,
                f"[judge].repeats must be at least 1 and at most {MAX_REPEATS} (got {show(m.judge.repeats)})",
            )
        if m.judge.noise not in (None, "auto"):
            raise _fail(path, f'[judge].noise must be "auto" when set (got {show(m.judge.noise)})')
        if m.judge.noise == "auto" and m.judge.repeats < 2:
            raise _fail(
                path,
                '[judge].noise = "auto" needs [judge].repeats of at least 2 to see the spread',
                hint="repeats = 5 is a good start",
            )
        if m.judge.needs == "any":  # the converter refused an empty one; "any" would name none
            raise _fail(
                path,
                f"[judge].needs: must name a capability, not {show(m.judge.needs)}",
                hint='leave it out to measure on this machine, or name one, e.g. needs = "gpu"',
            )
        if m.judge_kind() == "command" and not (m.judge.measure_cmd or "").strip():
            raise _fail(path, "[judge].measure_cmd is required (and not empty) for the command judge")
    if m.preflight is not None:
        _validate_preflight(path, m)
    if m.search is not None:
        _validate_search(path, m)
    agent = m.agent
    if agent.goal is not None and agent.goal_file is not None:
        raise _fail(path, "[agent] sets both goal and goal_file; keep one")
    for index, entry in enumerate(m.workspace.carry_forward):
        _check_carried(path, f"[workspace].carry_forward[{index}]", entry)
    _validate_artifacts(path, m)
    base = path.parent
    problem = workspace_problem(base, m.workspace.dir)
    if problem:
        raise _fail(path, f"[workspace].dir = {_quoted(m.workspace.dir)} {problem}")
    problems = broker_sections.validate(m.outputs, m.capabilities)
    if problems:
        raise _fail(
            path, "; ".join(problems), hint="see `crucible help broker` for [outputs] and [capabilities]"
        )


def expand_injects(path: Path, m: Manifest) -> tuple[ResolvedInject, ...]:
    """Expand string, directory and glob injects into one entry per regular file, sorted."""
    base = path.parent.resolve()
    resolved: list[ResolvedInject] = []
    for index, entry in enumerate(m.workspace.inject):
        where = f"[workspace].inject[{index}]"
        for part, text in _inject_texts(entry):
            problem = text_problem(text)
            if problem:
                raise _fail(path, f"{where}{part} {problem}")
        if isinstance(entry, InjectEntry):
            source = (base / entry.src).resolve()
            if not source.exists():
                raise _fail(path, f"{where}: source {entry.src!r} does not exist")
            destination = entry.dst if entry.dst is not None else entry.src
            if not _plain_relative(destination):
                raise _fail(path, f"{where}: dst {destination!r} must stay inside the workspace")
            if source.is_dir():
                for file in _files_under(source):
                    rel = file.relative_to(source).as_posix()
                    resolved.append(ResolvedInject(file, f"{destination.rstrip('/')}/{rel}", entry.frozen))
            else:
                resolved.append(ResolvedInject(source, Path(destination).as_posix(), entry.frozen))
            continue
        matches = _expand_string(base, entry)
        if not matches:
            raise _fail(path, f"{where}: {entry!r} matches no file under {base}")
        for file in matches:
            if not _is_within(file, base):
                raise _fail(
                    path, f"{where}: {entry!r} escapes the manifest directory", hint="use the table form"
                )
            resolved.append(ResolvedInject(file, file.relative_to(base).as_posix(), True))
    workspace = (base / m.workspace.dir).resolve()
    for inject in resolved:
        if _is_within(inject.source, workspace):
            # a frozen re-copy from inside the workspace would copy back the agent's own edit
            raise _fail(
                path,
                f"[workspace].inject source {inject.source} lies inside the workspace, where the agent can edit it",
                hint="keep inject sources outside [workspace].dir",
            )
    return tuple(resolved)


def _inject_texts(entry: str | InjectEntry) -> list[tuple[str, str]]:
    if isinstance(entry, str):
        return [("", entry)]
    return [(".src", entry.src)] + ([(".dst", entry.dst)] if entry.dst is not None else [])


def _files_under(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file())


def _expand_string(base: Path, entry: str) -> list[Path]:
    if Path(entry).is_absolute() or ".." in Path(entry).parts:
        return [Path(entry).resolve()] if not any(c in entry for c in GLOB_CHARS) else []
    target = base / entry
    if any(c in entry for c in GLOB_CHARS):
        found = (Path(p) for p in glob.glob(str(target), recursive=True))
        files: list[Path] = []
        for hit in found:
            files.extend(_files_under(hit) if hit.is_dir() else [hit] if hit.is_file() else [])
        return sorted({f.resolve() for f in files})
    if target.is_dir():
        return _files_under(target.resolve())
    return [target.resolve()] if target.is_file() else []


def _check_references(path: Path, m: Manifest) -> None:
    base = path.parent
    agent = m.agent
    for key, value, want_dir in (
        ("method_prompt", agent.method_prompt, False),
        ("goal_file", agent.goal_file, False),
    ):
        if value is None:
            continue
        problem = text_problem(value) or escape_problem(base, value)
        if problem:
            raise _fail(path, f"[agent].{key} = {_quoted(value)} {problem}")
        target = base / value
        ok = target.is_dir() if want_dir else target.is_file()
        if not ok:
            kind = "directory" if want_dir else "file"
            raise _fail(path, f"[agent].{key} names {value!r}, which is not a {kind} under {base}")
    if m.repo is not None and m.repo.path is not None:
        # [repo].path is only read (cloned), so it may name a repository outside the manifest dir.
        problem = text_problem(m.repo.path)
        if problem:
            raise _fail(path, f"[repo].path {problem}")
        repo = (base / m.repo.path).resolve()
        if not repo.is_dir():
            raise _fail(
                path,
                f"[repo].path {m.repo.path!r} is not a directory ({repo} does not exist or is a file)",
                hint="point it at a git repository, relative to the manifest directory",
            )


def load_manifest(path: Path, *, plugins: Plugins | None = None) -> LoadedManifest:
    """Load and validate a manifest.

    The keys plugins own are validated by the installed plugins (`plugins`, else those
    `load_plugins()` finds), so an unknown key fails here whichever schema it falls under.
    """
    path = Path(path)
    if not path.is_file():
        above = manifest_above(path)
        raise ManifestError(
            f"{path}: no such manifest file",
            hint=f"pass -m {above}, or run from {above.parent}"
            if above is not None
            else "pass --manifest PATH, or run `crucible init` to scaffold one",
        )
    path = path.resolve()
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise ManifestError(f"{path}: larger than {MAX_MANIFEST_BYTES} bytes; this is not a manifest")
    text = path.read_bytes()
    raw = parse_text(path, text)
    manifest, tables = structure_with_tables(path, raw)
    services = parse_services(path, raw, manifest)
    _check_references(path, manifest)
    injects = expand_injects(path, manifest)
    if plugins is None:
        from crucible_core.plugins import load_plugins  # deferred: plugins import the manifest models

        plugins = load_plugins()
    loaded = LoadedManifest(path, manifest, text, injects, tables=tables, services=services)
    if manifest.assembled:
        loaded = attrs.evolve(loaded, components=_load_components(loaded, plugins))
    return attrs.evolve(loaded, settings=loaded.resolve_settings(plugins))


def manifest_above(path: Path) -> Path | None:
    """For a relative manifest path that is not here (a command run from a subdirectory): the
    nearest directory above the current one holding it, as a path relative to here, or None."""
    if path.is_absolute() or path.is_file():
        return None
    here = Path.cwd()
    for directory in here.parents:
        if (directory / path).is_file():
            return Path(os.path.relpath(directory / path, here))
    return None


def parse_services(path: Path, raw: dict[str, Any], m: Manifest) -> tuple[ServiceDeclaration, ...]:
    """The manifest's [[service]] tables, and the [agent].services that name them.

    An argument may not name a path inside the pack (the manifest directory) or the workspace;
    every problem names the service and the field (exit 10), before any workflow compiles.
    """
    workspace = (path.parent / m.workspace.dir).resolve()
    declared = parse_declarations(
        raw.get("service"), forbidden_roots=[path.parent, workspace], source=str(path)
    )
    names = {service.name for service in declared}
    wanted = m.agent.services
    problems = [
        f"[agent].services names {name!r}, which no [[service]] declares"
        for name in wanted
        if name not in names
    ]
    problems += [
        f"[agent].services names {name!r} twice"
        for name in sorted({n for n in wanted if wanted.count(n) > 1})
    ]
    if problems:
        raise _fail(
            path, "; ".join(problems), hint="declare each service in a [[service]] table (docs/services.md)"
        )
    return declared


def _workflow_rules(path: Path, m: Manifest) -> None:
    """[workflow].type must match the lane: a playbook has no [judge]; every other type needs one."""
    if m.workflow is None:
        return
    kind = m.workflow.type
    if kind not in ("autoresearch", "custom", "playbook"):
        raise _fail(path, f"[workflow].type {kind!r} must be autoresearch, custom or playbook")
    if kind == "playbook" and m.judge is not None:
        raise _fail(path, "a playbook carries no [judge]", hint='remove [judge], or use type = "custom"')
    if kind != "playbook" and m.judge is None:
        raise _fail(path, f"a {kind} workflow needs a [judge]", hint='without a judge, use type = "playbook"')


def _load_components(loaded: LoadedManifest, plugins: Plugins) -> tuple[LoadedComponent, ...]:
    """The domains an assembled manifest is made of, loaded by the plugin of the world that assembles them."""
    entry = plugins.registry("world", strict=False).entries.get(ASSEMBLED_WORLD)
    parts = entry.trait("parts") if entry is not None else None
    if entry is None or not isinstance(parts, str):
        # a missing driver, as an unknown [world].kind is: exit 12 naming what to install
        raise PluginError(
            f"{loaded.path}: [composite] and [[component]] assemble one world from other domains' "
            "worlds, and no installed plugin assembles one",
            hint=f"pip install {provider_of('world', ASSEMBLED_WORLD)}, or remove them",
        )
    load: Callable[[LoadedManifest, Plugins], tuple[LoadedComponent, ...]] = import_path(parts)
    return tuple(load(loaded, plugins))
