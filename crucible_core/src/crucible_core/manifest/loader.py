"""Loading a crucible.toml: parse, validate every rule, resolve paths, and freeze from the base commit."""

from __future__ import annotations

import glob
import hashlib
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from crucible_core.errors import ManifestError, UnsupportedSectionError
from crucible_core.manifest.converter import converter, describe_structure_error
from crucible_core.manifest.models import (
    UNSUPPORTED_AGENT_KEYS,
    UNSUPPORTED_AGENT_TABLES,
    UNSUPPORTED_SECTIONS,
    UNSUPPORTED_WORKSPACE_KEYS,
    InjectEntry,
    Manifest,
)

GLOB_CHARS = set("*?[")

ReadPristine = Callable[[Path, str], "bytes | None"]


@attrs.frozen
class ResolvedInject:
    source: Path  # absolute
    destination: str  # workspace-relative, posix
    frozen: bool


@attrs.frozen
class LoadedManifest:
    """A validated manifest with every path resolved against the manifest directory."""

    path: Path
    manifest: Manifest
    text: bytes  # the exact bytes parsed (the frozen ones when frozen loading applied)
    injects: tuple[ResolvedInject, ...]
    warnings: tuple[str, ...] = ()
    frozen_from_base: bool = False

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


def _is_within(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


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


def _refuse_unsupported(path: Path, raw: dict[str, Any]) -> None:
    def refuse(section: str) -> UnsupportedSectionError:
        return UnsupportedSectionError(
            f"{path}: [{section}] is not supported by this version of crucible",
            hint="remove the section, or use a crucible release that executes it",
        )

    for section in UNSUPPORTED_SECTIONS:
        if section in raw:
            raise refuse(section)
    agent = raw.get("agent")
    if isinstance(agent, dict):
        for table in UNSUPPORTED_AGENT_TABLES:
            if table in agent:
                raise refuse(f"agent.{table}")
        for key in UNSUPPORTED_AGENT_KEYS:
            if key in agent:
                raise refuse(f"agent].{key} (the openshell backend) [")
    workspace = raw.get("workspace")
    if isinstance(workspace, dict):
        for key in UNSUPPORTED_WORKSPACE_KEYS:
            if key in workspace:
                raise refuse(f"workspace.{key}")


def structure(path: Path, raw: dict[str, Any]) -> Manifest:
    _refuse_unsupported(path, raw)
    try:
        manifest = converter.structure(raw, Manifest)
    except Exception as exc:  # cattrs raises several error types; all are manifest errors here
        problems = describe_structure_error(exc)
        raise _fail(path, "; ".join(problems), hint="see `crucible help manifest` for every key") from None
    _validate_rules(path, manifest)
    return manifest


def _plain_relative(value: str) -> bool:
    if not value or value.startswith("/"):
        return False
    # Split the raw text: Path("./x") would silently normalise the "." away.
    return all(part not in (".", "..") for part in value.split("/"))


def _validate_rules(path: Path, m: Manifest) -> None:
    if m.repo is None:
        raise _fail(path, "[repo] is required", hint='add [repo] with path = "." or url = "..."')
    if (m.repo.url is None) == (m.repo.path is None):
        raise _fail(path, "[repo] must set exactly one of url and path")
    if m.judge is not None:
        if m.judge.selftest is not None and m.judge.selftest.runs < 1:
            raise _fail(path, "[judge.selftest].runs must be at least 1")
        if m.judge.measure_timeout is not None and m.judge.measure_timeout <= 0:
            raise _fail(path, "[judge].measure_timeout must be positive")
        if m.judge_kind() == "command" and not (m.judge.measure_cmd or "").strip():
            raise _fail(path, "[judge].measure_cmd is required (and not empty) for the command judge")
    world = m.world
    if (world.snapshot_cmd is None) != (world.restore_cmd is None):
        raise _fail(path, "[world].snapshot_cmd and [world].restore_cmd must come as a pair")
    agent = m.agent
    if agent.goal is not None and agent.goal_file is not None:
        raise _fail(path, "[agent] sets both goal and goal_file; keep one")
    if agent.backend == "command" and not agent.agent_cmd:
        raise _fail(path, '[agent].agent_cmd is required when backend = "command"')
    if agent.turn_timeout is not None and agent.turn_timeout <= 0:
        raise _fail(path, "[agent].turn_timeout must be positive")
    for entry in m.workspace.carry_forward:
        if not _plain_relative(entry.rstrip("/")):
            raise _fail(
                path,
                f"[workspace].carry_forward entry {entry!r} must be a plain relative path (no '.', '..' or leading '/')",
            )
    if not m.workspace.dir or Path(m.workspace.dir).is_absolute():
        raise _fail(path, "[workspace].dir must be a path relative to the manifest directory")


def expand_injects(path: Path, m: Manifest) -> tuple[ResolvedInject, ...]:
    """Expand string, directory and glob injects into one entry per regular file, sorted."""
    base = path.parent.resolve()
    resolved: list[ResolvedInject] = []
    for index, entry in enumerate(m.workspace.inject):
        where = f"[workspace].inject[{index}]"
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
    return tuple(resolved)


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
        ("toolbox_dir", agent.toolbox_dir, True),
    ):
        if value is None:
            continue
        target = base / value
        ok = target.is_dir() if want_dir else target.is_file()
        if not ok:
            kind = "directory" if want_dir else "file"
            raise _fail(path, f"[agent].{key} names {value!r}, which is not a {kind} under {base}")
    if m.repo is not None and m.repo.path is not None and m.workspace.setup_cmd is None:
        repo = (base / m.repo.path).resolve()
        if not repo.is_dir():
            raise _fail(path, f"[repo].path {m.repo.path!r} is not a directory")


def load_manifest(path: Path, *, read_pristine: ReadPristine | None = None) -> LoadedManifest:
    """Load and validate a manifest; freeze it from the workspace's base commit when it lives inside."""
    path = Path(path)
    if not path.is_file():
        raise ManifestError(
            f"{path}: no such manifest file",
            hint="pass --manifest PATH, or run `crucible init` to scaffold one",
        )
    path = path.resolve()
    text = path.read_bytes()
    manifest = structure(path, parse_text(path, text))
    warnings: list[str] = []
    frozen = False
    workspace = (path.parent / manifest.workspace.dir).resolve()
    if _is_within(path, workspace):
        pristine = read_pristine(workspace, path.relative_to(workspace).as_posix()) if read_pristine else None
        if pristine is None:
            warnings.append(
                f"WARNING: {path.name} lives inside its workspace and no pristine base commit exists yet; "
                "trusting the working tree for this run only (later runs load it from the base commit)"
            )
        else:
            if pristine != text:
                warnings.append(
                    f"{path.name} differs from the copy in the workspace's base commit; "
                    "using the base commit's copy (edits to the manifest inside the workspace do not apply)"
                )
            text = pristine
            manifest = structure(path, parse_text(path, text))
            frozen = True
    _check_references(path, manifest)
    injects = expand_injects(path, manifest)
    return LoadedManifest(path, manifest, text, injects, tuple(warnings), frozen)
