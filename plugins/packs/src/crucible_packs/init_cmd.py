"""`crucible init`: scaffold a crucible.toml and the files it names from a template, never overwriting anything."""

from __future__ import annotations

import os
from pathlib import Path

import click

from crucible_core.api import (
    DEFAULT_STATE_DIR_NAME,
    InitTemplate,
    PluginError,
    Plugins,
    UsageError,
    WorkspaceError,
    ignored,
    load_plugins,
    provider_of,
    repo_option,
    repository_root,
)

# The directories a run makes beside its manifest (every template keeps [workspace].dir here).
RUN_DIRS = ("workspace", DEFAULT_STATE_DIR_NAME)
REPO_PATH_LINE = 'path = "."'
DEFAULT_TEMPLATE = "claude"  # crucible-plugin-harness-claude's (registry.PROVIDERS names it)


class _InitCommand(click.Command):
    """`init --help` lists the installed templates (plugins register them, so only the help asks)."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        templates = load_plugins().registry("init template", strict=False)
        with formatter.section("Templates"):
            formatter.write_dl([(name, templates.entries[name].value.summary) for name in templates.names()])
        super().format_epilog(ctx, formatter)


@click.command("init", cls=_InitCommand)
@click.option(
    "--dir",
    "directory",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("."),
    show_default=True,
    help="Where to write the files (your repository's root, or a directory inside it).",
)
@click.option(
    "--template",
    "template_name",
    default=DEFAULT_TEMPLATE,
    show_default=True,
    metavar="NAME",
    help="What to start from: an installed template (listed below).",
)
@click.option(
    "--pack",
    default=None,
    metavar="NAME",
    help="Instead of a template: copy the installed domain pack NAME into <dir>/NAME, to read and run.",
)
@repo_option
def init_command(directory: Path, template_name: str, pack: str | None, repo: Path | None) -> None:
    """Scaffold a crucible.toml and the files it names. Refuses to overwrite existing files.

    [repo] names the git repository the directory is in (its root may be above --dir), and
    the run's workspace/ and state/ are added to .gitignore so a commit never takes them in.
    With --pack NAME (and --repo PATH): the pack's copy in <dir>/NAME, as `run --pack` makes it.
    """
    if pack is not None or repo is not None:
        _init_pack(directory, pack, repo)
        return
    template = _template(load_plugins(), template_name)
    targets = {rel: directory / rel for rel in template.files}
    existing = [str(p) for p in targets.values() if p.exists()]
    if existing:
        raise WorkspaceError(
            f"refusing to overwrite {', '.join(existing)}",
            hint="edit the existing files, or run `crucible init --dir` somewhere else",
        )
    root = repository_root(directory)
    repo_path = os.path.relpath(root, directory.resolve()) if root is not None else "."
    directory.mkdir(parents=True, exist_ok=True)
    for rel, path in targets.items():
        text = template.files[rel]
        if rel == "crucible.toml":
            # the repository may be above --dir: [repo].path names its root, relative to the manifest
            text = text.replace(REPO_PATH_LINE, f'path = "{Path(repo_path).as_posix()}"', 1)
        path.write_text(text, encoding="utf-8")
        if rel in template.executable:
            os.chmod(path, 0o755)
    wrote = [str(p) for p in targets.values()]
    added = _ignore_run_dirs(directory, root)
    if added:
        wrote.append(f"{directory / '.gitignore'} (+ {' '.join(added)})")
    click.echo(f"wrote {', '.join(wrote)} ({template.name} template)")
    if root is None and REPO_PATH_LINE in template.files["crucible.toml"]:
        click.echo(
            "not a git repository yet: the run clones one, so first "
            "`git init && git add -A && git commit -m start` (.gitignore keeps workspace/ and state/ out)"
        )
    click.echo(f"next: {template.next_step}")


def _template(plugins: Plugins, name: str) -> InitTemplate:
    """The registered template `name`; one the standard set has names its distribution when absent."""
    registry = plugins.registry("init template")
    if name in registry:
        template: InitTemplate = registry.get(name, where="--template")
        return template
    installed = ", ".join(registry.names()) or "none"
    provider = provider_of("init template", name)
    if provider:
        raise PluginError(
            f"the {name!r} template comes with {provider}, which is not installed "
            f"(installed templates: {installed})",
            hint=f"pip install {provider}, or pick an installed template with --template",
        )
    raise UsageError(f"no init template {name!r}; installed templates: {installed}")


def _init_pack(directory: Path, pack: str | None, repo: Path | None) -> None:
    from crucible_packs import domain_pack

    if pack is None:
        raise UsageError("--repo applies a domain pack to a repository", hint="pass --pack NAME with it")
    directory.mkdir(parents=True, exist_ok=True)
    prepared = domain_pack.prepare(load_plugins(), pack, repo, base=directory)
    click.echo(f"copied pack {prepared.pack.label} into {prepared.manifest.parent}")
    where = "" if directory.resolve() == Path.cwd().resolve() else f"cd {directory} && "
    against = f" --repo {repo.resolve()}" if repo is not None else ""  # still right after the cd
    click.echo(
        f"next: {where}crucible check --pack {pack}{against}, then crucible run --pack {pack}{against}"
    )


def _ignore_run_dirs(directory: Path, root: Path | None) -> list[str]:
    """Append the run's directories to `directory`/.gitignore unless something already ignores them."""
    base = root or directory.resolve()
    prefix = directory.resolve().relative_to(base).as_posix()
    missing = [name for name in RUN_DIRS if not ignored(base, name if prefix == "." else f"{prefix}/{name}")]
    if not missing:
        return []
    path = directory / ".gitignore"
    before = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    lines = [f"/{name}/" for name in missing]
    text = ("" if not before or before.endswith("\n") else "\n") + "# crucible's working copy and run state\n"
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text + "\n".join(lines) + "\n")
    return lines
