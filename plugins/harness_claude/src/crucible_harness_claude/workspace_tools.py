"""The `anthropic` harness's tools: read, write, edit, list and run a command, confined to the workspace.

File tools resolve every path (symlinks included) and refuse one that lands outside the
workspace. The command tool runs `sh -c` in the workspace under the core supervisor with a
deadline no later than the turn's; like any shell it can reach what the engine's user can
(see docs/agents.md), the confinement is of the file tools.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from crucible_core.api import AgentFileRefused, read_regular, run_process
from crucible_harness_claude.events import clip

# What one tool call may hand back to the model: enough to read a source file or a test log's
# tail, small enough not to flood the context window.
MAX_OUTPUT_CHARS = 30_000
# A file the read and edit tools load whole: source files and logs, never a planted giant.
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_LIST_ENTRIES = 1000
DEFAULT_COMMAND_SECONDS = 300.0

SCHEMAS: list[dict[str, Any]] = [
    {
        "name": "read_file",
        "description": "Read a text file of the workspace. Paths are relative to the workspace root.",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "offset": {"type": "integer", "description": "first line to return, 1-based"},
                "limit": {"type": "integer", "description": "how many lines to return"},
            },
            "required": ["path"],
        },
    },
    {
        "name": "write_file",
        "description": "Create or replace a file of the workspace with the given content.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
    {
        "name": "edit_file",
        "description": "Replace old_string with new_string in a workspace file. old_string must occur "
        "exactly once unless replace_all is true.",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
                "replace_all": {"type": "boolean"},
            },
            "required": ["path", "old_string", "new_string"],
        },
    },
    {
        "name": "list_dir",
        "description": "List a workspace directory (directories end with /).",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "default: the workspace root"}},
        },
    },
    {
        "name": "run_command",
        "description": "Run a shell command (sh -c) in the workspace root and return its exit code and output.",
        "input_schema": {
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "timeout_seconds": {"type": "number", "description": f"default {DEFAULT_COMMAND_SECONDS:g}"},
            },
            "required": ["command"],
        },
    },
]


class ToolError(Exception):
    """A tool call the model got wrong: reported back to it as an error result, never raised further."""


@attrs.frozen
class WorkspaceTools:
    root: Path
    env: Mapping[str, str]
    remaining: Callable[[], float | None]  # seconds left in the turn, None without a deadline

    @classmethod
    def for_workspace(cls, workspace: Path, env: Mapping[str, str], deadline: float | None) -> WorkspaceTools:
        def remaining() -> float | None:
            return None if deadline is None else deadline - time.monotonic()

        return cls(workspace.resolve(), env, remaining)

    def call(self, name: str, tool_input: Mapping[str, Any]) -> tuple[str, bool]:
        """Run one tool; returns (text for the model, is_error)."""
        handler = getattr(self, f"_tool_{name}", None)
        if handler is None or name not in {s["name"] for s in SCHEMAS}:
            return f"unknown tool {name!r}", True
        try:
            return clip(handler(tool_input), MAX_OUTPUT_CHARS), False
        except ToolError as exc:
            return str(exc), True
        except (OSError, UnicodeDecodeError, ValueError, TypeError) as exc:
            return f"{name} failed: {exc}", True

    def resolve(self, raw: object) -> Path:
        if not isinstance(raw, str) or not raw:
            raise ToolError("path must be a non-empty string")
        candidate = Path(raw)
        resolved = (candidate if candidate.is_absolute() else self.root / candidate).resolve()
        if resolved != self.root and self.root not in resolved.parents:
            raise ToolError(f"{raw} is outside the workspace; paths are relative to its root")
        return resolved

    def _read(self, path: Path, args: Mapping[str, Any]) -> str:
        """A workspace file's text, read the way the engine reads anything the agent wrote:
        a regular file only (a FIFO there never blocks the turn), bounded."""
        try:
            return read_regular(path, MAX_FILE_BYTES).decode("utf-8")
        except FileNotFoundError:
            raise ToolError(f"{args.get('path')} does not exist") from None
        except AgentFileRefused as exc:
            raise ToolError(f"{args.get('path')}: {exc}") from None

    # -- the tools ------------------------------------------------------------------------

    def _tool_read_file(self, args: Mapping[str, Any]) -> str:
        path = self.resolve(args.get("path"))
        lines = self._read(path, args).splitlines(keepends=True)
        offset = max(int(args.get("offset") or 1), 1)
        limit = int(args.get("limit") or len(lines) or 1)
        return "".join(lines[offset - 1 : offset - 1 + limit])

    def _tool_write_file(self, args: Mapping[str, Any]) -> str:
        path = self.resolve(args.get("path"))
        content = args.get("content")
        if not isinstance(content, str):
            raise ToolError("content must be a string")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        return f"wrote {len(content)} characters to {path.relative_to(self.root)}"

    def _tool_edit_file(self, args: Mapping[str, Any]) -> str:
        path = self.resolve(args.get("path"))
        old, new = args.get("old_string"), args.get("new_string")
        if not isinstance(old, str) or not isinstance(new, str) or not old:
            raise ToolError("old_string (non-empty) and new_string must be strings")
        text = self._read(path, args)
        count = text.count(old)
        if count == 0:
            raise ToolError("old_string was not found in the file")
        if count > 1 and not args.get("replace_all"):
            raise ToolError(f"old_string occurs {count} times; make it unique or set replace_all")
        path.write_text(text.replace(old, new), encoding="utf-8")
        return f"replaced {count if args.get('replace_all') else 1} occurrence(s) in {path.relative_to(self.root)}"

    def _tool_list_dir(self, args: Mapping[str, Any]) -> str:
        path = self.resolve(args.get("path") or ".")
        if not path.is_dir():
            raise ToolError(f"{args.get('path')} is not a directory")
        names = sorted(p.name + ("/" if p.is_dir() else "") for p in path.iterdir() if p.name != ".git")
        shown = names[:MAX_LIST_ENTRIES]
        more = f"\n... and {len(names) - len(shown)} more" if len(names) > len(shown) else ""
        return "\n".join(shown) + more if shown else "(empty)"

    def _tool_run_command(self, args: Mapping[str, Any]) -> str:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError("command must be a non-empty string")
        timeout = float(args.get("timeout_seconds") or DEFAULT_COMMAND_SECONDS)
        left = self.remaining()
        if left is not None:
            if left <= 0:
                raise ToolError("the turn's deadline has passed")
            timeout = min(timeout, left)
        done = run_process(command, cwd=self.root, env=self.env, timeout=max(timeout, 0.1))
        status = "timed out and was killed" if done.timed_out else f"exit code {done.exit_code}"
        half = MAX_OUTPUT_CHARS // 2 - 100
        return f"{status}\n--- stdout ---\n{done.stdout[-half:]}\n--- stderr ---\n{done.stderr[-half:]}"
