"""A minimal MCP server over stdio (newline-delimited JSON-RPC) with one tool, `echo`.

Run as `python mcp_stdio.py`: an agent program that is handed this server can list and call
its tool, which answers with the text it was given plus a fixed marker, so a test can see the
call went through.
"""

from __future__ import annotations

import json
import sys
from typing import Any

MARKER = "mcp-echo-reply"

TOOL = {
    "name": "echo",
    "description": "Echo the given text back.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}


def answer(request: dict[str, Any]) -> dict[str, Any] | None:
    method = request.get("method")
    if "id" not in request:
        return None  # a notification (notifications/initialized and the like)
    if method == "initialize":
        version = (request.get("params") or {}).get("protocolVersion", "2025-06-18")
        result: Any = {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "crucible-test-echo", "version": "1.0"},
        }
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        text = ((request.get("params") or {}).get("arguments") or {}).get("text", "")
        result = {"content": [{"type": "text", "text": f"{MARKER}: {text}"}], "isError": False}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": f"no {method}"}}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def main() -> None:
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            request = json.loads(line)
        except ValueError:
            continue
        reply = answer(request)
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
