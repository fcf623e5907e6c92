"""A snippet run in a fresh interpreter, for tests of what importing or a first use loads."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any


def json_printed_by(code: str) -> Any:
    """The JSON a fresh interpreter prints running `code` (dedented first); it must exit 0."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
