"""The `anthropic` harness: a compact agent loop on the anthropic SDK, for hosts without the Claude Code CLI.

Each step streams one Messages API call, emits its blocks as agent events as each block
completes, runs the tool calls it asked for (workspace_tools, and the tools of the turn's MCP
servers through the mcp SDK client, named mcp__<server>__<tool> as the Claude CLI names them:
mcp_tools), and goes on until the model ends its turn, the step cap, or the deadline. Cost comes from the usage of every call, priced
by the one pricing table. It has no continuation store, so it refuses a logical session rather
than silently starting each turn afresh.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from crucible_core.api import FailureClass, HarnessContext, ManifestError, Turn, TurnResult
from crucible_harness_claude import events
from crucible_harness_claude.pricing import Usage, cost_usd, price_of
from crucible_harness_claude.settings import DEFAULT_MODEL
from crucible_harness_claude.workspace_tools import SCHEMAS, WorkspaceTools

if TYPE_CHECKING:
    import anthropic

    from crucible_harness_claude.mcp_tools import McpTools

DEFAULT_BASE_URL = "https://api.anthropic.com"
MAX_TOKENS = 16_000
MAX_STEPS = 80
NO_DEADLINE_TIMEOUT = 600.0  # seconds one model call may take when the turn has no deadline
# Overload and rate limits are worth a short wait while the turn has time left; two more tries.
RETRIES = 2
RETRY_BACKOFF_SECONDS = 2.0

SYSTEM_PROMPT = """\
You are a coding agent working unattended in a workspace directory (the current directory of \
every command you run). Use the tools to read, change and test the code; file paths are relative \
to the workspace root and cannot leave it. Nobody will answer questions during the turn. When \
the change is made, or you decide no change is worth making, reply with a short summary and no \
tool call: that ends your turn."""


class _Deadline(Exception):
    pass


@attrs.frozen
class AnthropicHarness:
    max_steps: int = MAX_STEPS

    @classmethod
    def from_context(cls, ctx: HarnessContext) -> AnthropicHarness:
        if ctx.agent.session:
            raise ManifestError(
                f'harness "anthropic" cannot continue [agent].session = "{ctx.agent.session}" across turns',
                hint='use harness = "claude" for a logical session, or remove [agent].session',
            )
        return cls()

    def preflight(self, env: Mapping[str, str]) -> list[str]:
        if env.get("ANTHROPIC_API_KEY") or env.get("ANTHROPIC_AUTH_TOKEN"):
            return []
        return [
            "no credentials: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) in [agent].env or the environment"
        ]

    def run(self, turn: Turn) -> TurnResult:
        if turn.session:
            return TurnResult(
                False, FailureClass.AGENT, note=f"harness anthropic cannot continue session {turn.session!r}"
            )
        key = turn.env.get("ANTHROPIC_API_KEY")
        token = turn.env.get("ANTHROPIC_AUTH_TOKEN")
        if not key and not token:
            return TurnResult(
                False,
                FailureClass.PROVIDER,
                note="no credentials: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) in [agent].env",
            )
        import anthropic

        started = time.monotonic()
        deadline = None if turn.deadline_seconds is None else started + turn.deadline_seconds
        client = anthropic.Anthropic(
            api_key=key or None,
            auth_token=token or None,
            # Only the turn's environment counts: the engine's own must not leak in.
            base_url=turn.env.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL,
            max_retries=0,
        )
        mcp = None
        if turn.mcp_servers:
            from crucible_harness_claude.mcp_tools import McpTools

            mcp = McpTools.discover(turn.mcp_servers, deadline)
            for problem in mcp.problems:
                turn.emit("note", {"text": f"anthropic harness: {problem}", "level": "warn"})
        loop = _Loop(
            turn, client, WorkspaceTools.for_workspace(turn.workspace, turn.env, deadline), deadline, mcp
        )
        try:
            return loop.run(self.max_steps)
        finally:
            client.close()


@attrs.define
class _Loop:
    turn: Turn
    client: anthropic.Anthropic
    tools: WorkspaceTools
    deadline: float | None
    mcp: McpTools | None = None  # the turn's MCP servers' tools, when it has servers
    model: str = ""
    definitions: list[dict[str, Any]] = attrs.field(factory=list)  # every tool the model is offered
    usage: Usage = attrs.field(factory=Usage)
    steps: int = 0

    def __attrs_post_init__(self) -> None:
        self.model = self.turn.model or DEFAULT_MODEL
        self.definitions = [*SCHEMAS, *(self.mcp.definitions() if self.mcp is not None else [])]

    @property
    def cost(self) -> float:
        return cost_usd(self.model, self.usage)

    def run(self, max_steps: int) -> TurnResult:
        import anthropic

        read_timeout, broken_transport = _transport_errors()
        _, priced = price_of(self.model)
        self.turn.emit(
            events.AGENT_START,
            {"harness": "anthropic", "model": self.model, "tools": len(self.definitions), "priced": priced},
        )
        messages: list[dict[str, Any]] = [{"role": "user", "content": self.turn.prompt}]
        final_text = ""
        try:
            while self.steps < max_steps:
                self.steps += 1
                message = self._step(messages)
                messages.append({"role": "assistant", "content": [_block_param(b) for b in message.content]})
                texts = [b.text for b in message.content if b.type == "text"]
                final_text = "\n".join(texts) or final_text
                calls = [b for b in message.content if b.type == "tool_use"]
                if message.stop_reason != "tool_use" or not calls:
                    return self._finish(True, "end_turn", final_text)
                messages.append({"role": "user", "content": [self._run_tool(c) for c in calls]})
            return self._finish(False, "max_steps", final_text)
        except _Deadline:
            return self._fail(FailureClass.TIMEOUT, "the turn outlived its deadline")
        except (anthropic.APITimeoutError, read_timeout):
            # Raised before the response (the SDK's error) or mid-stream (the HTTP client's).
            left = self._left()
            if left is not None and left <= 0.5:
                return self._fail(
                    FailureClass.TIMEOUT, "the turn outlived its deadline waiting for the model"
                )
            return self._fail(FailureClass.PROVIDER, "the model API timed out")
        except anthropic.APIStatusError as exc:
            note = f"the model provider failed (HTTP {exc.status_code}): {exc.message}"
            return self._fail(FailureClass.PROVIDER, note)
        except anthropic.APIConnectionError as exc:
            return self._fail(FailureClass.PROVIDER, f"could not reach the model API: {exc}")
        except anthropic.APIResponseValidationError as exc:
            return self._fail(
                FailureClass.STREAM, f"the model API answered with something undecodable: {exc}"
            )
        except broken_transport as exc:
            return self._fail(FailureClass.STREAM, f"the model's event stream broke off: {exc!r}")

    def _left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def _step(self, messages: list[dict[str, Any]]) -> Any:
        import anthropic

        for attempt in range(RETRIES + 1):
            left = self._left()
            if left is not None and left <= 0:
                raise _Deadline
            try:
                return self._stream(messages, left)
            except (
                anthropic.RateLimitError,
                anthropic.InternalServerError,
                anthropic.APIConnectionError,
            ) as exc:
                if isinstance(exc, anthropic.APITimeoutError) or attempt == RETRIES:
                    raise
                wait = RETRY_BACKOFF_SECONDS * (attempt + 1)
                left = self._left()
                if left is not None and left <= wait:
                    raise
                status = getattr(exc, "status_code", None)
                self.turn.emit(
                    events.AGENT_RETRY,
                    {"attempt": attempt + 1, "error_status": status, "delay_ms": int(wait * 1000)},
                )
                time.sleep(wait)
        raise AssertionError("unreachable")

    def _stream(self, messages: list[dict[str, Any]], left: float | None) -> Any:
        extra: dict[str, Any] = {}
        if self.turn.effort:
            extra["output_config"] = {"effort": self.turn.effort}
        with self.client.messages.stream(
            model=self.model,
            max_tokens=MAX_TOKENS,
            system=SYSTEM_PROMPT,
            # The SDK types these as its own TypedDicts; ours are the same JSON shapes built as plain
            # dicts (tools from JSON Schema, messages from API replies), so only the static type differs.
            tools=self.definitions,  # type: ignore[arg-type]
            messages=messages,  # type: ignore[arg-type]
            # Without a turn deadline a stalled server still must not hold the turn forever.
            timeout=left if left is not None else NO_DEADLINE_TIMEOUT,
            **extra,
        ) as stream:
            for event in stream:
                if event.type == "content_block_stop":
                    self._emit_block(event.content_block)
                left = self._left()
                if left is not None and left <= 0:
                    raise _Deadline
            message = stream.get_final_message()
        step_usage = Usage.of(message.usage)
        self.usage = self.usage + step_usage
        self.turn.emit(
            events.AGENT_USAGE,
            {**step_usage.as_fields(), "cost_usd": cost_usd(self.model, step_usage), "models": [self.model]},
        )
        return message

    def _emit_block(self, block: Any) -> None:
        if block.type == "text" and block.text:
            self.turn.emit(events.AGENT_TEXT, {"text": events.clip(block.text)})
        elif block.type == "thinking" and block.thinking:
            self.turn.emit(events.AGENT_THINKING, {"text": events.clip(block.thinking)})
        elif block.type == "tool_use":
            self.turn.emit(
                events.AGENT_TOOL_CALL,
                {"id": block.id, "name": block.name, "input": events.clip_value(dict(block.input or {}))},
            )

    def _run_tool(self, call: Any) -> dict[str, Any]:
        tool_input = call.input if isinstance(call.input, Mapping) else {}
        if self.mcp is not None and call.name in self.mcp:
            text, is_error = self.mcp.call(call.name, tool_input)
        else:
            text, is_error = self.tools.call(call.name, tool_input)
        self.turn.emit(
            events.AGENT_TOOL_RESULT, {"id": call.id, "is_error": is_error, "content": events.clip(text)}
        )
        return {"type": "tool_result", "tool_use_id": call.id, "content": text, "is_error": is_error}

    def _finish(self, ok: bool, subtype: str, text: str) -> TurnResult:
        self.turn.emit(
            events.AGENT_RESULT,
            {
                "ok": ok,
                "subtype": subtype,
                "turns": self.steps,
                "cost_usd": self.cost,
                "text": events.clip(text),
            },
        )
        if ok:
            return TurnResult(
                True,
                cost_usd=self.cost,
                note=events.clip(f"anthropic finished in {self.steps} steps; {text}", 300),
            )
        return TurnResult(
            False,
            FailureClass.AGENT,
            cost_usd=self.cost,
            note=f"the agent used all {self.steps} steps without ending its turn",
        )

    def _fail(self, failure: FailureClass, note: str) -> TurnResult:
        self.turn.emit(
            events.AGENT_RESULT,
            {
                "ok": False,
                "subtype": failure.value,
                "turns": self.steps,
                "cost_usd": self.cost,
                "text": events.clip(note),
            },
        )
        return TurnResult(False, failure, cost_usd=self.cost, note=events.clip(note, 600))


def _transport_errors() -> tuple[type[Exception], type[Exception]]:
    """The HTTP client's read-timeout and transport-error classes, which escape the SDK mid-stream."""
    try:
        import httpx2  # what the SDK is built on in its newer releases

        return httpx2.TimeoutException, httpx2.TransportError
    except ImportError:
        import httpx

        return httpx.TimeoutException, httpx.TransportError


def _block_param(block: Any) -> dict[str, Any]:
    """An assistant content block as it goes back to the API in the next request."""
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "thinking":
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if block.type == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.data}
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    dumped: dict[str, Any] = block.model_dump(exclude_none=True)
    return dumped
