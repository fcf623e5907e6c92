"""Typed errors a user can cause, each carrying what to do next and a documented exit code."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Process exit codes of the `crucible` CLI (documented in docs/cli.md)."""

    OK = 0  # the run completed: iterations or budget spent, solved, or a task lane finished
    INTERNAL = 1  # a bug in crucible or a plugin; the message says where to report it
    ESCALATED = 2  # the agent escalated (or a block-mode approval was denied): a human is needed
    STOPPED = 3  # an operator stopped or aborted the run
    RUN_FAILED = 4  # the run could not continue: setup, snapshot or restore failed
    MANIFEST = 10  # the manifest is malformed, has unknown keys, or names missing files
    WORKSPACE = 11  # the workspace or state directory is in a state the command refuses
    PLUGIN = 12  # an unknown or duplicate plugin name
    CHECK_FAILED = 13  # `crucible check` found problems
    CONTROL = 14  # no run is reachable over its control bridge, or the bridge refused
    # A remote system a plugin drives (a cluster, an image registry) is unreachable or refused a
    # request; what it means in detail is the raising plugin's to say (deploy-kubernetes: ClusterError).
    REMOTE = 15
    UNSUPPORTED = 16  # a valid manifest uses a section or key this version does not execute
    PREFLIGHT = 17  # a [preflight] start rung failed: the environment is not ready, nothing was spent
    USAGE = 64  # bad command-line usage


class CrucibleError(Exception):
    """Base for every error a user can cause; rendered as one line, never as a traceback."""

    exit_code: ExitCode = ExitCode.INTERNAL

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def render(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class ManifestError(CrucibleError):
    exit_code = ExitCode.MANIFEST


class UnsupportedSectionError(ManifestError):
    """A manifest section this version does not execute: refused rather than silently ignored.

    Its own exit code: the manifest may be perfectly valid, only this release cannot run it.
    """

    exit_code = ExitCode.UNSUPPORTED


class CapabilityUnserved(ManifestError):
    """Work the manifest says needs a capability (`[judge].needs`, `[search].needs`) has nowhere
    to run: not on this machine (`--cap`), and no task runner (a `[deploy]` profile) serves it
    or can carry it out."""


class WorkspaceError(CrucibleError):
    exit_code = ExitCode.WORKSPACE


class ResumeConflict(WorkspaceError):
    """`--resume` found a session log and a world that disagree; both are left as they are."""


class PluginError(CrucibleError):
    exit_code = ExitCode.PLUGIN


class RunFailed(CrucibleError):
    exit_code = ExitCode.RUN_FAILED


class UncoveredGrant(RunFailed):
    """The run would hand the agent something its capability disclosure does not cover."""


class PreflightFailed(RunFailed):
    """A start rung of [preflight] failed before the baseline: no agent turn or measure was spent."""

    exit_code = ExitCode.PREFLIGHT


class CheckFailed(CrucibleError):
    exit_code = ExitCode.CHECK_FAILED


class ControlError(CrucibleError):
    exit_code = ExitCode.CONTROL


class UsageError(CrucibleError):
    exit_code = ExitCode.USAGE
