"""The compile child: `python -m crucible_workflow_starlark.child`, a JSON request on stdin, a JSON answer on stdout.

It lowers its own address-space limit first, so an allocation no in-process bound caught
fails here rather than in the engine.
"""

from __future__ import annotations

import contextlib
import json
import resource
import sys
from pathlib import Path

from crucible_workflow_starlark.bounds import Bounds
from crucible_workflow_starlark.diagnostics import Diagnostic


def main() -> None:
    request = json.loads(sys.stdin.read())
    bounds = Bounds(**request["bounds"])
    # The data limit is the memory bound itself: one builtin call (a list or string repeated
    # a hundred million times) allocates in a single step, before the evaluation's next
    # resident-memory check, so only a limit the kernel enforces holds it to the bound.
    for which, limit in (
        (resource.RLIMIT_AS, bounds.address_space_bytes),
        (resource.RLIMIT_DATA, bounds.heap_bytes),
    ):
        with contextlib.suppress(ValueError, OSError):  # a platform without the limit still compiles
            resource.setrlimit(which, (limit, limit))
    sys.setrecursionlimit(2000)
    from crucible_workflow_starlark.compiler import CompileFailed, Compiler

    try:
        compiler = Compiler(
            Path(request["pack"]),
            request["entry"],
            request["params"],
            bounds,
            tuple(request.get("supplied", ())),
        )
        document = compiler.compile()
        answer = {"ok": True, "workflow": document}
    except CompileFailed as exc:
        answer = {"ok": False, "diagnostics": [d.to_json() for d in exc.diagnostics]}
    except MemoryError:
        diag = Diagnostic(request["entry"], 1, 1, "compilation ran out of its memory bound")
        answer = {"ok": False, "diagnostics": [diag.to_json()]}
    except RecursionError:
        diag = Diagnostic(request["entry"], 1, 1, "the source nests too deeply to compile")
        answer = {"ok": False, "diagnostics": [diag.to_json()]}
    except Exception as exc:  # a compiler bug still answers with a diagnostic, not a traceback
        diag = Diagnostic(request["entry"], 1, 1, f"internal compiler error: {type(exc).__name__}: {exc}")
        answer = {"ok": False, "diagnostics": [diag.to_json()]}
    sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
